"""The one training loop of the canonicalization-prior tests: Adam on ``prior_loss(can(x))`` alone."""

from __future__ import annotations

import torch


def train_on_prior(can, x, steps: int, lr: float = 3e-2) -> list[float]:
    """Train canonicalizer ``can`` for ``steps`` Adam steps on its prior over inputs ``x``; the losses."""
    opt = torch.optim.Adam(can.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        loss = can.prior_loss(can(x))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses
