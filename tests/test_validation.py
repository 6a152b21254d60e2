"""The shared validation helpers: each refuses what it should, with the phrase users see."""

import ast
import math
from pathlib import Path

import numpy as np
import pytest
import torch

import geomlin
from geomlin import validation
from geomlin.groups import SO, O
from geomlin.validation import (
    FileFormatError,
    check_batch_vector,
    check_bool,
    check_choice,
    check_condition,
    check_file,
    check_finite,
    check_float,
    check_int,
    check_mask,
    check_orthogonal,
    check_positive_float,
    check_positive_int,
    check_tensor,
    shape_str,
)


def test_shape_patterns():
    x = torch.zeros(4, 7, 16)
    assert check_tensor(x, "x", shape=(..., 16)) is x
    check_tensor(x, "x", shape=(4, None, 16))
    check_tensor(x, "x", shape=(..., 7, 16))
    check_tensor(torch.zeros(16), "x", shape=(..., 16))
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., 8, 16\) \(multivectors\), got \(4, 7, 16\)"):
        check_tensor(x, "x", shape=(..., 8, 16), what="multivectors")
    with pytest.raises(ValueError, match=r"must have 2 dimension\(s\)"):
        check_tensor(x, "x", ndim=2)
    assert shape_str((3,)) == "(3,)"


@pytest.mark.parametrize("bad,phrase", [
    (torch.zeros(3, dtype=torch.int64), "floating-point dtype, got torch.int64"),
    (torch.zeros(3, dtype=torch.complex64), "floating-point dtype, got torch.complex64"),
    (torch.zeros(3, dtype=torch.bool), "floating-point dtype, got torch.bool"),
    (np.zeros(3), "must be a torch.Tensor, got ndarray"),
    ([1.0, 2.0], "must be a torch.Tensor, got list"),
])
def test_dtype_and_kind_are_refused_not_converted(bad, phrase):
    with pytest.raises(TypeError, match=phrase):
        check_tensor(bad, "x")


def test_finite_and_nonempty():
    with pytest.raises(ValueError, match="x contains NaN or inf"):
        check_tensor(torch.tensor([1.0, math.nan]), "x", finite=True)
    with pytest.raises(ValueError, match="x contains NaN or inf"):
        check_tensor(torch.tensor([math.inf]), "x", finite=True)
    with pytest.raises(ValueError, match="is empty"):
        check_tensor(torch.zeros(0, 3), "x", nonempty=True)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_check_finite_finds_one_bad_value_anywhere(dtype, bad):
    # every position of a non-contiguous tensor (the CPU route reduces min and max, which must propagate NaN)
    x = torch.randn(7, 5).to(dtype).T
    check_finite(x, "x")
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            y = x.clone()
            y[i, j] = bad
            with pytest.raises(ValueError, match="x contains NaN or inf"):
                check_finite(y.T.T, "x")
    assert check_finite(torch.zeros(0), "x").numel() == 0


def test_check_bool():
    assert check_bool(True, "flag") is True
    for bad in (1, 0, "yes", None):
        with pytest.raises(TypeError, match="flag must be a bool"):
            check_bool(bad, "flag")


@pytest.mark.parametrize("value,exc,phrase", [
    (0, ValueError, "n must be >= 1, got 0"),
    (-3, ValueError, "n must be >= 1, got -3"),
    (2.5, TypeError, "n must be an int"),
    (True, TypeError, "n must be an int"),
    ("4", TypeError, "n must be an int"),
])
def test_positive_int(value, exc, phrase):
    with pytest.raises(exc, match=phrase):
        check_positive_int(value, "n")


def test_ints_accept_numpy_and_scalar_tensors():
    assert check_int(np.int64(3), "n") == 3
    assert check_int(torch.tensor(3), "n") == 3
    assert check_positive_int(5, "n", maximum=5) == 5
    with pytest.raises(ValueError, match="<= 5"):
        check_positive_int(6, "n", maximum=5)


def test_floats():
    assert check_positive_float(0.5, "lr") == 0.5
    with pytest.raises(ValueError, match="lr must be > 0.0, got 0.0"):
        check_positive_float(0.0, "lr")
    with pytest.raises(ValueError, match="must be finite"):
        check_float(math.nan, "w")
    with pytest.raises(ValueError, match="w must be >= 0"):
        check_float(-5, "w", minimum=0)
    with pytest.raises(TypeError, match="real number"):
        check_float("1", "w")


def test_choice_and_mask():
    assert check_choice("grid", "method", ("grid", "fft")) == "grid"
    with pytest.raises(ValueError, match="method must be one of 'grid', 'fft', got 'fast'"):
        check_choice("fast", "method", ("grid", "fft"))
    with pytest.raises(TypeError, match=r"mask must have dtype torch.bool .* mask.bool\(\)"):
        check_mask(torch.ones(3), "mask")
    check_mask(torch.ones(2, 3, dtype=torch.bool), "mask", shape=(2, 3))
    with pytest.raises(ValueError, match=r"mask must have shape \(2, 4\)"):
        check_mask(torch.ones(2, 3, dtype=torch.bool), "mask", shape=(2, 4))


def test_batch_vector():
    check_batch_vector(torch.tensor([0, 0, 1, 2]), "batch", 4)
    with pytest.raises(ValueError, match="one entry per item"):
        check_batch_vector(torch.tensor([0, 1]), "batch", 3)
    with pytest.raises(ValueError, match="sorted"):
        check_batch_vector(torch.tensor([1, 0]), "batch", 2)
    with pytest.raises(ValueError, match="non-negative"):
        check_batch_vector(torch.tensor([-1, 0]), "batch", 2)
    with pytest.raises(TypeError, match="integer dtype"):
        check_batch_vector(torch.tensor([0.0, 1.0]), "batch", 2)


def test_orthogonality_and_determinant():
    R = SO(3).sample(2).to(torch.float32)
    check_orthogonal(R, "R", special=True)
    shear = torch.eye(3)
    shear[0, 1] = 0.5
    with pytest.raises(ValueError, match="must be orthogonal"):
        check_orthogonal(shear, "R")
    refl = O(3).sample(1)[0]
    refl = refl * torch.sign(torch.linalg.det(refl))  # a rotation
    refl[:, 0] = -refl[:, 0]                          # now a reflection
    with pytest.raises(ValueError, match=r"rotations \(det \+1\)"):
        check_orthogonal(refl, "R", special=True)
    check_orthogonal(refl, "R", special=False)


def test_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="file not found"):
        check_file(tmp_path / "missing.xyz")
    with pytest.raises(FileNotFoundError, match="not a file"):
        check_file(tmp_path)
    err = FileFormatError(tmp_path / "a.xyz", "expected 4 columns, got 3", line=7)
    assert str(err).endswith("a.xyz:7: expected 4 columns, got 3") and isinstance(err, ValueError)


def test_memory_bound_and_broadcast_messages():
    from geomlin.validation import MEMORY_LIMIT_BYTES, check_broadcastable, check_memory

    assert check_memory(MEMORY_LIMIT_BYTES, "a tensor") == MEMORY_LIMIT_BYTES  # at the bound: accepted
    with pytest.raises(ValueError, match=r"a table of n=9 would need about 16.0 GiB \(estimated\), above the "
                                         r"limit of 8 GiB .*; use n <= 4"):
        check_memory(16 * 2**30, "a table of n=9", "use n <= 4")
    assert check_broadcastable(("a", (4, 1)), ("b", (3,))) == (4, 3)
    with pytest.raises(ValueError, match=r"the batch shapes of a, b must be equal or broadcastable, got a \(4,\), b \(5,\)"):
        check_broadcastable(("a", (4,)), ("b", (5,)), what="batch shapes")


def test_check_condition_counts_nan_as_failed_and_takes_python_bools():
    with pytest.raises(ValueError, match="must hold"):
        check_condition(torch.tensor([1.0, float("nan")]), "must hold")  # NaN is not a satisfied condition
    with pytest.raises(ValueError, match="must hold"):
        check_condition(torch.tensor(float("nan")), "must hold")
    check_condition(torch.tensor([1.0, 2.0]), "must hold")  # non-zero numbers are True
    check_condition(True, "must hold")
    check_condition(np.bool_(True), "must hold")
    with pytest.raises(ValueError, match="must hold"):
        check_condition(False, "must hold")
    with pytest.warns(UserWarning, match="odd"):
        check_condition(False, "odd", error=UserWarning)
    with pytest.raises(TypeError, match="a condition must be a bool or a boolean tensor, got str"):
        check_condition("yes", "must hold")


def test_the_cpu_never_defers_and_nothing_is_pending_outside_a_scope():
    with validation.deferred_checks():
        with pytest.raises(ValueError, match="x contains NaN"):  # inside a scope too: the CPU reads for free
            check_finite(torch.tensor([float("nan")]), "x")
        assert validation.pending_checks() == 0
    validation.raise_deferred()  # outside a scope: nothing to read
    assert validation.pending_checks() == 0


def _compiling_branches() -> list[tuple[str, list[str]]]:
    """``(module, [class, ] function)`` of every ``is_compiling()`` call in geomlin."""
    root = Path(geomlin.__file__).parent
    found = []

    def visit(node, module, stack):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.ClassDef)):
                visit(child, module, [*stack, child.name])
                continue
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) \
                    and child.func.attr in ("is_compiling", "is_dynamo_compiling", "is_exporting"):
                found.append((module, stack))
            visit(child, module, stack)

    for path in sorted(root.rglob("*.py")):
        visit(ast.parse(path.read_text()), ".".join(path.relative_to(root).with_suffix("").parts), [])
    return found


def test_the_validation_docstring_lists_every_is_compiling_branch():
    """One list of what compiled code does differently: every branch on ``torch.compiler.is_compiling()``
    is named (``module.function``, or ``module.Class`` for a method) in geomlin.validation's docstring."""
    branches = _compiling_branches()
    assert len(branches) >= 15  # the walk finds them (oracle: the count when the list was written)
    doc = validation.__doc__
    missing = [".".join([m, *stack]) for m, stack in branches
               if not any(".".join([m, *stack[:j]]) in doc for j in range(1, len(stack) + 1))]
    assert not missing, f"add these is_compiling() branches to geomlin/validation.py's docstring: {missing}"
