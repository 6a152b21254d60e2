"""Bad input at every public boundary of geomlin.gaunt: the error type and a phrase of its message."""

import pytest
import torch

from geomlin.gaunt import (
    GauntConvolution,
    GauntTensorProduct,
    ManyBodyGaunt,
    SphereGauntProduct,
    gaunt_bracket,
    gaunt_operator,
    gaunt_parity_product,
    gaunt_power,
    gaunt_tensor_product,
    irreps_to_sphere,
    sphere_irreps,
    spherical_harmonics,
    split_parity,
)
from geomlin.gaunt import harmonics as T

X9 = torch.randn(2, 9)
X4 = torch.randn(2, 4)


def _graph(n=4):
    pos = torch.randn(n, 3)
    src, dst = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    keep = src != dst
    return pos, torch.stack([src[keep], dst[keep]])


CASES = [
    # gaunt_tensor_product
    ("size not (L+1)^2", lambda: gaunt_tensor_product(torch.randn(2, 10), X9), ValueError, r"\(L\+1\)\*\*2"),
    ("negative lmax_out", lambda: gaunt_tensor_product(X9, X9, -1), ValueError, "lmax_out must be >= 0"),
    ("float lmax_out", lambda: gaunt_tensor_product(X9, X9, 2.5), TypeError, "lmax_out must be an int"),
    ("lmax_out of a million", lambda: gaunt_tensor_product(X9, X9, 10**6), ValueError,
     r"output \(2, 1000002000001\) \(lmax_out=1000000\) would need about 7,450.6 GiB .*MEMORY_LIMIT_BYTES"),
    ("bool lmax_out", lambda: gaunt_tensor_product(X9, X9, True), TypeError, "lmax_out must be an int"),
    ("integer dtype", lambda: gaunt_tensor_product(torch.ones(2, 9, dtype=torch.long), X9), TypeError, "x1 must have"),
    ("complex dtype", lambda: gaunt_tensor_product(X9, X9.to(torch.complex64)), TypeError, "x2 must have"),
    ("float16", lambda: gaunt_tensor_product(X9.half(), X9.half()), TypeError, "torch.float32 or torch.float64"),
    ("dtype mismatch", lambda: gaunt_tensor_product(X9, X9.double()), TypeError, "same dtype"),
    ("unknown method", lambda: gaunt_tensor_product(X9, X9, method="magic"), ValueError, "method must be one of"),
    ("method not a string", lambda: gaunt_tensor_product(X9, X9, method=3), ValueError, "method must be one of"),
    ("no broadcast", lambda: gaunt_tensor_product(torch.randn(3, 9), torch.randn(2, 9)), ValueError, "do not broadcast"),
    ("0-d tensor", lambda: gaunt_tensor_product(torch.tensor(1.0), X9), ValueError, "at least 1 dimension"),
    ("not a tensor", lambda: gaunt_tensor_product([[1.0]], X9), TypeError, "must be a torch.Tensor"),
    ("direct too large", lambda: gaunt_tensor_product(torch.randn(1, 289), torch.randn(1, 289), 16, method="direct"),
     ValueError, "dense Gaunt tensor"),
    ("triton on cpu", lambda: gaunt_tensor_product(X9, X9, method="triton"), ValueError, "triton"),
    # powers and parity helpers
    ("power nu 0", lambda: gaunt_power(X9, 0), ValueError, "nu must be >= 1"),
    ("power nu bool", lambda: gaunt_power(X9, True), TypeError, "nu must be an int"),
    ("power bad size", lambda: gaunt_power(torch.randn(2, 5), 2), ValueError, r"\(L\+1\)\*\*2"),
    ("pseudo irreps to sphere", lambda: irreps_to_sphere(torch.randn(4), "1x0e+1x1e"), ValueError, "split_parity"),
    ("uneven multiplicity", lambda: irreps_to_sphere(torch.randn(7), "1x0e+2x1o"), ValueError, "same multiplicity"),
    ("irreps dim mismatch", lambda: irreps_to_sphere(torch.randn(5), "1x0e+1x1o"), ValueError, "last dimension 4"),
    ("unparsable irreps", lambda: split_parity(torch.randn(4), "1x0e+"), ValueError, "could not be parsed"),
    ("irreps of wrong kind", lambda: split_parity(torch.randn(4), 4), TypeError, "e3nn Irreps"),
    ("parity 0", lambda: sphere_irreps(2, 3, parity=0), ValueError, "parity must be NATURAL"),
    ("sphere_irreps channels 0", lambda: sphere_irreps(2, 0), ValueError, "channels must be >= 1"),
    ("parity product not a pair", lambda: gaunt_parity_product(X9, (X9, X9)), TypeError, r"\(natural, pseudo\) pair"),
    # SphereGauntProduct
    ("tp negative lmax", lambda: SphereGauntProduct(-1, 1, 1, 2), ValueError, "lmax_in1 must be >= 0"),
    ("tp zero channels", lambda: SphereGauntProduct(1, 1, 1, 0), ValueError, "channels must be >= 1"),
    ("tp float channels", lambda: SphereGauntProduct(1, 1, 1, 2.5), TypeError, "channels must be an int"),
    ("tp bad method", lambda: SphereGauntProduct(1, 1, 1, 2, method="fast"), ValueError, "method must be one of"),
    ("tp channel mismatch", lambda: SphereGauntProduct(1, 1, 1, 4)(torch.randn(2, 3, 4), torch.randn(2, 4, 4)),
     ValueError, "4 channels"),
    ("tp wrong degree", lambda: SphereGauntProduct(1, 1, 1, 4)(torch.randn(2, 4, 9), torch.randn(2, 4, 4)),
     ValueError, "lmax 1"),
    ("tp NaN", lambda: SphereGauntProduct(1, 1, 1, 2)(torch.full((2, 2, 4), float("nan")), torch.randn(2, 2, 4)),
     ValueError, "NaN"),
    ("tp integer input", lambda: SphereGauntProduct(1, 1, 1, 2)(torch.ones(2, 2, 4, dtype=torch.long),
                                                                 torch.randn(2, 2, 4)), TypeError, "x1 must have"),
    # GauntTensorProduct (e3nn's TensorProduct / FullyConnectedTensorProduct)
    ("irreps unparsable", lambda: GauntTensorProduct("2x0e+x", "0e", "0e"), ValueError, "could not be parsed"),
    ("irreps internal without shared", lambda: GauntTensorProduct("0e", "0e", "0e", shared_weights=False,
                                                                  internal_weights=True), ValueError, "internal_weights"),
    ("irreps wrong input size", lambda: GauntTensorProduct("2x0e+1x1o", "0e+1o", "0e")(torch.randn(3, 4), torch.randn(3, 4)),
     ValueError, "last dimension 5"),
    ("irreps missing weight", lambda: GauntTensorProduct("0e+1o", "0e+1o", "0e", shared_weights=False)(
        torch.randn(3, 4), torch.randn(3, 4)), ValueError, "weight is required"),
    ("irreps weight size", lambda: GauntTensorProduct("0e+1o", "0e+1o", "0e", shared_weights=False)(
        torch.randn(3, 4), torch.randn(3, 4), weight=torch.randn(3, 5)), ValueError, r"shape \(\.\.\., 2\)"),
    ("irreps NaN", lambda: GauntTensorProduct("0e+1o", "0e+1o", "0e")(torch.full((3, 4), float("inf")), torch.randn(3, 4)),
     ValueError, "NaN or inf"),
    ("irreps NaN weight", lambda: GauntTensorProduct("0e+1o", "0e+1o", "0e", shared_weights=False)(
        torch.randn(3, 4), torch.randn(3, 4), torch.full((3, 2), float("nan"))), ValueError, "weight contains NaN"),
    ("irreps batches 3 and 5", lambda: GauntTensorProduct("0e+1o", "0e+1o", "0e")(torch.randn(3, 4), torch.randn(5, 4)),
     ValueError, r"x1 \(3,\), x2 \(5,\)"),
    ("irreps integer input", lambda: GauntTensorProduct("0e", "0e", "0e")(torch.ones(2, 1, dtype=torch.long),
                                                                         torch.ones(2, 1)), TypeError, "x1 must have"),
    ("irreps dtype mismatch", lambda: GauntTensorProduct("0e", "0e", "0e")(torch.ones(2, 1), torch.ones(2, 1).double()),
     TypeError, "same dtype"),
    ("instructions impossible path", lambda: GauntTensorProduct("1x1o", "1x1o", "1x1o", [(0, 0, 0, "uvw", True)]),
     ValueError, r"instructions\[0\].*1o x 1o has no 1o"),
    ("instructions unknown mode", lambda: GauntTensorProduct("1x1o", "1x1o", "1x1e", [(0, 0, 0, "uvx", True)]),
     ValueError, "mode must be one of uvw, uvu"),
    ("instructions index out of range", lambda: GauntTensorProduct("1x1o", "1x1o", "1x1e", [(0, 1, 0, "uvw", True)]),
     ValueError, "i_in2 must index the 1 irreps"),
    ("instructions multiplicities of the mode", lambda: GauntTensorProduct("2x1o", "1x1o", "3x1e", [(0, 0, 0, "uvu", True)]),
     ValueError, "needs mul_in1 == mul_out"),
    ("instructions uvw without weights", lambda: GauntTensorProduct("1x1o", "1x1o", "1x1e", [(0, 0, 0, "uvw", False)]),
     ValueError, "has_weight must be True"),
    ("instructions not tuples", lambda: GauntTensorProduct("1x1o", "1x1o", "1x1e", [(0, 0, 0)]), ValueError,
     r"must be a tuple \(i_in1"),
    ("instructions as FC's positional normalization", lambda: GauntTensorProduct("1x1o", "1x1o", "1x1e", "norm"),
     TypeError, "irrep_normalization='norm' by name"),
    ("irrep_normalization unknown", lambda: GauntTensorProduct("1x1o", "1x1o", "1x1e", irrep_normalization="unit"),
     ValueError, "irrep_normalization must be one of"),
    ("path_normalization unknown", lambda: GauntTensorProduct("1x1o", "1x1o", "1x1e", path_normalization="all"),
     ValueError, "path_normalization must be one of"),
    ("normalization conflicts", lambda: GauntTensorProduct("1x1o", "1x1o", "1x1e", normalization="norm",
                                                           irrep_normalization="component"), ValueError, "differ"),
    ("in1_var length", lambda: GauntTensorProduct("1x1o", "1x1o", "1x1e", in1_var=[1.0, 2.0]), ValueError,
     r"in1_var must have one variance per irrep of 1x1o \(1\)"),
    ("negative path weight", lambda: GauntTensorProduct("1x1o", "1x1o", "1x1e", [(0, 0, 0, "uvw", True, -1.0)]),
     ValueError, "negative path_weight"),
    ("shared_weights not a bool", lambda: GauntTensorProduct("1x1o", "1x1o", "1x1e", shared_weights=1), TypeError,
     "shared_weights must be a bool"),
    ("unknown keyword", lambda: GauntTensorProduct("1x1o", "1x1o", "1x1e", channels=3), TypeError, "unexpected keyword"),
    ("weight list of the wrong length", lambda: GauntTensorProduct("1x1o", "1x1o", "1x1e", internal_weights=False)(
        torch.randn(3), torch.randn(3), [torch.randn(1, 1, 1)] * 2), ValueError, "one tensor per trained instruction"),
    # gaunt_operator and gaunt_bracket
    ("operator NaN", lambda: gaunt_operator(torch.full((2, 4), float("nan")), 1, 1), ValueError, "x contains NaN"),
    ("operator int64", lambda: gaunt_operator(torch.ones(2, 4, dtype=torch.long), 1, 1), TypeError, "x must have"),
    ("operator negative degree", lambda: gaunt_operator(X4, -1, 1), ValueError, "lmax_other must be >= 0"),
    ("operator negative output degree", lambda: gaunt_operator(X4, 1, -2), ValueError, "lmax_out must be >= 0"),
    ("operator bad size", lambda: gaunt_operator(torch.randn(2, 5), 1, 1), ValueError, r"\(L\+1\)\*\*2"),
    ("bracket bad size", lambda: gaunt_bracket(torch.randn(2, 5), X9), ValueError, r"\(L\+1\)\*\*2"),
    ("bracket NaN", lambda: gaunt_bracket(X9, torch.full((2, 4), float("nan"))), ValueError, "x2 contains NaN"),
    ("bracket no broadcast", lambda: gaunt_bracket(torch.randn(3, 9), torch.randn(5, 9)), ValueError,
     r"x1 \(3,\), x2 \(5,\)"),
    ("bracket negative lmax_out", lambda: gaunt_bracket(X9, X9, -1), ValueError, "lmax_out must be >= 0"),
    # ManyBodyGaunt
    ("many-body correlation 0", lambda: ManyBodyGaunt(2, 2, 3, correlation=0), ValueError, "correlation must be >= 1"),
    ("many-body channels", lambda: ManyBodyGaunt(1, 1, 3)(torch.randn(2, 2, 4)), ValueError, "3 channels"),
    # GauntConvolution
    ("conv zero cutoff", lambda: GauntConvolution(1, 1, 1, 2, cutoff=0.0), ValueError, "cutoff must be > 0"),
    ("conv negative avg degree", lambda: GauntConvolution(1, 1, 1, 2, avg_degree=-1.0), ValueError, "avg_degree"),
    ("conv unknown keyword", lambda: GauntConvolution(1, 1, 1, 2, hiden=3), TypeError, "unexpected keyword"),
    ("conv pos shape", lambda: GauntConvolution(1, 1, 1, 2)(torch.randn(4, 2, 4), torch.randn(3, 3), _graph()[1]),
     ValueError, "pos must have shape"),
    ("conv float edge_index", lambda: GauntConvolution(1, 1, 1, 2)(torch.randn(4, 2, 4), _graph()[0], _graph()[1].float()),
     TypeError, "edge_index must have int64"),
    ("conv edge out of range", lambda: GauntConvolution(1, 1, 1, 2)(torch.randn(4, 2, 4), _graph()[0], _graph()[1] + 1),
     ValueError, r"edge_index must index nodes in \[0, 4\)"),
    ("conv coincident points", lambda: GauntConvolution(1, 1, 1, 2)(torch.randn(4, 2, 4), torch.zeros(4, 3), _graph()[1]),
     ValueError, "coincident"),
    ("conv NaN positions", lambda: GauntConvolution(1, 1, 1, 2)(torch.randn(4, 2, 4), torch.full((4, 3), float("nan")),
                                                                _graph()[1]), ValueError, "NaN"),
    # tables
    ("sh of degree 10^5", lambda: spherical_harmonics(10**5, torch.zeros(4, 3)), ValueError,
     r"spherical_harmonics\(lmax=100000\) of 4 vectors would need about 149.0 GiB"),
    ("sphere grid of degree 10^5", lambda: T.sphere_grid(10**5), ValueError,
     r"sphere_grid\(lmax_exact=100000\) would need about"),
    ("sh vectors shape", lambda: spherical_harmonics(2, torch.zeros(4, 2)), ValueError, r"shape \(\.\.\., 3\)"),
    ("sh integer vectors", lambda: spherical_harmonics(2, torch.zeros(4, 3, dtype=torch.long)), TypeError, "vectors"),
    ("sh negative lmax", lambda: spherical_harmonics(-1, torch.zeros(4, 3)), ValueError, "lmax must be >= 0"),
    ("legendre zero latitudes", lambda: T.legendre_table(3, 0), ValueError, "num_theta must be >= 1"),
    ("sphere grid negative", lambda: T.sphere_grid(-2), ValueError, "lmax_exact must be >= 0"),
    ("gaunt tensor negative", lambda: T.gaunt_tensor(1, -1, 2), ValueError, "lmax_in2 must be >= 0"),
]


@pytest.mark.parametrize("name,call,error,phrase", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_with_a_clear_message(name, call, error, phrase):
    with pytest.raises(error, match=phrase):
        call()


def test_valid_inputs_still_work():
    assert gaunt_tensor_product(X9, X4).shape == (2, 16)
    assert gaunt_tensor_product(X9, X4, 0, method="direct").shape == (2, 1)
    assert SphereGauntProduct(1, 1, 1, 2)(torch.randn(3, 2, 4), torch.randn(3, 1, 4)).shape == (3, 2, 4)
    assert GauntTensorProduct("2x0e+1x1o", "0e+1o", "1x1o")(torch.randn(3, 5), torch.randn(3, 4)).shape == (3, 3)
    pos, edge_index = _graph()
    assert GauntConvolution(1, 1, 2, 2)(torch.randn(4, 2, 4), pos, edge_index).shape == (4, 2, 9)
    assert spherical_harmonics(0, torch.zeros(1, 3)).shape == (1, 1)


def test_spherical_harmonics_of_the_zero_vector_are_the_documented_row():
    """The documented result (spherical_harmonics' Returns): Y_0 = 1 / sqrt(4 pi), zeros for l > 0, as e3nn's."""
    import math

    from e3nn import o3

    for normalize in (True, False):
        row = spherical_harmonics(3, torch.zeros(1, 3, dtype=torch.float64), normalize=normalize)[0]
        assert row[0] == pytest.approx(1 / math.sqrt(4 * math.pi), rel=1e-15) and not row[1:].any()
        e3 = o3.spherical_harmonics(list(range(4)), torch.zeros(1, 3, dtype=torch.float64), normalize,
                                    normalization="integral")[0]
        torch.testing.assert_close(row, e3)
