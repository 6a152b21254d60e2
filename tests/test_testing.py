"""The shared checker catches broken functions and speaks feature types, e3nn Irreps and callables."""

import pytest
import torch
from e3nn import o3

from geomlin.groups import E3, SE3, O, S
from geomlin.reps import Positions, Scalars, V, Vectors
from geomlin.testing import assert_equivariant, assert_invariant, equivariance_check, equivariance_error


def test_detects_a_non_equivariant_function():
    G = O(3)
    err = equivariance_error(lambda x: x + torch.tensor([1.0, 0.0, 0.0], dtype=x.dtype), G, V(G), V(G))
    assert err > 1e-2
    with pytest.raises(AssertionError, match="not equivariant"):
        assert_equivariant(lambda x: x.abs(), G, V(G), V(G))


def test_detects_missing_reflection_handling():
    # the cross product is SO(3)- but not O(3)-equivariant (it is a pseudovector)
    def cross(x):
        return torch.linalg.cross(x[..., :3], x[..., 3:])

    from geomlin.groups import SO

    assert_equivariant(cross, SO(3), V(SO(3)) + V(SO(3)), V(SO(3)))
    with pytest.raises(AssertionError):
        assert_equivariant(cross, O(3), V(O(3)) + V(O(3)), V(O(3)))


def test_zero_output_is_refused():
    with pytest.raises(AssertionError, match="all-zero"):
        assert_equivariant(lambda x: 0 * x, O(3), V(O(3)), V(O(3)))
    assert_equivariant(lambda x: 0 * x, O(3), V(O(3)), V(O(3)), allow_zero=True)


def test_point_cloud_actions_and_kwargs():
    pos = torch.randn(10, 3, dtype=torch.float64)
    feat = torch.randn(10, 2, dtype=torch.float64)
    batch = torch.tensor([0] * 4 + [1] * 6)

    def fn(p, f, batch):
        centroid = torch.zeros(2, 3, dtype=p.dtype).index_add_(0, batch, p) / torch.bincount(batch)[:, None]
        rel = p - centroid[batch]
        return centroid[batch] + rel * f[:, :1] + 1.0 * rel, (rel ** 2).sum(-1) + f[:, 1]

    assert_equivariant(fn, E3(), (Positions(3), Scalars(2)), (Positions(3), Scalars()), inputs=(pos, feat),
                       kwargs={"batch": batch})
    # translation-variant function fails under E(3), but passes under a linear group
    with pytest.raises(AssertionError):
        assert_equivariant(lambda p: p * 2.0, SE3(), Positions(3), Positions(3), inputs=pos)
    assert_equivariant(lambda p: p * 2.0, O(3), Positions(3), Positions(3), inputs=pos)


@pytest.mark.parametrize("name, use", [("scalar", "Scalars()"), ("invariant", "Scalars()"), ("vector", "Vectors(d)"),
                                       ("position", "Positions(d)"), ("spinor", "a feature type")])
def test_strings_are_refused_with_the_feature_type_to_use(name, use):
    with pytest.raises(TypeError, match=rf"not strings: for '{name}' pass .*{use.replace('(', '[(]').replace(')', '[)]')}"):
        equivariance_error(lambda x: x, O(3), name, Vectors(3), inputs=torch.ones(2, 3))


def test_group_names_are_groups():
    pos = torch.randn(6, 3, dtype=torch.float64)
    assert_equivariant(lambda p: p - p.mean(0), "E(3)", Positions(3), Vectors(3), inputs=pos)
    assert equivariance_error(lambda p: p, "SO3", Vectors(3), Vectors(3), inputs=pos) < 1e-15


def test_irreps_action():
    irreps_out = o3.Irreps("0e + 1o + 2e")
    assert_equivariant(lambda x: o3.spherical_harmonics(irreps_out, x, normalize=True), O(3),
                       o3.Irreps("1o"), irreps_out)


def test_callable_action_and_none():
    G = S(4)

    def perm_rows(g, x):  # permutes the node axis of (n, features)
        return g.to(x.dtype) @ x

    x = torch.randn(4, 3, dtype=torch.float64)
    assert_equivariant(lambda x, t: x.softmax(0) + 1, G, (perm_rows, None), perm_rows,
                       inputs=(x, torch.randn(2, dtype=torch.float64)))
    assert_invariant(lambda x: x.sum(0) + 1, G, perm_rows, inputs=x)


def test_report_fields():
    rep = equivariance_check(lambda x: x.sum(-1, keepdim=True), O(3), V(O(3)), Scalars(1), num_samples=3)
    assert len(rep.errors) == 3 and rep.max_error > 0.01 and float(rep) == rep.max_error


def test_checker_input_errors():
    G = O(3)
    with pytest.raises(ValueError, match="NaN"):
        equivariance_error(lambda x: x, G, V(G), V(G), inputs=torch.full((2, 3), float("nan")))
    with pytest.raises(ValueError, match="outputs"):
        equivariance_error(lambda x: (x, x), G, V(G), V(G))
    with pytest.raises(TypeError, match="type_in and type_out must be feature types .*got int"):
        equivariance_error(lambda x: x, G, 3, V(G), inputs=torch.ones(2, 3))
    with pytest.raises(TypeError, match="group must be a geomlin group"):
        equivariance_error(lambda x: x, 3, V(G), V(G))
    with pytest.raises(ValueError, match=r"unknown group 'O\(7'"):
        equivariance_error(lambda x: x, "O(7", V(G), V(G))
    with pytest.raises(ValueError, match="does not match its declared type"):
        equivariance_error(lambda x: x, G, V(G), V(G), inputs=torch.ones(2, 4))
    with pytest.raises(ValueError, match="num_samples"):
        equivariance_error(lambda x: x, G, V(G), V(G), num_samples=0)


class _Float32Rotation(torch.nn.Module):
    """A float32 module built on ``nn.Linear`` (no ``.double()`` of its own): ``x -> x W^T`` with an
    orthogonal ``W`` commutes only with the scalar multiples of the identity, so ``W`` is the identity."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3, bias=False)
        with torch.no_grad():
            self.linear.weight.copy_(torch.eye(3) * 2.0)
        self.type_in, self.type_out = V(O(3)), V(O(3))

    def forward(self, x):
        return self.linear(x)


def test_float32_module_is_checked_on_a_float64_copy():
    module = _Float32Rotation()
    report = assert_equivariant(module)
    assert report.max_error < 1e-14  # float64 arithmetic, not float32's 1e-7
    assert module.linear.weight.dtype == torch.float32  # the module itself is untouched
    # explicit float32 inputs are cast too
    assert_equivariant(module, O(3), V(O(3)), V(O(3)), inputs=torch.randn(5, 3))
    # a float32 module that is not equivariant still fails, with the group named
    with torch.no_grad():
        module.linear.weight[0, 1] = 1.0
    with pytest.raises(AssertionError, match=r"not equivariant under O\(3\)"):
        assert_equivariant(module)


def test_failure_names_the_declared_group_and_hints_at_float32():
    class Drift(torch.nn.Module):
        type_in = type_out = V(O(3))

        def forward(self, x):
            return x + 1e-8 * x[..., :1]  # a tiny, non-equivariant drift

    with pytest.raises(AssertionError, match=r"under O\(3\).*float32.*rtol=1e-05"):
        assert_equivariant(Drift())


@pytest.mark.parametrize("option,value,error,phrase", [
    ("rtol", float("nan"), ValueError, "rtol must be finite"),
    ("rtol", -1e-9, ValueError, "rtol must be >= 0"),
    ("rtol", "1e-9", TypeError, "rtol must be a real number"),
    ("atol", 0.0, ValueError, "atol must be > 0"),
    ("atol", float("inf"), ValueError, "atol must be finite"),
    ("batch_size", 0, ValueError, "batch_size must be >= 1"),
    ("dtype", torch.int64, TypeError, "dtype must be a floating"),
    ("kwargs", [1], TypeError, "kwargs must be a dict"),
    ("batch", torch.zeros(3), TypeError, "unexpected keyword argument 'batch'"),
])
def test_bad_checker_options_are_refused(option, value, error, phrase):
    with pytest.raises(error, match=phrase):
        assert_equivariant(lambda x: x, O(3), V(O(3)), V(O(3)), **{option: value})


def test_report_repr_is_a_summary():
    report = equivariance_check(lambda x: x, O(3), V(O(3)), V(O(3)), num_samples=50)
    text = repr(report)
    assert len(text) < 200 and "50 samples x 1 outputs of O(3)" in text, text
    assert len(report.errors) == 50  # the per-sample errors are still there


def test_an_output_of_the_wrong_shape_is_named_not_called_not_equivariant():
    """Issue 34: an output whose shape does not match its declared type is a usage error, said so."""
    G = O(3)
    with pytest.raises(ValueError, match=r"output 0 of .* has shape \(4, 4\), which does not match its declared "
                                         r"type .*\(\.\.\., 3\)"):
        assert_equivariant(lambda x: torch.cat([x, x[..., :1]], -1), G, V(G), V(G))
    with pytest.raises(ValueError, match=r"output 0 of .* has shape \(4, 3\), which does not match its declared "
                                         r"type .*\(\.\.\., 2\)"):  # an invariant of the wrong width
        assert_equivariant(lambda x: x.norm(dim=-1, keepdim=True).expand(4, 3), G, V(G), Scalars(2))
    irreps = o3.Irreps("1x0e+1x1o")
    with pytest.raises(ValueError, match=r"output 0 of .* does not match its declared type Irreps\[1x0e\+1x1o\]"):
        assert_equivariant(lambda x: x[..., :3], G, irreps, irreps)
    with pytest.raises(TypeError, match="output 0 of .* is a tuple"):
        assert_equivariant(lambda x: ((x,),), G, V(G), V(G))
