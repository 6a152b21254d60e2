"""Benchmark: FrameAveraging's overhead over running the backbone |F| times.

Frame averaging evaluates a backbone on every element of the frame (|F| = 8 for E(3),
4 for SE(3)). Its unavoidable cost is therefore |F| x the backbone; everything else
(covariance, 3x3 eigensolves, rotating inputs into each frame, mapping outputs back)
is overhead. The peer is the bare backbone (:class:`geomlin.models.PointNet`) on the
same batch; we report

    ratio = time(FrameAveraging(backbone)) / (|F| * time(backbone))        (target <= 1.15)

for ``frames_per_call=None`` (all frames in one folded backbone call, "all") and for the
default ``"auto"`` (on CPU: |F| calls on B clouds each), and, for reference, the backbone alone on the folded batch of
B * |F| clouds (on CPUs a large folded batch can be slower per cloud). One warm-up,
then interleaved timed runs; medians. Forward (inference) and forward + backward (training).

    python benchmarks/bench_frames.py [--quick] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from geomlin.frames import FrameAveraging
from geomlin.models import PointNet


def _timer(fn, backward: bool):
    def run():
        if backward:
            out = fn()
            out.square().sum().backward()
        else:
            with torch.no_grad():
                fn()
    return run


def _measure(fns: dict, repeats: int) -> dict:
    """Interleaved timing of every callable ``repeats`` times; medians in seconds."""
    times = {k: [] for k in fns}
    for fn in fns.values():  # warm-up
        fn()
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, finishes in well under 60 s")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    B, N = (8, 128) if args.quick else (32, 512)
    repeats = args.repeats or (5 if args.quick else 11)
    backbone = PointNet(num_classes=10)
    pos = torch.randn(B, N, 3) * torch.tensor([2.0, 1.0, 0.5])

    rows = []
    for group in ("E3", "SE3"):
        fa = FrameAveraging(backbone, group, "invariant", frames_per_call=None)
        fa_chunked = FrameAveraging(backbone, group, "invariant")  # "auto": one frame per call on CPU
        F = fa.num_frames
        folded = pos.repeat_interleave(F, dim=0)
        for backward in (False, True):
            t = _measure({
                "fa": _timer(lambda fa=fa: fa(pos), backward),
                "fa1": _timer(lambda fa=fa_chunked: fa(pos), backward),
                "backbone": _timer(lambda: backbone(pos), backward),
                "folded": _timer(lambda folded=folded: backbone(folded), backward),
            }, repeats)
            mode = "fwd+bwd" if backward else "fwd"
            rows.append((group, F, mode, "all", t["backbone"], t["folded"], t["fa"],
                         t["fa"] / (F * t["backbone"]), t["fa"] / t["folded"]))
            rows.append((group, F, mode, "auto", t["backbone"], t["folded"], t["fa1"],
                         t["fa1"] / (F * t["backbone"]), t["fa1"] / t["folded"]))

    print(f"FrameAveraging(PointNet) vs |F| x PointNet, B={B} clouds x N={N} points, float32, "
          f"{args.threads} threads, median of {repeats}")
    header = (f"{'group':<6}{'|F|':>4} {'mode':<8}{'per call':>9}{'backbone ms':>12}{'B*|F| ms':>10}"
              f"{'FA ms':>9}{'FA/(|F|*bb)':>13}{'FA/folded':>11}")
    print(header)
    print("-" * len(header))
    for g, F, mode, chunk, tb, tf, tfa, ratio, ratio_f in rows:
        print(f"{g:<6}{F:>4} {mode:<8}{chunk:>9}{tb * 1e3:>12.2f}{tf * 1e3:>10.2f}{tfa * 1e3:>9.2f}"
              f"{ratio:>13.3f}{ratio_f:>11.3f}")
    print("target: FA/(|F|*bb) <= 1.15. 'per call': frames_per_call (None -> 'all' frames folded into one "
          "call; 'auto' -> one call per frame element on CPU); 'B*|F| ms': the backbone alone on the folded batch.")


if __name__ == "__main__":
    main()
