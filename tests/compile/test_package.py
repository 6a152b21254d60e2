"""AOTInductor packages of geomlin's models run without geomlin (issue 21).

Oracle: the eager model. Each case is packaged (:func:`geomlin.deploy.package`), then loaded in
a child Python that cannot import geomlin (an import blocker, checked in the child), run there on
saved inputs of other sizes than the example's, and its outputs compared to eager (float32,
rtol 1e-5). A bad input to a loaded package (species out of range, NaN positions) is refused by
``geomlin.load``'s checks, and species out of range also by the graph of a bare package.
All slow: each AOTInductor compile takes 30-60 s on a CPU.
"""

import subprocess
import sys
import textwrap

import pytest
import torch

from geomlin import deploy
from tests.compile.test_export import _flat, export_case, resized

RTOL, ATOL = 1e-5, 1e-5
#: One model per family: GATr, the Gaunt potential (energy and forces), EGNN, PONITA, a frames model.
CASES = [("nbody", "gatr"), ("molecules", "gaunt"), ("molecules", "egnn"), ("nbody", "ponita"),
         ("pointcloud", "frame_avg")]

#: Run in the child: block geomlin, check that it is blocked, run the package on the saved inputs.
CHILD = textwrap.dedent("""
    import sys

    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if name == "geomlin" or name.startswith("geomlin."):
                raise ImportError("geomlin is blocked in this process")
            return None

    sys.meta_path.insert(0, Blocker())
    try:
        import geomlin  # noqa: F401
    except ImportError:
        pass
    else:
        raise SystemExit("geomlin is importable in the child")
    import torch

    package, inputs, outputs = sys.argv[1:4]
    model = torch._inductor.aoti_load_package(package)
    args, kwargs = torch.load(inputs)
    with torch.no_grad():
        out = model(*args, **kwargs)
    torch.save(list(out) if isinstance(out, (tuple, list)) else [out], outputs)
    print("ran without geomlin")
""")


@pytest.mark.slow
@pytest.mark.parametrize("task_name, name", [pytest.param(t, n, id=f"{t}-{n}") for t, n in CASES])
def test_package_runs_without_geomlin_equal_to_eager(task_name, name, tmp_path):
    model, args, kwargs = export_case(task_name, name)
    path = tmp_path / "model.pt2"
    meta = deploy.package(model, path, args, kwargs, metadata={"task": task_name, "model": name})
    print(f"{task_name}-{name}: export {meta['export_seconds']:.1f} s, compile {meta['compile_seconds']:.1f} s")
    new_args, new_kwargs = resized(model, args, kwargs)
    p_args, p_kwargs = deploy.program_inputs(model, new_args, new_kwargs)
    torch.save((list(p_args), p_kwargs), tmp_path / "inputs.pt")
    (tmp_path / "child.py").write_text(CHILD)
    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-I", str(tmp_path / "child.py"), str(path), str(tmp_path / "inputs.pt"),
                           str(tmp_path / "outputs.pt")], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ran without geomlin" in done.stdout
    got = torch.load(tmp_path / "outputs.pt")
    expected = _flat(model(*new_args, **new_kwargs))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e.detach(), rtol=RTOL, atol=ATOL)
    loaded = deploy.load(path)
    stored = loaded.metadata
    assert stored["task"] == task_name and stored["model"] == name
    assert stored["type_in"] == deploy.build_metadata(model, args, kwargs)["type_in"]
    if task_name == "molecules":  # a bad input is refused before the graph runs, in one line naming it
        pos, species = p_args
        with pytest.raises(ValueError, match="species"):
            loaded(pos, species + 1000)
        with pytest.raises(ValueError, match="pos contains NaN"):
            loaded(torch.full_like(pos, float("nan")), species)
        raw = torch._inductor.aoti_load_package(str(path))   # the graph's own check, without geomlin's
        with pytest.raises(RuntimeError, match="species must index|index out of bounds"):
            raw(pos, species + 1000)
        torch.testing.assert_close(loaded(*p_args)[1], expected[1].detach(), rtol=RTOL, atol=ATOL)  # still usable
