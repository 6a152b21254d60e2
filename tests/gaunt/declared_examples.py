"""Equivariance examples of the module classes in :mod:`geomlin.gaunt` and the Gaunt potential
(see tests/test_declarations.py)."""


from geomlin.gaunt import GauntConvolution, GauntTensorProduct, ManyBodyGaunt, SphereGauntProduct
from geomlin.models.gaunt_potential import DegreeLinear, GauntPotential
from tests.randomized import randomized

EXAMPLES = {
    SphereGauntProduct: [lambda: randomized(SphereGauntProduct(2, 3, 3, channels=4, method="grid"))],
    GauntTensorProduct: [
        lambda: randomized(GauntTensorProduct("4x0e+2x1o+1x1e+2x2e", "0e+1o+2e", "2x0e+1x0o+2x1o+1x1e")),
        lambda: randomized(GauntTensorProduct("2x0e+2x1e", "2x0o+1x1o", "2x1o+2x2e", shared_weights=False)),
        lambda: randomized(GauntTensorProduct("4x0e+4x1o+2x2e", "0e+1o+2e", "4x0e+4x1o+4x1e+2x2e", [
            (0, 0, 0, "uvu", True), (1, 1, 0, "uvu", True), (1, 1, 2, "uvu", True), (1, 2, 1, "uvu", True),
            (2, 2, 3, "uvu", True), (0, 1, 1, "uvu", True)], shared_weights=False)),
    ],
    ManyBodyGaunt: [lambda: randomized(ManyBodyGaunt(2, 3, channels=3, correlation=3))],
    GauntConvolution: [lambda: randomized(GauntConvolution(1, 2, 2, channels=3, cutoff=4.0, avg_degree=3.0))],
    DegreeLinear: [lambda: randomized(DegreeLinear(3, 2))],
    GauntPotential: [lambda: GauntPotential(num_species=4, hidden_channels=4, lmax=2, num_blocks=2),
                     lambda: GauntPotential(num_species=4, hidden_channels=4, lmax=1, num_blocks=2, cutoff=2.0,
                                            max_neighbors=4)],
}
