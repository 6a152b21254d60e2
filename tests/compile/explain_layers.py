"""Graph breaks of every declared module class under ``torch.compile`` (triage for issue 21).

Runs ``torch._dynamo.explain`` on each example of ``tests/*/declared_examples.py`` (float32 inputs,
the cases of :mod:`tests.test_declarations`) and prints one line per example: the number of graphs,
of graph breaks, and the first break's reason with the file:line where it happened. Nothing is
compiled with inductor (explain only traces), so the sweep takes a minute or two.

Run::

    OMP_NUM_THREADS=1 python -m tests.compile.explain_layers [-k substring]
"""

from __future__ import annotations

import argparse
import time
import traceback

import torch

from tests.test_declarations import CASES, IDS, build_case


def first_break(explained) -> str:
    """The first break's reason and the innermost user frame (file:line) it names."""
    if not explained.break_reasons:
        return ""
    reason = explained.break_reasons[0]
    where = ""
    if reason.user_stack:
        frame = reason.user_stack[-1]
        where = f" at {frame.filename.split('geomlin/')[-1]}:{frame.lineno}"
    text = " ".join(str(reason.reason).split())
    return f"{text[:300]}{where}"


def explain_case(factory, index: int):
    """``(graphs, breaks, first reason)`` of one declared example."""
    module, args, kwargs = build_case(factory, index)
    module.eval()
    with torch.no_grad():
        module(*args, **kwargs)  # fills the host-side caches before tracing, as a first training step does
        torch._dynamo.reset()
        explained = torch._dynamo.explain(module)(*args, **kwargs)
    return explained.graph_count, explained.graph_break_count, first_break(explained)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="only the examples whose id contains this substring")
    ns = parser.parse_args(argv)
    clean = total = 0
    for (cls, index, factory), case_id in zip(CASES, IDS):
        if ns.k not in case_id:
            continue
        total += 1
        start = time.perf_counter()
        try:
            graphs, breaks, reason = explain_case(factory, index)
        except Exception as err:  # noqa: BLE001 -- triage: report and go on
            graphs, breaks = -1, -1
            reason = f"ERROR {type(err).__name__}: {' '.join(str(err).split())[:300]}"
            tb = traceback.extract_tb(err.__traceback__)
            inner = [f for f in tb if "geomlin/" in f.filename]
            if inner:
                reason += f" at {inner[-1].filename.split('geomlin/')[-1]}:{inner[-1].lineno}"
        clean += breaks == 0
        print(f"{cls.__module__.split('.')[1]:8s} {case_id:28s} graphs={graphs:3d} breaks={breaks:3d} "
              f"{time.perf_counter() - start:6.1f}s {reason}", flush=True)
    print(f"{clean}/{total} examples trace as one graph")


if __name__ == "__main__":
    main()
