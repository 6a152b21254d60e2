"""A sequential container that checks, at construction, that each module's output feature types
are what the next module expects.

>>> from geomlin.reps import EquivariantSequential
>>> # EquivariantSequential(GATrBlock(...), SphereGauntProduct(...)) raises at construction:
>>> # "module 0 (GATrBlock) returns Multivectors(G(3,0,1), 8 channels) but module 1
>>> # (SphereGauntProduct) expects SphereCoefficients(lmax=2, 4 channels)"
"""

from __future__ import annotations

import torch
from torch import nn

from geomlin.reps.declarations import declared_types, example_inputs
from geomlin.reps.feature_type import compatible, merge_groups


def _describe(types: tuple) -> str:
    return ", ".join(repr(t) for t in types) if types else "nothing"


class EquivariantSequential(nn.Sequential):
    """``nn.Sequential`` over equivariant modules whose declared types chain.

    Module ``i`` receives module ``i-1``'s outputs as positional arguments (a tuple output is
    unpacked). Keyword arguments of ``forward`` (masks, batch layouts) go to every module, so every
    module of a sequence called with them must take them (nothing is inferred from signatures).
    ``type_in`` / ``type_out`` are the first module's input types and the last module's output types.

    Parameters
    ----------
    *modules : nn.Module
        the modules in order; each declares ``type_in`` / ``type_out``, and the output types of
        one must be accepted as the input types of the next.
    """

    def __init__(self, *modules: nn.Module):
        if not modules:
            raise ValueError("EquivariantSequential needs at least one module")
        super().__init__(*modules)
        group = None
        previous = None
        for i, m in enumerate(modules):
            types_in, types_out = declared_types(m)
            if previous is not None:
                j, prev_out = previous
                if len(prev_out) != len(types_in) or not all(compatible(a, b) for a, b in zip(prev_out, types_in)):
                    raise ValueError(
                        f"EquivariantSequential: module {j} ({type(modules[j]).__name__}) returns "
                        f"{_describe(prev_out)} but module {i} ({type(m).__name__}) expects {_describe(types_in)}")
            for t in types_in + types_out:
                if t is not None:
                    group = merge_groups(group, t.group, "the modules of EquivariantSequential")
            previous = (i, types_out)
        self.type_in = declared_types(modules[0])[0]
        self.type_out = declared_types(modules[-1])[1]

    def forward(self, *args, **kwargs):
        out = args
        for m in self:
            out = m(*(out if isinstance(out, tuple) else (out,)), **kwargs)
        return out

    def example_inputs(self, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64):
        """The first module's example inputs ``(args, kwargs)``."""
        return example_inputs(self[0], generator=generator, dtype=dtype)
