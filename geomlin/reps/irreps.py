"""Bridge to e3nn: ``Irreps`` layouts as geomlin representations of O(3) / SO(3).

e3nn (>= 0.5) stores ``l = 1`` features in the Cartesian ``(x, y, z)`` basis,
so ``V(O(3))`` and ``Irreps("1o")`` are the same rep in the same basis.
"""

from __future__ import annotations

from functools import cache

import torch
from torch import Tensor

from geomlin.algebra.quaternions import shepperd_quaternion
from geomlin.groups.base import Group
from geomlin.groups.names import as_group
from geomlin.reps.base import Rep, check_algebra_element
from geomlin.tables import device_cache
from geomlin.validation import check_nonnegative_int, check_orthogonal, check_tensor

#: Dtypes without linear-algebra kernels (det, matrix_exp): computed in float32.
HALF_DTYPES = (torch.float16, torch.bfloat16)


def _su2_generators_complex128(l: int) -> Tensor:
    """Angular-momentum generators ``(3, 2l+1, 2l+1)`` complex128 in the ``|l, m>`` basis.

    The ladder operators ``J_+ |m> = sqrt(l(l+1) - m(m+1)) |m+1>`` (and ``J_-``) of any quantum
    mechanics text (e.g. Sakurai, Modern Quantum Mechanics, Eq. 3.5.41), arranged as e3nn's
    ``o3.su2_generators`` (x, z, -y) with its sign conventions, evaluated in float64 from the
    start instead of the default dtype.
    """
    m = torch.arange(-l, l, dtype=torch.float64)
    raising = torch.diag(-torch.sqrt(l * (l + 1) - m * (m + 1)), diagonal=-1).to(torch.complex128)
    m = torch.arange(-l + 1, l + 1, dtype=torch.float64)
    lowering = torch.diag(torch.sqrt(l * (l + 1) - m * (m - 1)), diagonal=1).to(torch.complex128)
    m = torch.arange(-l, l + 1, dtype=torch.float64).to(torch.complex128)
    return torch.stack([0.5 * (raising + lowering), torch.diag(1j * m), -0.5j * (raising - lowering)])


@cache
def _so3_generators_table(l: int) -> Tensor:
    from e3nn import o3

    X = _su2_generators_complex128(l)
    Q = o3.change_basis_real_to_complex(l, dtype=torch.float64)  # explicit dtype: no global state
    return torch.real(torch.conj(Q.T) @ X @ Q).contiguous()


def _so3_generators_on(l: int, device, dtype: torch.dtype) -> Tensor:
    """``_so3_generators_table`` on ``device`` in ``dtype``, cached per (l, device, dtype) (read-only)."""
    return device_cache(("reps:so3-generators", l), lambda: _so3_generators_table(l), device, dtype)


def so3_generators_float64(l: int) -> Tensor:
    """e3nn's real SO(3) generators ``(3, 2l+1, 2l+1)`` computed in float64.

    ``e3nn.o3.so3_generators`` builds them in the default dtype (float32 in most programs), which
    limits every Wigner matrix to ~1e-7; the same formula evaluated in float64 is exact to ~1e-15.
    Never touches the default dtype. Returns a fresh copy of a cached table.
    """
    l = check_nonnegative_int(l, "l")
    return _so3_generators_table(l).clone()


def _so3_coefficients(A: Tensor) -> Tensor:
    """Coordinates ``(..., 3)`` of an antisymmetric ``A`` in e3nn's generators ``(L_x, L_y, L_z)``."""
    return torch.stack([A[..., 2, 1], A[..., 0, 2], A[..., 1, 0]], dim=-1)


def matrix_to_axis_angle_vector(R: Tensor) -> Tensor:
    """Rotation vectors ``theta * axis`` ``(..., 3)`` of rotations ``R (..., 3, 3)``."""
    q = shepperd_quaternion(R)
    v = q[..., 1:]
    s = torch.linalg.vector_norm(v, dim=-1, keepdim=True)
    theta = 2 * torch.atan2(s, q[..., :1])
    scale = torch.where(s > 0, theta / s.clamp_min(torch.finfo(R.dtype).tiny), 2.0)
    return v * scale


def wigner_D_from_matrix(irreps, g: Tensor) -> Tensor:
    """Block-diagonal Wigner matrices of e3nn ``irreps`` for O(3) elements ``g (..., 3, 3)``.

    Computed as ``exp(sum_i w_i X_i^l)`` with ``w`` the rotation vector and
    ``X^l = e3nn.o3.so3_generators(l)``, times the parity ``p`` for ``det g = -1``.
    Accurate to ~1e-15 in float64 (e3nn's ``D_from_matrix`` goes through Euler
    angles and loses ~1e-7). Returns ``(..., irreps.dim, irreps.dim)``.

    ``g`` must be orthogonal (checked on the CPU to the tolerance of its dtype): the Wigner matrix
    of anything else is meaningless. float16 / bfloat16 elements are computed in float32 and the
    result cast back to their dtype.
    """
    from e3nn import o3

    if not isinstance(irreps, o3.Irreps):
        try:
            irreps = o3.Irreps(irreps)
        except Exception as err:  # e3nn raises bare ValueErrors/AssertionErrors
            raise ValueError(f"could not parse e3nn Irreps from {irreps!r}: {err}") from err
    check_tensor(g, "g", min_ndim=2)
    if tuple(g.shape[-2:]) != (3, 3):
        raise ValueError(f"g must have shape (..., 3, 3) (elements of O(3)), got {tuple(g.shape)}")
    check_orthogonal(g, "g")
    if g.dtype in HALF_DTYPES:  # no half-precision det / matrix_exp kernels: float32, cast back
        return _wigner_D(irreps, g.to(torch.float32)).to(g.dtype)
    return _wigner_D(irreps, g)


def _wigner_D(irreps, g: Tensor) -> Tensor:
    """[`wigner_D_from_matrix`][] of a checked ``g`` in float32 or float64."""
    det = torch.linalg.det(g)
    proper = g * torch.sign(det)[..., None, None]
    w = matrix_to_axis_angle_vector(proper)
    blocks = []
    cache = {}
    for mul, ir in irreps:
        if ir.l not in cache:
            gens = _so3_generators_on(ir.l, g.device, g.dtype)
            cache[ir.l] = torch.linalg.matrix_exp(torch.einsum("...k,kij->...ij", w, gens))
        D = cache[ir.l]
        if ir.p == -1:
            D = D * torch.sign(det)[..., None, None]
        blocks.extend([D] * mul)
    from geomlin.reps.base import block_diag

    if not blocks:
        return g.new_zeros(*g.shape[:-2], 0, 0)
    return block_diag(blocks)


class IrrepsRep(Rep):
    """An e3nn ``o3.Irreps`` layout as a rep of O(3) (default) or SO(3).

    ``rho(g)`` is [`wigner_D_from_matrix`][] (parity applied for ``det g = -1``),
    ``drho(A)`` uses ``e3nn.o3.so3_generators``. Features of shape
    ``(..., irreps.dim)`` transform by ``x @ rho(g).T``.
    """

    single_term_repr = True

    def __init__(self, irreps, group: Group | None = None):
        from e3nn import o3

        from geomlin.groups.classical import SO, O

        try:
            self.irreps = o3.Irreps(irreps)
        except Exception as err:  # e3nn raises bare ValueErrors/AssertionErrors
            raise ValueError(f"could not parse e3nn Irreps from {irreps!r}: {err}") from err
        group = O(3) if group is None else as_group(group)
        if not (isinstance(group, (O, SO)) and group.d == 3):
            raise ValueError(f"e3nn Irreps are representations of O(3) or SO(3), not {group}")
        self.group = group

    @property
    def size(self) -> int:
        return self.irreps.dim

    @property
    def is_scalar(self) -> bool:
        from geomlin.groups.classical import SO

        return all(ir.l == 0 and (ir.p == 1 or isinstance(self.group, SO)) for _, ir in self.irreps)

    def _rho(self, g: Tensor) -> Tensor:
        return wigner_D_from_matrix(self.irreps, g)

    def drho(self, A: Tensor) -> Tensor:

        check_algebra_element(A, self.group)
        coeff = _so3_coefficients(A)
        blocks = []
        for mul, ir in self.irreps:
            gens = _so3_generators_on(ir.l, A.device, A.dtype)
            block = torch.einsum("...k,kij->...ij", coeff, gens)
            blocks.extend([block] * mul)
        from geomlin.reps.base import block_diag

        if not blocks:  # the empty Irreps("")
            return A.new_zeros(*A.shape[:-2], 0, 0)
        return block_diag(blocks)

    def key(self) -> tuple:
        return ("Irreps", str(self.irreps), self.group.key())

    def to_irreps(self):
        return self.irreps

    def __repr__(self) -> str:
        return f"Irreps[{self.irreps}]"
