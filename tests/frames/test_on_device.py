"""geomlin.frames on the simulated accelerator (``tests/device/simulated.py``, CUDA's device rules on
every operator): the public functions run forward and backward without a host sync, an upload or a
device-side assert, give the CPU's numbers (the oracle: the same call on the CPU), defer their value
checks inside :func:`geomlin.validation.deferred_checks` (as the training loop runs them), and keep their
accuracy under autocast."""

import math
import warnings

import pytest
import torch

from geomlin import validation
from geomlin.batching import batch_layout
from geomlin.frames import (
    DegenerateFrameError,
    FrameAveraging,
    gram_schmidt_orthogonal,
    gram_schmidt_rotation,
    moment_axes,
    pca_frames,
)
from geomlin.groups import C, D
from geomlin.groups.square_grid import element_matrices, grid_order
from geomlin.reps import Images, RegularFeatures, Vectors
from geomlin.reps.images import act_on_image
from tests.device import simulated as sim  # registers the stand-in before any backward pass starts autograd
from tests.frames.conftest import PointMLP, random_clouds


def _clouds(d: int, seed: int = 0):
    """Three random padded clouds plus, for d = 2 and 3, a degenerate one (a regular hexagon, a
    regular tetrahedron with a little noise: isotropic covariance), ``(B, 10, d)`` and a mask."""
    g = torch.Generator().manual_seed(seed)
    pos, mask, _, _ = random_clouds(B=3, N=10, d=d, generator=g)
    pos = pos * torch.tensor([1.0, 1.4, 1.0, 1.0][:d], dtype=torch.float64)  # clearer gaps
    if d == 3:
        shape = torch.tensor([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], dtype=torch.float64)
    elif d == 2:
        a = torch.arange(6, dtype=torch.float64) * 2 * math.pi / 6
        shape = torch.stack([a.cos(), a.sin()], -1)
    else:
        return pos, mask
    extra = torch.zeros(1, 10, d, dtype=torch.float64)
    extra[0, :len(shape)] = shape  # centred: degenerate for the linear groups too
    extra_mask = torch.arange(10)[None] < len(shape)
    return torch.cat([pos, extra]), torch.cat([mask, extra_mask])


def _frames_and_grad(pos, mask, **kwargs):
    pos = pos.detach().clone().requires_grad_(True)
    fr = pca_frames(pos, mask=mask, **kwargs)
    weight = torch.linspace(-1, 1, fr.frames[0].numel(), dtype=fr.frames.dtype, device=pos.device)
    (grad,) = torch.autograd.grad((fr.frames * weight.reshape(fr.frames.shape[1:])).sum(), pos)
    return fr, grad


CASES = [("E3", "ignore", "all", 1e-3), ("SE3", "ignore", "all", 1e-3), ("O3", "moments", "all", 0.2),
         ("SE3", "moments", "skewness", 0.2), ("E3", "sample", "all", 1e-3), ("SE3", "sample", "all", 1e-3),
         ("SO(2)", "moments", "all", 0.2), ("E(2)", "sample", "all", 1e-3), ("E(4)", "ignore", "all", 1e-3),
         ("O(3)", "ignore", "skewness", 1e-3)]


@pytest.mark.parametrize("group,policy,signs,gap_tol", CASES, ids=[f"{g}-{p}-{s}" for g, p, s, _ in CASES])
def test_pca_frames_on_the_device(group, policy, signs, gap_tol):
    d = 4 if "4" in group else (2 if "2" in group else 3)
    pos, mask = _clouds(d)
    kwargs = {"group": group, "on_degenerate": policy, "signs": signs, "gap_tol": gap_tol}
    cpu, cpu_grad = _frames_and_grad(pos, mask, **kwargs)
    dpos, dmask = sim.to_sim((pos, mask))
    with validation.deferred_checks(), sim.watch() as log:
        fr, grad = _frames_and_grad(dpos, dmask, **kwargs)
    assert not log.events, log.report()
    fr, grad = sim.to_cpu((fr, grad))
    assert torch.equal(fr.degenerate, cpu.degenerate)
    assert fr.degenerate[-1] == (d < 4)
    assert not fr.degenerate[:3].all() if gap_tol > 0.1 else not fr.degenerate[:3].any()  # both kinds in a batch
    for a, b in zip(fr[1:4], cpu[1:4]):  # centroid, gaps, eigenvalues
        assert (a - b).abs().max() < 1e-12
    # sampled items are random; moment frames of an exactly symmetric degenerate item (the hexagon)
    # are one of its symmetric choices, which the CPU's LAPACK and the device's Jacobi may pick apart
    keep = ~fr.degenerate if policy in ("sample", "moments") else torch.ones_like(fr.degenerate)
    assert (fr.frames[keep] - cpu.frames[keep]).abs().max() < 1e-12
    assert (grad - cpu_grad)[keep].abs().max() < 1e-10 and grad[~fr.degenerate].abs().sum() > 0
    eye = torch.eye(d, dtype=torch.float64)
    assert (fr.frames.transpose(-1, -2) @ fr.frames - eye).abs().max() < 1e-12
    if group.startswith("S"):
        assert (torch.linalg.det(fr.frames) - 1).abs().max() < 1e-12


def test_raise_and_warn_are_deferred_on_the_device():
    """On the CPU "raise" / "warn" name the items at once; on the device the call returns and
    raise_deferred raises the DegenerateFrameError / issues the UserWarning (without item numbers,
    which would need a read)."""
    pos, mask = sim.to_sim(_clouds(3))
    with pytest.raises(DegenerateFrameError, match="degenerate covariance spectrum"), validation.deferred_checks():
        with validation.deferred_checks(), sim.watch() as log:
            pca_frames(pos, "E3", mask, on_degenerate="raise")
        assert not log.events, log.report()
    def warn_in_a_scope() -> list:
        # the warning is issued at the scope's end, after the watch
        with validation.deferred_checks(), sim.watch() as log, warnings.catch_warnings():
            warnings.simplefilter("error")
            pca_frames(pos, "E3", mask)  # "warn" is the default
        return log.events

    with pytest.warns(UserWarning, match="degenerate covariance spectrum"):
        events = warn_in_a_scope()
    assert not events
    with validation.deferred_checks(), sim.watch() as log:  # nothing degenerate: the scope's checks pass
        pca_frames(pos[:3], "E3", mask[:3], on_degenerate="raise")
    assert not log.events, log.report()
    empty = mask & (torch.arange(4, device=mask.device) != 1)[:, None]
    with pytest.raises(ValueError, match="some point clouds have no points"), validation.deferred_checks():
        with validation.deferred_checks(), sim.watch() as log:
            pca_frames(pos, "E3", empty, on_degenerate="ignore")
        assert not log.events, log.report()
    with pytest.raises(ValueError, match="some point clouds have no points"):  # outside a scope: at once
        pca_frames(pos, "E3", empty, on_degenerate="ignore")


@pytest.mark.parametrize("signs", ["all", "skewness"])
def test_flat_batches_on_the_device(signs):
    """Planned with num_graphs a flat batch reads nothing; moment frames read the size of the largest cloud
    (one sync, documented) to pad it, unless the plan knows it."""
    pos, mask = _clouds(3)
    flat, batch = pos[mask], torch.arange(4).repeat_interleave(mask.sum(1))
    cpu = pca_frames(flat, "SE3", batch=batch, on_degenerate="ignore", signs=signs)
    dflat, dbatch = sim.to_sim((flat, batch))
    with validation.deferred_checks(), sim.watch() as log:
        fr = pca_frames(dflat, "SE3", batch=batch_layout(batch=dbatch, num_graphs=4), on_degenerate="ignore",
                        signs=signs)
    assert not log.events, log.report()
    assert (sim.to_cpu(fr.frames) - cpu.frames).abs().max() < 1e-12
    with validation.deferred_checks(), sim.watch() as log:
        moments = pca_frames(dflat, "SE3", batch=batch_layout(batch=dbatch, num_graphs=4), on_degenerate="moments",
                             gap_tol=0.2, signs=signs)
    assert [(e.kind, e.op) for e in log.events] == [("sync", "aten::_local_scalar_dense")], log.report()
    assert "batching.py" in log.events[0].where
    with validation.deferred_checks(), sim.watch() as log:  # a plan that knows the largest cloud reads nothing
        bounded = pca_frames(dflat, "SE3", batch=batch_layout(batch=dbatch, num_graphs=4, max_items=12),
                             on_degenerate="moments", gap_tol=0.2, signs=signs)
    assert not log.events, log.report()
    # (padded wider, the degenerate items' tie-breaks may round differently: compare with the same plan on the CPU)
    cpu_bounded = pca_frames(flat, "SE3", batch=batch_layout(batch=batch, num_graphs=4, max_items=12),
                             on_degenerate="moments", gap_tol=0.2, signs=signs)
    assert (sim.to_cpu(bounded.frames) - cpu_bounded.frames).abs().max() < 1e-12
    cpu = pca_frames(flat, "SE3", batch=batch, on_degenerate="moments", gap_tol=0.2, signs=signs)
    assert (sim.to_cpu(moments.frames) - cpu.frames).abs().max() < 1e-12
    # a batch index beyond num_graphs, inside a scope: clamped (no out-of-bounds kernel) and reported at its end
    with pytest.raises(ValueError, match="batch must index graphs"), validation.deferred_checks():
        with validation.deferred_checks(), sim.watch() as log:
            pca_frames(dflat, "SE3", batch=batch_layout(batch=dbatch, num_graphs=3), on_degenerate="ignore")
        assert not log.events, log.report()


def test_frames_under_autocast_keep_their_precision():
    """Moments and eigenvectors run with autocast off: the frames of float32 points under bfloat16 /
    float16 autocast are the float32 frames."""
    pos, mask = _clouds(3)
    pos = pos[:3].float()
    mask = mask[:3]
    ref = pca_frames(pos, "SE3", mask).frames
    dpos, dmask = sim.to_sim((pos, mask))
    for dtype in (torch.bfloat16, torch.float16):
        with validation.deferred_checks(), sim.watch() as log, torch.autocast(sim.DEVICE_TYPE, dtype=dtype):
            fr = pca_frames(dpos, "SE3", dmask)
        assert not log.events, log.report()
        assert fr.frames.dtype == torch.float32
        assert (sim.to_cpu(fr.frames) - ref).abs().max() < 1e-6
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert (pca_frames(pos, "SE3", mask).frames - ref).abs().max() < 1e-6


def test_moment_axes_on_the_device():
    g = torch.Generator().manual_seed(5)
    y = torch.randn(3, 30, 3, dtype=torch.float64, generator=g) ** 3
    w = (torch.arange(30)[None] < torch.tensor([30, 20, 9])[:, None]).to(torch.float64)
    cpu = moment_axes(y, w)
    dy, dw = sim.to_sim((y, w))
    with validation.deferred_checks(), sim.watch() as log:
        U = moment_axes(dy, dw)
    assert not log.events, log.report()
    assert (sim.to_cpu(U) - cpu).abs().max() < 1e-12


def test_frame_averaging_stochastic_training_on_the_device():
    """One random frame element per input, drawn on the device; a generator on another device is
    refused at the boundary (CUDA would refuse it inside the kernel)."""
    pos, mask = _clouds(3)
    model = FrameAveraging(PointMLP(out_dim=3, level="point").double(), "SE3", Vectors(3), stochastic=True,
                           on_degenerate="ignore")
    model, dpos, dmask = sim.to_sim((model, pos, mask))
    with validation.deferred_checks(), sim.watch() as log:
        out = model(dpos, mask=dmask)
        out.square().sum().backward()
    assert not log.events, log.report()
    assert torch.isfinite(sim.to_cpu(out)).all()
    with pytest.raises(ValueError, match="generator is a cpu generator but the data is on sim"):
        model(dpos, mask=dmask, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="generator is a cpu generator but the data is on sim"):
        pca_frames(dpos, "E3", dmask, on_degenerate="sample", generator=torch.Generator())


def test_gram_schmidt_on_the_device_and_under_autocast():
    g = torch.Generator().manual_seed(7)
    v1, v2, v3 = torch.randn(3, 5, 3, generator=g).unbind(0)
    vectors = torch.randn(5, 4, 4, generator=g)

    def run(v1, v2, v3, vectors):
        R = gram_schmidt_rotation(v1, v2)
        S = gram_schmidt_rotation(v1, v2, v3)
        Q = gram_schmidt_orthogonal(vectors, special=True)
        grads = torch.autograd.grad(R.sum() + S.square().sum() + (Q * Q[..., :1]).float().sum(), [v1, v2, vectors])
        return (R, S, Q), grads

    inputs = [t.clone().requires_grad_(True) for t in (v1, v2, v3, vectors)]
    cpu_out, cpu_grads = run(*inputs)
    dev = [t.detach().to(sim.DEVICE).requires_grad_(True) for t in inputs]
    with validation.deferred_checks(), sim.watch() as log:
        out, grads = run(*dev)
    assert not log.events, log.report()
    for a, b in zip(out + grads, cpu_out + cpu_grads):
        assert (sim.to_cpu(a) - b).abs().max() < 1e-5
    for dtype in (torch.bfloat16, torch.float16):  # half-precision vectors: QR runs in float32
        with validation.deferred_checks(), sim.watch() as log, torch.autocast(sim.DEVICE_TYPE, dtype=dtype):
            Q = gram_schmidt_orthogonal(dev[3].to(dtype), special=True)
        assert not log.events, log.report()
        assert Q.dtype == dtype and (sim.to_cpu(Q).float() - cpu_out[2]).abs().max() < 2e-2


@pytest.mark.parametrize("group", [C(4), D(4)], ids=str)
def test_image_actions_on_the_device(group):
    """The image feature types keep the element index on the device (no read of g); every element acts
    as on the CPU, and a matrix outside the group is reported by raise_deferred."""
    order = grid_order(group)
    x = torch.randn(2, 3, 5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(8))
    y = torch.randn(2, 4, order, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    mats = element_matrices(group)
    dx, dy, dmats = sim.to_sim((x, y, mats))
    act_img, act_reg = Images(group, 3).act, RegularFeatures(group, 4).act
    with validation.deferred_checks(), sim.watch() as log:
        images = [act_img(dmats[i], dx) for i in range(order)]
        regular = [act_reg(dmats[i], dy) for i in range(order)]
        indexed = [act_on_image(dx, torch.tensor(i, device=dx.device), group) for i in range(order)]
        on_device = element_matrices(group, dx.device)
    assert not log.events, log.report()
    for i in range(order):
        assert torch.equal(sim.to_cpu(images[i]), act_img(mats[i], x))
        assert torch.equal(sim.to_cpu(indexed[i]), act_on_image(x, i, group))
        assert torch.equal(sim.to_cpu(regular[i]), act_reg(mats[i], y))
    assert torch.equal(sim.to_cpu(on_device), mats)
    outside = f"g is not an element of {str(group).replace('(', '.').replace(')', '.')}"
    with pytest.raises(ValueError, match=outside), validation.deferred_checks():
        with validation.deferred_checks(), sim.watch() as log:
            act_img(dmats[1] * 0.5, dx)
        assert not log.events, log.report()
