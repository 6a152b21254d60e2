"""The package layout the style guide promises: imports point down the floors, no module shares a
basename with one on another floor of the same package, and ``geomlin/__init__`` lists every
subpackage."""

import ast
from pathlib import Path

import geomlin

ROOT = Path(geomlin.__file__).parent
#: Subpackages (and top-level modules) in import order: each may import only from those before it.
ORDER = ["validation", "io_atomic", "neighbors", "groups", "reps", "testing", "linear", "algebra", "clifford", "gatr", "frames", "gaunt",
         "datasets", "models", "train", "deploy", "cli", "__main__"]


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("geomlin."):
            yield node.module, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("geomlin."):
                    yield alias.name, node.lineno


def test_every_top_level_name_has_a_floor():
    names = {p.stem if p.is_file() else p.name for p in ROOT.iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    assert names <= set(ORDER), f"add {sorted(names - set(ORDER))} to ORDER (and to docs/concepts.md)"


def test_imports_point_down_the_floors():
    floor = {name: i for i, name in enumerate(ORDER)}
    upward = []
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts == ("__init__",):
            continue
        here = floor[parts[0]]
        for module, line in _imports(path):
            target = module.split(".")[1]
            if floor.get(target, -1) > here:
                upward.append(f"{path.relative_to(ROOT.parent)}:{line} imports {module}")
    assert not upward, "imports from a higher floor:\n" + "\n".join(upward)


def test_no_basename_repeats_on_another_floor_of_a_package():
    clashes = []
    for pkg in [p for p in ROOT.rglob("*") if (p / "__init__.py").is_file()]:
        mine = {p.stem for p in pkg.glob("*.py") if p.stem != "__init__"}
        for sub in pkg.rglob("*.py"):
            if sub.parent != pkg and sub.stem in mine:
                clashes.append(f"{pkg.relative_to(ROOT.parent)}/{sub.stem}.py and {sub.relative_to(ROOT.parent)}")
    assert not clashes, "modules sharing a basename: " + "; ".join(clashes)


def test_package_docstring_lists_every_subpackage():
    subpackages = sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file())
    missing = [s for s in subpackages if f"geomlin.{s}" not in geomlin.__doc__]
    assert not missing, f"geomlin/__init__.py does not list {missing}"
