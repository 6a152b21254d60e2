"""geomlin.tables: the one ConstantTables, the one device cache and its one reset, and who may write it.

Oracles: the source tree itself (parsed with ``ast``: what is defined where), counted builder calls,
and the tensors handed in.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

import geomlin
from geomlin import tables
from geomlin.algebra import pga
from geomlin.tables import ConstantTables, clear_caches, device_cache, in_cache, table_on
from tests.test_declarations import CASES, IDS, build_case

ROOT = Path(geomlin.__file__).parent
SOURCES = sorted(ROOT.rglob("*.py"))


def _module_level_containers(tree: ast.Module) -> set[str]:
    """Names bound at module level to a dict / set / list display or constructor call."""
    names = set()
    for node in tree.body:
        target = value = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
        if target is None:
            continue
        if isinstance(value, (ast.Dict, ast.Set, ast.List)) or (
                isinstance(value, ast.Call) and getattr(value.func, "id", None) in ("dict", "set", "list",
                                                                                     "OrderedDict", "defaultdict")):
            names.add(target)
    return names


def _get_or_fill(source: str) -> list[str]:
    """``"function fills NAME"`` for every function that both reads and writes one module-level container."""
    tree = ast.parse(source)
    containers = _module_level_containers(tree)
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        reads, writes = set(), set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in containers:
                (writes if isinstance(node.ctx, ast.Store) else reads).add(node.value.id)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id in containers:
                if node.func.attr in ("get", "setdefault", "move_to_end"):
                    reads.add(node.func.value.id)
                if node.func.attr in ("setdefault", "update", "add", "append"):
                    writes.add(node.func.value.id)
            elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
                reads.update(c.id for c in node.comparators if isinstance(c, ast.Name) and c.id in containers)
        found += [f"{fn.name} fills {name}" for name in sorted(reads & writes)]
    return found


def test_one_constant_tables_class():
    where = [f"{p.relative_to(ROOT.parent)}" for p in SOURCES for node in ast.walk(ast.parse(p.read_text()))
             if isinstance(node, ast.ClassDef) and "Tables" in node.name]
    assert where == ["geomlin/tables.py"], where


def test_one_device_cache_and_one_reset():
    """One function caches tables on devices and one forgets them (``reset_parameters`` of modules and
    ``functools``' own ``cache_clear`` of pure builders are not resets of a cache of geomlin's)."""
    caches, resets = [], []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                where = f"{path.relative_to(ROOT.parent)}:{node.name}"
                if "device_cache" in node.name or node.name in ("cached_constant", "device_tables_cache"):
                    caches.append(where)
                if node.name.lstrip("_").startswith(("clear", "reset")) and node.name != "reset_parameters":
                    resets.append(where)
            elif isinstance(node, ast.Attribute) and node.attr == "cache_clear":
                resets.append(f"{path.relative_to(ROOT.parent)}:{node.attr}")
    assert caches == ["geomlin/tables.py:device_cache"], caches
    assert resets == ["geomlin/tables.py:clear_caches"], resets


def test_no_module_level_get_or_fill_dict_outside_tables():
    found = [f"{path.relative_to(ROOT.parent)}: {f}" for path in SOURCES if path != ROOT / "tables.py"
             for f in _get_or_fill(path.read_text())]
    assert not found, "module-level caches outside geomlin/tables.py:\n" + "\n".join(found)


def test_the_get_or_fill_finder_finds_the_shapes_the_library_used_to_have():
    """The oracle of the test above: hand-written caches (``.get`` then store, ``in`` then store,
    ``setdefault``), and a registry filled at import (written, never read back) that is not one."""
    caches = ("_HITS: dict = {}\ndef f(k):\n    hit = _HITS.get(k)\n    if hit is None:\n        hit = _HITS[k] = k\n"
              "    return hit\n"
              "def g(k):\n    if k not in _HITS:\n        _HITS[k] = k\n    return _HITS[k]\n"
              "def h(k):\n    return _HITS.setdefault(k, [])\n")
    assert _get_or_fill(caches) == ["f fills _HITS", "g fills _HITS", "h fills _HITS"]
    registry = "_BUILDERS = {}\ndef register(kind):\n    def wrap(fn):\n        _BUILDERS[kind] = fn\n        return fn\n    return wrap\n"
    assert _get_or_fill(registry) == []


def test_device_cache_builds_once_per_device_and_dtype():
    calls = []

    def build():
        calls.append(1)
        return torch.tensor([0.5, -1.0], dtype=torch.float64), torch.tensor([2, 0])

    key = ("test:device-cache", 1)
    a = device_cache(key, build, "cpu", torch.float32)
    b = device_cache(key, build, torch.device("cpu"), torch.float32)
    assert a is b and len(calls) == 1
    assert a[0].dtype == torch.float32 and a[1].dtype == torch.int64  # index tables keep their dtype
    c = device_cache(key, build, "cpu", torch.float64)
    assert len(calls) == 2 and c[0].dtype == torch.float64
    assert in_cache(key, "cpu", torch.float32) and not in_cache(key, "cpu", torch.bfloat16)
    clear_caches()
    assert not in_cache(key, "cpu", torch.float32)
    device_cache(key, build, "cpu", torch.float32)
    assert len(calls) == 3


def test_device_cache_copies_what_it_moves_and_keeps_host_values_as_built():
    source = torch.ones(3, dtype=torch.float64)
    moved = device_cache(("test:copy",), lambda: source, "cpu", torch.float64)
    source.zero_()
    assert moved.sum() == 3  # a copy: the builder's (often functools-cached) tensor is not aliased
    plan = object()
    assert device_cache(("test:host",), lambda: plan) is plan


def test_device_cache_keeps_at_most_keep_entries_of_a_family():
    for i in range(5):
        device_cache(("test:family", i), lambda i=i: i, keep=2)
    assert [in_cache(("test:family", i)) for i in range(5)] == [False, False, False, True, True]


def test_constant_tables_hold_tuples_and_refuse_unknown_keys():
    t = ConstantTables({"pair": (torch.eye(2, dtype=torch.float64), torch.arange(3)), ("key", 1): torch.ones(2)})
    assert t.keys() == ("pair", ("key", 1)) and "pair" in t and "other" not in t
    a, b = t.parts("pair", torch.float32)
    assert a.dtype == torch.float32 and b.dtype == torch.int64
    assert t.get(("key", 1)).dtype == torch.float64  # stored float64 whatever was handed in
    with pytest.raises(KeyError, match="other"):
        t.get("other")
    with pytest.raises(TypeError, match="tuple of tensors"):
        ConstantTables({"bad": (torch.ones(1), 3)})


def test_table_on_reads_the_module_tables_before_the_cache():
    build_calls = []

    def build():
        build_calls.append(1)
        return torch.full((2,), 3.0, dtype=torch.float64)

    own = ConstantTables({"test:table": torch.full((2,), 7.0, dtype=torch.float64)})
    assert table_on("test:table", build, "cpu", torch.float32, tables=own).tolist() == [7.0, 7.0]
    assert not build_calls and not in_cache("test:table", "cpu", torch.float32)
    assert table_on("test:table", build, "cpu", torch.float32).tolist() == [3.0, 3.0]
    assert len(build_calls) == 1 and in_cache("test:table", "cpu", torch.float32)


def test_a_plain_kernel_call_fills_the_cache():
    """Positive control of the sweep below: a plain kernel call writes the cache on its first call."""
    clear_caches()
    x = torch.randn(3, 16)
    pga.join(x, x)
    assert tables._CACHE


@pytest.mark.parametrize("index", range(len(CASES)), ids=IDS)
def test_no_forward_writes_the_process_wide_cache(index):
    """Every declared module reads its tables from its own buffers: its forward adds nothing to the cache."""
    cls, i, factory = CASES[index]
    module, args, kwargs = build_case(factory, i)
    before = set(tables._CACHE)
    module(*args, **kwargs)
    written = set(tables._CACHE) - before
    assert not written, f"{cls.__name__}'s forward wrote {sorted(map(str, written))[:5]}"
