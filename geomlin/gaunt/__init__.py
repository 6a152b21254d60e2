"""Gaunt tensor products: equivariant products of spherical functions through the sphere's Fourier basis.

``gaunt_tensor_product(x1, x2, lmax_out, method="auto")`` multiplies two
spherical functions given by real SH coefficients (e3nn layout and basis,
``normalization="integral"``) and returns the coefficients of the product, exactly
(Luo, Chen and Krishnapriyan, ICLR 2024): the paths of the tensor product with ``l1 + l2 + l3``
even. [`gaunt_bracket`][] gives the odd ones, the sphere's Poisson bracket
``r . (grad f1 x grad f2)``, on the same routes. Methods: ``"grid"`` (the fast O(L^3)
route: blocked Legendre GEMMs and a real DFT on a quarter of the longitude circle), ``"fft"`` (the paper's 2D
Fourier convolution), ``"dense"`` (sphere-grid GEMM, O(L^4)), ``"direct"`` (Gaunt tensor;
with an input shared by the channels, its [`gaunt_operator`][geomlin.gaunt.product.gaunt_operator]),
``"triton"`` (the fast route as one fused GPU kernel), ``"auto"`` (measured tables,
[`geomlin.gaunt.method_tables`][]).

Modules: [`GauntTensorProduct`][] (e3nn's ``o3.TensorProduct`` / ``o3.FullyConnectedTensorProduct``, every
path's coupling from the sphere), [`SphereGauntProduct`][]
(the channel-wise product on sphere coefficients),
[`ManyBodyGaunt`][], [`GauntConvolution`][]; helpers [`gaunt_power`][],
[`irreps_to_sphere`][], [`sphere_to_irreps`][], [`split_parity`][],
[`gaunt_parity_product`][], [`spherical_harmonics`][], [`gaunt_operator`][] (the product with a
fixed function as a matrix).
"""

from geomlin.gaunt.bracket import gaunt_bracket
from geomlin.gaunt.conv import GauntConvolution
from geomlin.gaunt.harmonics import gaunt_tensor, spherical_harmonics
from geomlin.gaunt.layout import (
    NATURAL,
    PSEUDO,
    irreps_to_sphere,
    sphere_irreps,
    sphere_to_irreps,
    split_parity,
)
from geomlin.gaunt.powers import ManyBodyGaunt, gaunt_power
from geomlin.gaunt.product import METHODS, gaunt_operator, gaunt_parity_product, gaunt_tensor_product
from geomlin.gaunt.sphere_product import SphereGauntProduct
from geomlin.gaunt.tensor_product import GauntTensorProduct

__all__ = [
    "METHODS",
    "NATURAL",
    "PSEUDO",
    "GauntConvolution",
    "GauntTensorProduct",
    "ManyBodyGaunt",
    "SphereGauntProduct",
    "gaunt_bracket",
    "gaunt_operator",
    "gaunt_parity_product",
    "gaunt_power",
    "gaunt_tensor",
    "gaunt_tensor_product",
    "irreps_to_sphere",
    "sphere_irreps",
    "sphere_to_irreps",
    "spherical_harmonics",
    "split_parity",
]
