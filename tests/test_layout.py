"""The package layout the style guide promises: imports point down the floors, no import circles,
no module shares a basename with one on another floor of the same package, and ``geomlin/__init__``
and docs/concepts.md list the floors in the order the code follows."""

import ast
import re
from pathlib import Path

import geomlin

ROOT = Path(geomlin.__file__).parent
#: The floors, lowest first: a module may import only from its own subpackage, the floors below it, and
#: (on the ground floor) the ground modules listed before it. The ground floor is plumbing every package
#: shares and imports nothing else of geomlin's: constant tables and the device cache, the autocast rule,
#: input checks, the batch layouts, the radial bases, the sync-free small-matrix solvers, atomic writes, the neighbour search. ``algebra``
#: (Clifford algebras: numbers, no groups) sits below ``groups``, whose versor groups are built on it.
#: The five layer families share one floor: none imports another (shared pieces move down).
GROUND = ("tables", "precision", "validation", "batching", "radial", "linalg", "io_atomic", "neighbors")
LAYER_FAMILIES = ("linear", "clifford", "gatr", "frames", "gaunt")
FLOORS = [*[(name,) for name in GROUND], ("algebra",), ("groups",), ("reps",), ("testing",), LAYER_FAMILIES,
          ("datasets",), ("models",), ("train",), ("deploy",), ("cli",), ("__main__",)]
#: Every top-level name in floor order (the order docs/concepts.md and geomlin/__init__ list).
ORDER = [name for floor in FLOORS for name in floor]
#: Modules meant for users only, which no module of the library imports.
LEAVES = ("geomlin.gatr.primitives",)
#: Most lines of a file under geomlin/ (one idea per module).
MAX_LINES = 600
#: Files over MAX_LINES that another branch is splitting (none now).
SPLIT_BY_OTHER_BRANCHES: set[str] = set()
#: Import circles another branch removes: listed so that this test guards everything else, and checked
#: to still exist, so an entry is deleted as soon as its circle is gone.
KNOWN_CIRCLES: list[set[str]] = []


def _imports(path: Path):
    """``(module, line, names)`` of every geomlin import in ``path``, function-level ones included."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("geomlin."):
            yield node.module, node.lineno, [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("geomlin."):
                    yield alias.name, node.lineno, []


def _module_graph() -> dict[str, set[str]]:
    """Module -> the geomlin modules it imports (``from pkg import sub`` counts as importing ``pkg.sub``)."""
    modules = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in modules.items():
        targets = set()
        for module, _, names in _imports(path):
            subs = [f"{module}.{n}" for n in names if f"{module}.{n}" in modules]
            targets.update(subs if subs and len(subs) == len(names) else [module, *subs])
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_top_level_name_has_a_floor():
    names = {p.stem if p.is_file() else p.name for p in ROOT.iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    assert names <= set(ORDER), f"add {sorted(names - set(ORDER))} to ORDER (and to docs/concepts.md)"


def _floor_of() -> dict[str, int]:
    return {name: i for i, floor in enumerate(FLOORS) for name in floor}


def _cross_imports():
    """``(path, line, importing top name, imported module, imported top name)`` of every import between
    two top-level names (subpackages or modules of geomlin)."""
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts == ("__init__",):
            continue
        for module, line, _ in _imports(path):
            target = module.split(".")[1]
            if target != parts[0]:
                yield path.relative_to(ROOT.parent), line, parts[0], module, target


def _upward(rows) -> list[str]:
    """The rows of [`_cross_imports`] that import from the same or a higher floor."""
    floor = _floor_of()
    return [f"{path}:{line} imports {module}" for path, line, here, module, target in rows
            if floor.get(target, -1) >= floor[here]]


def _sideways(rows) -> list[str]:
    """The rows of [`_cross_imports`] from one layer family to another."""
    return [f"{path}:{line} imports {module}" for path, line, here, module, target in rows
            if here in LAYER_FAMILIES and target in LAYER_FAMILIES]


def test_imports_point_down_the_floors():
    upward = _upward(_cross_imports())
    assert not upward, "imports from the same or a higher floor:\n" + "\n".join(upward)


def test_the_ground_floor_imports_only_the_ground_floor():
    """Tables, precision, checks, solvers, atomic writes, neighbours: plumbing, built on nothing above."""
    above = [f"{path}:{line} imports {module}" for path, line, here, module, target in _cross_imports()
             if here in GROUND and target not in GROUND]
    assert not above, "the ground floor imports from above it:\n" + "\n".join(above)


def test_the_five_layer_families_stand_on_one_floor():
    assert LAYER_FAMILIES in FLOORS
    between = _sideways(_cross_imports())
    assert not between, "a layer family imports another (move the shared piece down):\n" + "\n".join(between)


def test_the_floor_checks_find_what_they_look_for():
    """The oracle of the tests above: hand-made imports, one of each kind."""
    rows = [("a.py", 1, "gaunt", "geomlin.linear.tables", "linear"),      # sideways, between families
            ("b.py", 2, "validation", "geomlin.algebra", "algebra"),      # up, from the ground floor
            ("c.py", 3, "precision", "geomlin.tables", "tables"),         # down, within the ground floor
            ("d.py", 4, "models", "geomlin.gaunt.conv", "gaunt")]         # down
    assert _sideways(rows) == ["a.py:1 imports geomlin.linear.tables"]
    assert _upward(rows) == ["a.py:1 imports geomlin.linear.tables", "b.py:2 imports geomlin.algebra"]


def test_leaves_are_imported_by_no_library_module():
    importers = [f"{path}:{line} imports {module}" for path in ROOT.rglob("*.py")
                 for module, line, names in _imports(path)
                 if any(leaf in (module, *(f"{module}.{n}" for n in names)) for leaf in LEAVES)]
    assert not importers, "modules for users only, imported by the library:\n" + "\n".join(importers)


def test_no_file_is_longer_than_the_limit():
    long = {str(p.relative_to(ROOT.parent)): n for p in ROOT.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert set(long) <= SPLIT_BY_OTHER_BRANCHES, \
        f"files over {MAX_LINES} lines (split them along their seams): {sorted(set(long) - SPLIT_BY_OTHER_BRANCHES)}"
    done = SPLIT_BY_OTHER_BRANCHES - set(long)
    assert not done, f"{sorted(done)} are no longer over {MAX_LINES} lines: remove them from SPLIT_BY_OTHER_BRANCHES"


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


def test_no_import_circles():
    """No module imports (directly or through others, at module or function level) one that imports it."""
    circles = _circles(_module_graph())
    unknown = [sorted(c) for c in circles if c not in KNOWN_CIRCLES]
    assert not unknown, "import circles:\n" + "\n".join(" <-> ".join(c) for c in unknown)
    gone = [sorted(c) for c in KNOWN_CIRCLES if c not in circles]
    assert not gone, f"{gone} is no longer a circle: remove it from KNOWN_CIRCLES"


def test_the_circle_finder_finds_a_circle():
    """The oracle of the test above: a hand-made graph with one circle of three and a tail."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"a"}}
    assert _circles(graph) == [{"a", "b", "c"}]


def _listed_floors(text: str) -> list[str]:
    """The ``geomlin.<floor>`` names in ``text``, in order of first appearance."""
    out = []
    for name in re.findall(r"geomlin\.(\w+)", text):
        if name in ORDER and name not in out:
            out.append(name)
    return out


def test_the_documented_floor_order_is_the_order_the_code_follows():
    """``geomlin/__init__``'s list and the order sentence of docs/concepts.md follow ORDER."""
    in_docstring = _listed_floors(geomlin.__doc__)
    assert in_docstring == [f for f in ORDER if f in in_docstring], in_docstring
    concepts = (ROOT.parent / "docs" / "concepts.md").read_text()
    sentence = re.search(r"a test enforces the order\s+`([^`]*)`", concepts).group(1)
    documented = [name.strip() for name in sentence.split(",")]
    assert documented == [f for f in ORDER if f in documented], documented
    assert set(ORDER) - set(documented) <= {"__main__"}, set(ORDER) - set(documented)


def test_no_module_imports_another_modules_private_names():
    """A helper two modules share is public (named without ``_``) where it lives, documented and tested."""
    private = []
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("geomlin"):
                private += [f"{path.relative_to(ROOT.parent)}:{node.lineno} imports {a.name} from {node.module}"
                            for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    assert not private, "imports of private names:\n" + "\n".join(private)
