"""``EquivariantLinear``: a learnable map in the span of an equivariant basis.

``W = sum_r c_r B_r`` with ``B_r`` the basis of [`equivariant_basis`][].
The input and output reps are grouped by block type (all copies of ``V``
together, all copies of ``V**2`` together, ...), so that each distinct pair of
block types is solved once and contributes ``W_{ba} = sum_r C_r (x) B_r`` with a
``(multiplicity_out, multiplicity_in)`` coefficient matrix ``C_r`` per basis
element, exactly the structure of EMLP (Finzi et al. 2021, Sec. 6).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from geomlin.linear.solver import METHODS, block_basis, check_cache_dir
from geomlin.reps.base import Rep, Scalar, bind, common_group
from geomlin.tables import ConstantTables
from geomlin.validation import check_bool, check_choice, check_tensor


def check_features(x: Tensor, size: int, name: str = "x", what: str = "rep_in") -> None:
    """Raise a clear error unless ``x`` is a finite floating tensor ``(..., size)``.

    The finiteness check is a ``ValueError`` on the CPU and deferred on accelerators
    ([`geomlin.validation.check_finite`][]), so GPU forwards never wait for the
    host.
    """
    check_tensor(x, name, shape=(..., size), finite=True, what=f"{what} of size {size}")


class BlockLayout:
    """Positions of every block type inside a rep.

    Attributes
    ----------
    types : list of Rep
        distinct non-sum reps, in order of first appearance.
    index : Tensor of shape (size,)
        long, on the CPU; ``x[..., index]`` lists the coordinates
        type by type, copy by copy (``types[0]`` copy 0, copy 1, ..., then ``types[1]`` ...).
    inverse : Tensor of shape (size,)
        the inverse permutation.
    multiplicity : list of int
        number of copies of each type.

    Notes
    -----
    A layer keeps ``index`` and ``inverse`` on its device ([`add_to`][]) and passes them to
    [`sort`][] / [`unsort`][].
    """

    def __init__(self, rep: Rep):
        offsets: dict[tuple, list[int]] = {}
        types: dict[tuple, Rep] = {}
        start = 0
        for block in rep.blocks:
            k = block.key()
            types.setdefault(k, block)
            offsets.setdefault(k, []).append(start)
            start += block.size
        self.types = list(types.values())
        self.multiplicity = [len(offsets[t.key()]) for t in self.types]
        index = []
        for t in self.types:
            for o in offsets[t.key()]:
                index.extend(range(o, o + t.size))
        self.index = torch.tensor(index, dtype=torch.long)
        self.inverse = torch.argsort(self.index)
        self.size = start
        #: True when the rep is already sorted by type (no gather needed)
        self.is_sorted = bool(torch.equal(self.index, torch.arange(start)))

    def add_to(self, tables: ConstantTables, prefix: str) -> None:
        """Store ``index`` and ``inverse`` in a layer's tables as ``{prefix}_index`` / ``{prefix}_inverse``."""
        tables.add(f"{prefix}_index", self.index)
        tables.add(f"{prefix}_inverse", self.inverse)

    def sort(self, x: Tensor, index: Tensor) -> Tensor:
        """Coordinates ``(..., size)`` in type-sorted order (``index``: ``index`` on ``x``'s device)."""
        return x if self.is_sorted else x.index_select(-1, index)

    def unsort(self, x: Tensor, inverse: Tensor, dim: int = -1) -> Tensor:
        """Inverse of [`sort`][] along ``dim`` (``inverse``: ``inverse`` on ``x``'s device)."""
        return x if self.is_sorted else x.index_select(dim, inverse)

    def type_slices(self) -> list[slice]:
        """Slices of the type-sorted coordinates, one per type."""
        out, start = [], 0
        for t, m in zip(self.types, self.multiplicity):
            out.append(slice(start, start + m * t.size))
            start += m * t.size
        return out


class EquivariantLinear(nn.Module):
    """Equivariant affine map ``rep_in -> rep_out``.

    Parameters
    ----------
    rep_in, rep_out : Rep
        representations of one group (or group-free reps such as ``T(2)`` with
        ``group=``).
    bias : bool
        add a learnable bias restricted to the invariant subspace of ``rep_out``.
    group : Group or str, optional
        binds group-free reps (a geomlin Group or a name such as ``"O(3)"``).
    cache_dir : str or os.PathLike, optional
        folder of an on-disk basis cache (see [`equivariant_basis`][]):
        the first process solves and writes, later ones read.
    method : str
        basis solver, ``"auto"`` or one of [`geomlin.linear.solver.METHODS`][].

    Shapes
    ------
    ``forward(x)`` maps ``(..., rep_in.size)`` to ``(..., rep_out.size)``
    in ``x``'s dtype and device. Parameters are the coefficients on the basis
    (``num_coefficients`` of them), so every value of the parameters gives an
    exactly equivariant map. Declares ``type_in = rep_in`` and ``type_out = rep_out``.
    """

    def __init__(self, rep_in: Rep, rep_out: Rep, bias: bool = True, *, group=None, cache_dir=None,
                 method: str = "auto"):
        super().__init__()
        rep_in = bind(rep_in, group, "rep_in")
        rep_out = bind(rep_out, group, "rep_out")
        check_bool(bias, "bias")
        check_cache_dir(cache_dir)
        check_choice(method, "method", METHODS)
        self.group = common_group([rep_in, rep_out])
        self.rep_in, self.rep_out = rep_in, rep_out
        self.type_in, self.type_out = rep_in, rep_out
        self._what = repr(rep_in)  # made once: the forward formats no rep (dynamo cannot)
        self.layout_in, self.layout_out = BlockLayout(rep_in), BlockLayout(rep_out)
        bases: dict[tuple[int, int], Tensor] = {}
        self.coefficients = nn.ParameterDict()
        total = 0
        for j, tout in enumerate(self.layout_out.types):
            for i, tin in enumerate(self.layout_in.types):
                B = block_basis(tin, tout, cache_dir, method)
                if B.shape[0]:
                    bases[(j, i)] = B
                    total += B.shape[0] * self.layout_out.multiplicity[j] * self.layout_in.multiplicity[i]
        # the placed basis elements are orthonormal, so Var(c) = out / total gives
        # E||W||_F^2 = out: the scale of nn.Linear's default initialisation
        std = math.sqrt(rep_out.size / max(total, 1))
        for (j, i), B in bases.items():
            shape = (B.shape[0], self.layout_out.multiplicity[j], self.layout_in.multiplicity[i])
            self.coefficients[f"{j}_{i}"] = nn.Parameter(torch.randn(shape) * std)
        #: the solved bases (float64) and layout indices, moved with the module
        self.tables = ConstantTables({f"basis_{j}_{i}": B for (j, i), B in bases.items()})
        self.layout_in.add_to(self.tables, "in")
        self.layout_out.add_to(self.tables, "out")
        self.num_coefficients = total
        self.bias_basis = None
        if bias:
            bb = _invariant_vectors(rep_out, cache_dir)  # (r_b, out)
            if bb.shape[0]:
                self.tables.add("bias_basis", bb)
                self.bias = nn.Parameter(torch.zeros(bb.shape[0]))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("bias", None)

    def _table(self, name: str, device, dtype) -> Tensor:
        """A table in ``dtype`` on ``device`` (a copy only when another device than the module's is asked for)."""
        table = self.tables.get(name, dtype)
        return table if table.device == torch.device(device) else table.to(device)

    def weight(self, device=None, dtype=None) -> Tensor:
        """The dense equivariant matrix ``(rep_out.size, rep_in.size)`` (default: the parameters' device and dtype)."""
        p = next(iter(self.coefficients.values()), None)
        device = device or (p.device if p is not None else self.tables.get("out_index").device)
        dtype = dtype or (p.dtype if p is not None else torch.get_default_dtype())
        lo, li = self.layout_out, self.layout_in
        rows = []
        for j, tout in enumerate(lo.types):
            cols = []
            for i, tin in enumerate(li.types):
                mo, mi = lo.multiplicity[j], li.multiplicity[i]
                if f"{j}_{i}" not in self.coefficients:
                    cols.append(torch.zeros(mo * tout.size, mi * tin.size, device=device, dtype=dtype))
                    continue
                B = self._table(f"basis_{j}_{i}", device, dtype)
                C = self.coefficients[f"{j}_{i}"].to(dtype)
                block = torch.einsum("rba,rij->biaj", C, B).reshape(mo * tout.size, mi * tin.size)
                cols.append(block)
            rows.append(torch.cat(cols, dim=1))
        W_sorted = torch.cat(rows, dim=0)
        W = lo.unsort(W_sorted, self._table("out_inverse", device, None), dim=0)
        return li.unsort(W, self._table("in_inverse", device, None), dim=1)

    def bias_vector(self, device=None, dtype=None) -> Tensor | None:
        """The invariant bias ``(rep_out.size,)``, or ``None``."""
        if self.bias is None:
            return None
        device = device or self.bias.device
        dtype = dtype or self.bias.dtype
        return self.bias.to(dtype) @ self._table("bias_basis", device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        """``(..., rep_in.size) -> (..., rep_out.size)``, floating point, finite."""
        check_features(x, self.rep_in.size, what=self._what)
        y = x @ self.weight(x.device, x.dtype).T
        b = self.bias_vector(x.device, x.dtype)
        return y if b is None else y + b

    def extra_repr(self) -> str:
        return f"{self.rep_in!r} -> {self.rep_out!r}, coefficients={self.num_coefficients}"


def _invariant_vectors(rep: Rep, cache_dir=None) -> Tensor:
    """Orthonormal basis ``(r, rep.size)`` of the invariant vectors of ``rep``."""
    from geomlin.linear.solver import equivariant_basis

    return equivariant_basis(Scalar, rep, cache_dir=cache_dir)[:, :, 0]
