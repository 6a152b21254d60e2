"""PCA frames: structure, exact set equivariance (brute-force matching oracle), layouts,
degenerate spectra and bad input."""

import math

import numpy as np
import pytest
import torch

from geomlin.batching import batch_layout
from geomlin.frames import DegenerateFrameError, frame_group, pca_frames
from geomlin.frames.pca import num_frames
from geomlin.groups import E3, SE3, SO, Euclidean, O


def _match_sets(A, B):
    """Largest distance between the frame sets ``A``/``B`` ``(F, d, d)`` under the best matching."""
    dist = (A[:, None] - B[None]).flatten(2).norm(dim=-1)
    return max(dist.min(1).values.max().item(), dist.min(0).values.max().item())


@pytest.mark.parametrize("group,count,special", [("O3", 8, False), ("E3", 8, False), ("SO3", 4, True),
                                                 ("SE3", 4, True), ("O(2)", 4, False), ("SE(4)", 8, True)])
def test_frames_are_orthogonal_with_the_right_count(group, count, special, clouds):
    d = frame_group(group).d
    pos, mask, _, _ = clouds(d=d)
    fr = pca_frames(pos, group, mask)
    assert fr.frames.shape == (pos.shape[0], count, d, d)
    eye = torch.eye(d, dtype=torch.float64)
    assert torch.allclose(fr.frames.transpose(-1, -2) @ fr.frames, eye.expand_as(fr.frames), atol=1e-12)
    det = torch.linalg.det(fr.frames)
    if special:
        assert torch.allclose(det, torch.ones_like(det), atol=1e-12)
    else:
        assert (det > 0).sum() == (det < 0).sum()
    # Frames within one item are distinct (the full sign orbit).
    for b in range(pos.shape[0]):
        D = (fr.frames[b, :, None] - fr.frames[b, None]).flatten(2).norm(dim=-1)
        assert (D + torch.eye(count, dtype=torch.float64) * 10).min() > 1e-6


def test_eigenvalues_and_centroid_match_numpy(clouds):
    pos, mask, _, _ = clouds()
    fr = pca_frames(pos, "E3", mask)
    for b in range(pos.shape[0]):
        x = pos[b][mask[b]].numpy()
        c = x.mean(0)
        cov = (x - c).T @ (x - c) / len(x)
        assert np.allclose(fr.centroid[b].numpy(), c, atol=1e-12)
        assert np.allclose(fr.eigenvalues[b].numpy(), np.linalg.eigvalsh(cov)[::-1], atol=1e-12)
    fr_lin = pca_frames(pos, "O3", mask)
    assert torch.equal(fr_lin.centroid, torch.zeros_like(fr_lin.centroid))


@pytest.mark.parametrize("group,sampler", [("E3", E3()), ("SE3", SE3()), ("O3", O(3)), ("SO3", SO(3)),
                                           ("E(2)", Euclidean(2)), ("SO(4)", SO(4))])
def test_frame_set_is_exactly_equivariant(group, sampler, clouds):
    """Oracle: brute-force matching of F(gX) against g F(X) as sets."""
    d = frame_group(group).d
    pos, mask, _, _ = clouds(d=d)
    fr = pca_frames(pos, group, mask)
    gs = sampler.sample(5)
    for i in range(5):
        R = gs.R[i] if hasattr(gs, "R") else gs[i]
        t = gs.t[i] if hasattr(gs, "R") else torch.zeros(d, dtype=torch.float64)
        fr2 = pca_frames(pos @ R.T + t, group, mask)
        for b in range(pos.shape[0]):
            assert _match_sets(fr2.frames[b], R @ fr.frames[b]) < 1e-9
        assert torch.allclose(fr2.centroid, fr.centroid @ R.T + (t if isinstance(frame_group(group), Euclidean) else 0),
                              atol=1e-12)
        assert torch.allclose(fr2.gaps, fr.gaps, atol=1e-12)


def test_padded_masked_and_flat_layouts_agree(clouds):
    pos, mask, flat, batch = clouds()
    garbage = pos.clone()
    garbage[~mask] = 1e3  # padded slots must not matter
    a = pca_frames(garbage, "E3", mask)
    b = pca_frames(flat, "E3", batch=batch)
    for i in range(pos.shape[0]):
        assert _match_sets(a.frames[i], b.frames[i]) < 1e-10
    assert torch.allclose(a.centroid, b.centroid, atol=1e-12)
    unpadded = pca_frames(pos[:1, : int(mask[0].sum())], "E3")
    assert _match_sets(unpadded.frames[0], a.frames[0]) < 1e-10


def test_frames_are_differentiable_and_float32_works(clouds):
    pos, mask, _, _ = clouds()
    pos = pos.clone().requires_grad_(True)
    fr = pca_frames(pos, "SE3", mask)
    (fr.frames.sum() * 0 + (fr.frames[..., 0] * torch.arange(3.0, dtype=torch.float64)).sum()).backward()
    assert torch.isfinite(pos.grad).all()
    assert pca_frames(pos.detach().float(), "E3", mask).frames.dtype == torch.float32


# ----------------------------------------------------------------- degenerate spectra
def _tetrahedron():
    return torch.tensor([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], dtype=torch.float64)[None]


def _line():
    return (torch.linspace(-1, 2, 7, dtype=torch.float64)[:, None] * torch.tensor([1.0, 2.0, -0.5],
                                                                                  dtype=torch.float64))[None]


def _regular_polygon():
    a = torch.arange(6, dtype=torch.float64) * 2 * math.pi / 6
    return torch.stack([a.cos(), a.sin(), torch.zeros_like(a)], -1)[None] + 0.3


def _single_point():
    return torch.tensor([[[0.3, -1.0, 2.0]]], dtype=torch.float64)


DEGENERATE = {"tetrahedron": _tetrahedron, "line": _line, "regular_hexagon": _regular_polygon,
              "single_point": _single_point}


@pytest.mark.parametrize("name", sorted(DEGENERATE))
@pytest.mark.parametrize("group", ["E3", "SE3"])
def test_degenerate_inputs_follow_the_policy(name, group):
    pos = DEGENERATE[name]()
    with pytest.raises(DegenerateFrameError, match="degenerate covariance spectrum"):
        pca_frames(pos, group, on_degenerate="raise")
    with pytest.warns(UserWarning, match="degenerate"):
        warned = pca_frames(pos, group, on_degenerate="warn")
    sampled = pca_frames(pos, group, on_degenerate="sample", generator=torch.Generator().manual_seed(1))
    for fr in (warned, sampled):
        assert fr.degenerate.all()
        for t in fr:
            assert torch.isfinite(t.to(torch.float64)).all()
        eye = torch.eye(3, dtype=torch.float64)
        assert torch.allclose(fr.frames.transpose(-1, -2) @ fr.frames, eye.expand_as(fr.frames), atol=1e-12)
        if group == "SE3":
            det = torch.linalg.det(fr.frames)
            assert torch.allclose(det, torch.ones_like(det), atol=1e-12)


def test_sampled_frames_keep_the_well_defined_axes():
    """On a line, the first axis is unique: every sampled frame keeps it (up to sign) and
    randomises the orthogonal plane."""
    pos = _line()
    fr = pca_frames(pos, "E3", on_degenerate="sample", generator=torch.Generator().manual_seed(0))
    z = (pos - fr.centroid[:, None]) @ fr.frames[0]  # (F, N, 3) canonical coordinates
    assert z[..., 1:].abs().max() < 1e-12
    assert fr.frames[0, :, :, 1:].std(0).abs().max() > 1e-2  # the plane really is sampled
    point = pca_frames(_single_point(), "E3", on_degenerate="sample")
    assert torch.equal(point.centroid, _single_point()[:, 0])


def test_planar_cloud_is_not_degenerate_unless_isotropic():
    gen = torch.Generator().manual_seed(0)
    plane = torch.randn(1, 20, 3, generator=gen, dtype=torch.float64) * torch.tensor([2.0, 1.0, 0.0],
                                                                                     dtype=torch.float64)
    fr = pca_frames(plane, "E3", on_degenerate="raise")
    assert not fr.degenerate.any() and fr.eigenvalues[0, -1].abs() < 1e-12
    R = O(3).sample(1, generator=gen)[0]
    fr2 = pca_frames(plane @ R.T, "E3", on_degenerate="raise")
    assert _match_sets(fr2.frames[0], R @ fr.frames[0]) < 1e-9


def test_degenerate_items_do_not_poison_the_batch_or_gradients(clouds):
    pos, _, _, _ = clouds(B=2, N=4)
    pos = torch.cat([pos, _tetrahedron()]).requires_grad_(True)
    fr = pca_frames(pos, "E3", on_degenerate="ignore")
    assert fr.degenerate.tolist() == [False, False, True]
    (fr.frames * torch.randn_like(fr.frames)).sum().backward()
    assert torch.isfinite(pos.grad).all()
    assert pos.grad[:2].abs().sum() > 0


# ----------------------------------------------------------------------- bad input
def test_bad_input_raises_clear_errors(clouds):
    pos, mask, flat, batch = clouds()
    with pytest.raises(ValueError, match="last dimension 3"):
        pca_frames(pos[..., :2], "E3")
    with pytest.raises(ValueError, match="NaN"):
        bad = pos.clone()
        bad[0, 0, 0] = float("nan")
        pca_frames(bad, "E3")
    with pytest.raises(ValueError, match=r"mask must have shape \(3, 10\)"):
        pca_frames(pos, "E3", mask[:, :5])
    with pytest.raises(TypeError, match="bool"):
        pca_frames(pos, "E3", mask.float())
    empty = mask.clone()
    empty[1] = False
    with pytest.raises(ValueError, match=r"point clouds \[1\] have no points"):
        pca_frames(pos, "E3", empty)
    with pytest.raises(ValueError, match="no points"):
        pca_frames(flat, "E3", batch=batch_layout(batch=batch, num_graphs=5))
    with pytest.raises(ValueError, match="batch must have one entry per item"):
        pca_frames(flat, "E3", batch=batch[:-1])
    with pytest.raises(ValueError, match="not both"):
        pca_frames(flat, "E3", mask=mask, batch=batch)
    with pytest.raises(ValueError, match="padded batch"):
        pca_frames(flat, "E3")
    with pytest.raises(ValueError, match="unknown group .Q3."):
        pca_frames(pos, "Q3")
    with pytest.raises(ValueError, match="on_degenerate"):
        pca_frames(pos, "E3", on_degenerate="maybe")
    with pytest.raises(TypeError, match="floating-point"):
        pca_frames(pos.long(), "E3")


@pytest.mark.parametrize("d", [1, 2, 3, 5])
def test_sign_patterns_follow_the_product_order(d):
    """Oracle: itertools.product((1, -1), repeat=d), filtered to product +1 for SO/SE."""
    import itertools

    from geomlin.frames.pca import sign_patterns

    for special in (False, True):
        rows = [s for s in itertools.product((1.0, -1.0), repeat=d) if not special or math.prod(s) > 0]
        assert torch.equal(sign_patterns(d, special), torch.tensor(rows, dtype=torch.float64))


def test_frame_groups():
    assert frame_group("E3") == frame_group(E3()) == frame_group("E(3)") == E3()
    assert frame_group("SE(3)") is not None and num_frames(SE3()) == 4
    assert num_frames(SO(5)) == 16 and num_frames(O(2)) == 4 and num_frames(E3()) == 8


def test_coincident_points_are_zero_spread_but_far_clouds_are_fine():
    same = torch.tensor([[[1000.0, 2.0, 3.0]]]).repeat(1, 5, 1)
    fr = pca_frames(same, "E3", on_degenerate="sample")
    assert fr.degenerate.all() and torch.equal(fr.gaps, torch.zeros_like(fr.gaps))
    assert torch.isfinite(fr.frames).all()
    far = torch.randn(1, 20, 3, generator=torch.Generator().manual_seed(0)) * torch.tensor([1.0, 0.5, 0.2]) + 1000
    assert not pca_frames(far, "E3", on_degenerate="raise").degenerate.any()


# ------------------------------------------------------------- moment axes and skewness signs
def _cube_surface(num_points=400, seed=0):
    from geomlin.datasets.synthetic import shape_points

    return shape_points("cube", 1, num_points, torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("group,sampler", [("E3", E3()), ("SE3", SE3()), ("O3", O(3))])
def test_moment_frames_are_exactly_equivariant_sets(group, sampler):
    """Oracle: brute-force matching of F(gX) against g F(X) on clouds the policy acts on (a sampled
    cube and a tetrahedron's vertices with a little noise: isotropic covariance)."""
    g = torch.Generator().manual_seed(4)
    tetra = _tetrahedron() + 0.05 * torch.randn(1, 4, 3, dtype=torch.float64, generator=g)
    for pos in (_cube_surface(), tetra):
        fr = pca_frames(pos, group, on_degenerate="moments", gap_tol=0.2)
        assert fr.degenerate.all()
        elements = sampler.sample(4, generator=g)
        for i in range(4):
            R = elements.R[i] if hasattr(elements, "R") else elements[i]
            t = elements.t[i] if hasattr(elements, "R") else torch.zeros(3, dtype=torch.float64)
            moved = pca_frames(pos @ R.T + t, group, on_degenerate="moments", gap_tol=0.2)
            assert _match_sets(moved.frames[0], R @ fr.frames[0]) < 1e-9


def test_moment_axes_of_a_cube_are_its_symmetry_axes():
    """Oracle: the geometry of the cube. Its covariance is isotropic, so PCA's axes are noise; the
    moment axes start from a body diagonal (the maximum of the fourth moment on its surface), and two
    independent samples get the cube's corners to the same canonical places (up to the frame's signs),
    which plain PCA does not."""
    diagonals = torch.tensor([[1, 1, 1], [1, 1, -1], [1, -1, 1], [-1, 1, 1]], dtype=torch.float64) / math.sqrt(3)
    corners = torch.tensor([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=torch.float64)

    def corner_mismatch(policy, tol):
        frames = [pca_frames(_cube_surface(seed=seed), "E3", on_degenerate=policy, gap_tol=tol).frames[0]
                  for seed in (0, 1)]
        ref = corners @ frames[0][0]  # canonical coordinates z = Q^T x, as rows: x^T Q
        return min(torch.cdist(ref, corners @ Q).min(-1).values.max().item() for Q in frames[1]), frames

    moments, frames = corner_mismatch("moments", 0.2)
    assert (diagonals @ frames[0][0, :, 0]).abs().max() > math.cos(math.radians(8))
    assert moments < 0.35  # corners (at distance sqrt 3) land within ~12 degrees
    plain, _ = corner_mismatch("ignore", 1e-3)
    assert plain > 2 * moments


def test_moment_axes_are_o_k_equivariant():
    from geomlin.frames.moments import moment_axes

    g = torch.Generator().manual_seed(5)
    y = torch.randn(3, 30, 3, dtype=torch.float64, generator=g) ** 3  # skewed, heavy tails
    w = torch.ones(3, 30, dtype=torch.float64)
    U = moment_axes(y, w)
    assert (U.transpose(-1, -2) @ U - torch.eye(3, dtype=torch.float64)).abs().max() < 1e-12
    for Q in O(3).sample(3, generator=g):
        V = moment_axes(y @ Q, w)  # coordinates in a rotated basis
        # Q^T U and V agree column by column up to sign
        dots = ((Q.T @ U) * V).sum(-2).abs()
        assert (dots - 1).abs().max() < 1e-9


def test_skewness_frames_have_one_element_and_are_equivariant(clouds):
    pos, mask, _, _ = clouds()
    pos = pos ** 3 * 0.3 + pos  # clearly skewed along every axis
    for group, sampler in (("E3", E3()), ("SE3", SE3())):
        fr = pca_frames(pos, group, mask, signs="skewness")
        assert fr.frames.shape == (3, 1, 3, 3)
        if group == "SE3":
            assert (torch.linalg.det(fr.frames) - 1).abs().max() < 1e-12
        else:  # the first two axes have positive third moments
            z = torch.einsum("bnd,bde->bne", pos - fr.centroid[:, None], fr.frames[:, 0])
            third = ((z ** 3) * mask[..., None]).sum(1)
            assert (third > 0).all()
        elements = sampler.sample(4)
        for i in range(4):
            R, t = elements.R[i], elements.t[i]
            moved = pca_frames(pos @ R.T + t, group, mask, signs="skewness")
            assert (moved.frames[:, 0] - R @ fr.frames[:, 0]).abs().max() < 1e-9


def test_frames_of_a_group_given_by_name_compile_without_a_graph_break():
    """Issue 34: the name is parsed at trace time, not in the graph (oracle: the eager call)."""
    pos = torch.randn(3, 10, 3, dtype=torch.float64) * torch.tensor([1.5, 1.0, 0.5], dtype=torch.float64)

    def frames(p):
        return pca_frames(p, "SO3", on_degenerate="ignore").frames

    torch._dynamo.reset()
    explained = torch._dynamo.explain(frames)(pos)
    assert explained.graph_break_count == 0, explained.break_reasons
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(frames, fullgraph=True, backend="eager")(pos), frames(pos))
