"""Bad input at every public boundary of geomlin.frames: the exception type and a phrase of the message
(what was expected, what was given), plus valid-input controls and degenerate geometry."""


import pytest
import torch

from geomlin.batching import batch_layout
from geomlin.frames import (
    Canonicalization,
    DegenerateFrameError,
    FrameAveraging,
    GroupConv2d,
    ImageCanonicalizer,
    LiftingConv2d,
    PointCloudCanonicalizer,
    VNLinear,
    VNPointNet,
    gram_schmidt_rotation,
    pca_frames,
)
from geomlin.groups import C
from geomlin.groups.square_grid import element_index
from geomlin.reps import Images, RegularFeatures, Scalars, Vectors
from geomlin.reps.images import act_on_image
from tests.frames.conftest import PointMLP, random_clouds
from tests.refusals import assert_refused

POS, MASK, FLAT, BATCH = random_clouds()
TETRA = torch.tensor([[[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]]], dtype=torch.float64)


def _nan(x, where=(0, 0, 0)):
    x = x.clone()
    x[where] = float("nan")
    return x


def _fa(**kw):
    return FrameAveraging(PointMLP(out_dim=3).double(), "E3", Vectors(3), **kw)


def _invert_with(can, t):
    return can.invert(POS, can(POS), t)


def _canonicalize_with(can, t):
    return can.canonicalize(POS, can(POS), t)


def _image_can():
    return ImageCanonicalizer("C4", hidden_channels=2, num_blocks=1, kernel_size=3).double()


CASES = [
    # ---- pca_frames
    ("pos not a tensor", lambda: pca_frames(POS.tolist()), TypeError, "pos must be a torch.Tensor"),
    ("integer pos", lambda: pca_frames(POS.long()), TypeError, "floating-point"),
    ("wrong last dimension", lambda: pca_frames(POS[..., :2], "E3"), ValueError, "last dimension 3"),
    ("flat pos without batch", lambda: pca_frames(FLAT, "E3"), ValueError, "padded batch (B, N, 3)"),
    ("NaN coordinate", lambda: pca_frames(_nan(POS)), ValueError, "NaN"),
    ("inf in the padding", lambda: pca_frames(_nan(POS, (1, 9, 0)).nan_to_num(posinf=1.0, nan=float("inf")),
                                              mask=MASK), ValueError, "NaN or inf"),
    ("float mask", lambda: pca_frames(POS, "E3", MASK.float()), TypeError, "torch.bool"),
    ("mask of the wrong shape", lambda: pca_frames(POS, "E3", MASK[:, :4]), ValueError, "mask must have shape (3, 10)"),
    ("batch of the wrong length", lambda: pca_frames(FLAT, batch=BATCH[:-1]), ValueError, "one entry per item"),
    ("unsorted batch", lambda: pca_frames(FLAT, batch=BATCH.flip(0)), ValueError, "sorted"),
    ("negative batch", lambda: pca_frames(FLAT, batch=BATCH - 1), ValueError, "non-negative"),
    ("float batch", lambda: pca_frames(FLAT, batch=BATCH.float()), TypeError, "batch must have an integer dtype"),
    ("mask and batch", lambda: pca_frames(FLAT, mask=MASK, batch=BATCH), ValueError, "not both"),
    ("a cloud with no points", lambda: pca_frames(POS, mask=MASK & (torch.arange(3) != 1)[:, None]), ValueError,
     "point clouds [1] have no points"),
    ("num_graphs too small", lambda: pca_frames(FLAT, batch=batch_layout(batch=BATCH, num_graphs=2)), ValueError,
     "num_graphs=2"),
    ("unknown group", lambda: pca_frames(POS, "Q3"), ValueError, "unknown group 'Q3'"),
    ("group of the wrong kind", lambda: pca_frames(POS, 3), TypeError, "group must be"),
    ("a group without PCA frames", lambda: pca_frames(POS, "S3"), TypeError,
     "group must be O(d), SO(d), E(d) or SE(d) for PCA frames, got S(3)"),
    ("dimension 11", lambda: pca_frames(torch.randn(2, 20, 11), "O(11)"), ValueError, "dimensions 1..10"),
    ("unknown policy", lambda: pca_frames(POS, on_degenerate="maybe"), ValueError, "on_degenerate must be one of"),
    ("negative gap_tol", lambda: pca_frames(POS, gap_tol=-0.1), ValueError, "gap_tol must be >= 0"),
    ("unknown sign policy", lambda: pca_frames(POS, signs="some"), ValueError, "signs must be one of"),
    ("skewness with sampling", lambda: pca_frames(POS, on_degenerate="sample", signs="skewness"), ValueError,
     "signs='skewness' picks one frame element"),
    ("degenerate with raise", lambda: pca_frames(TETRA, on_degenerate="raise"), DegenerateFrameError,
     "degenerate covariance spectrum"),
    # ---- FrameAveraging
    ("backbone not callable", lambda: FrameAveraging(3, "E3"), TypeError, "backbone must be callable"),
    ("output named by a string", lambda: FrameAveraging(PointMLP(), "E3", "tensor"), TypeError,
     "output must be feature types, not strings: for 'tensor' pass a feature type"),
    ("output of another kind", lambda: FrameAveraging(PointMLP(), "E3", Images("C4", 1)), TypeError,
     "output of a point cloud in R^3 must be Scalars() (or another invariant type), Vectors(3) or Positions(3)"),
    ("inputs of the wrong kind", lambda: FrameAveraging(PointMLP(), "E3", inputs=3), TypeError,
     "inputs must be a feature type or a tuple of them"),
    ("frames_per_call 0", lambda: _fa(frames_per_call=0), ValueError, "frames_per_call must be"),
    ("stochastic not a bool", lambda: _fa(stochastic=1), TypeError, "stochastic must be a bool"),
    ("policy of FrameAveraging", lambda: _fa(on_degenerate="never"), ValueError, "on_degenerate must be one of"),
    ("missing extra input", lambda: FrameAveraging(PointMLP(extra_dim=3, out_dim=3).double(), "E3", Vectors(3),
                                                   inputs=Vectors(3))(POS), ValueError, "expected 1 extra inputs"),
    ("edge_index without batch", lambda: _fa()(POS, edge_index=torch.zeros(2, 1, dtype=torch.long)), ValueError,
     "edge_index is only supported with flat batches"),
    ("extra input not a tensor", lambda: FrameAveraging(PointMLP(extra_dim=1, out_dim=3).double(), "E3", Vectors(3),
                                                        inputs=Scalars())(POS, [1.0]), TypeError,
     "extra input 0 must be a torch.Tensor"),
    # ---- canonicalization
    ("not a canonicalizer", lambda: Canonicalization(torch.nn.Linear(3, 3), PointMLP()), TypeError,
     "canonicalizer must be a geomlin Canonicalizer"),
    ("no output types", lambda: Canonicalization(PointCloudCanonicalizer(), PointMLP(), ()), ValueError,
     "output must hold at least one feature type"),
    ("unknown orthogonalization", lambda: PointCloudCanonicalizer("SO3", orthogonalization="svd"), ValueError,
     "orthogonalization must be one of"),
    ("unknown pooling", lambda: PointCloudCanonicalizer("SO3", pooling="max"), ValueError, "pooling must be one of"),
    ("zero hidden channels", lambda: PointCloudCanonicalizer("SO3", hidden_channels=0), ValueError,
     "hidden_channels must be >= 1"),
    ("unknown keyword", lambda: PointCloudCanonicalizer("SO3", width=3), TypeError, "unexpected keyword"),
    ("moment_frame not a bool", lambda: PointCloudCanonicalizer("SO3", moment_frame="yes"), TypeError,
     "moment_frame must be a bool"),
    ("regular output of a point cloud", lambda: _invert_with(PointCloudCanonicalizer("SO3").double(),
                                                             RegularFeatures("C4")),
     TypeError, "point-cloud canonicalizers invert Scalars (invariant types), Vectors and Positions"),
    ("image type for a point cloud", lambda: _canonicalize_with(PointCloudCanonicalizer("SO3").double(), Images("C4", 1)),
     TypeError, "point-cloud canonicalizers canonicalize"),
    ("canonicalizer on NaN", lambda: PointCloudCanonicalizer("SO3").double()(_nan(POS)), ValueError, "NaN"),
    # ---- images
    ("C8 images", lambda: ImageCanonicalizer(C(8)), ValueError, "C(4) or D(4)"),
    ("non-square images", lambda: _image_can()(torch.randn(2, 1, 8, 9, dtype=torch.float64)), ValueError, "H = W"),
    ("wrong image channels", lambda: _image_can()(torch.randn(2, 3, 9, 9, dtype=torch.float64)), ValueError,
     "expected 1 image channels"),
    ("NaN image", lambda: _image_can()(torch.full((1, 1, 9, 9), float("nan"), dtype=torch.float64)), ValueError,
     "NaN"),
    ("integer image", lambda: _image_can()(torch.ones(1, 1, 9, 9, dtype=torch.int64)), TypeError, "floating-point"),
    ("even kernel", lambda: LiftingConv2d("C4", 1, 1, 4), ValueError, "kernel_size must be odd"),
    ("zero temperature", lambda: ImageCanonicalizer("C4", temperature=0.0), ValueError, "temperature must be > 0"),
    ("zero channels", lambda: LiftingConv2d("C4", 0, 2), ValueError, "in_channels must be >= 1"),
    ("group conv on images", lambda: GroupConv2d("C4", 2, 2)(torch.randn(1, 2, 9, 9)), ValueError, "x must have shape"),
    ("image type of C8", lambda: Images(C(8), 1), ValueError, "C(4) or D(4)"),
    ("not a planar element", lambda: element_index(torch.tensor([[0.6, -0.8], [0.8, 0.6]], dtype=torch.float64), "C4"),
     ValueError, "g is not an element of C(4)"),
    # ---- vector neurons
    ("wrong vector channels", lambda: VNLinear(4, 2)(torch.randn(5, 3, 3)), ValueError, "v must have shape"),
    ("unknown VN pooling", lambda: VNPointNet(3, pooling="sum"), ValueError, "pooling must be one of"),
    ("missing frame", lambda: VNPointNet(3, frame_channels=3)(POS.float()), ValueError, "needs frame"),
    # ---- element indices are side inputs too (issue 24)
    ("C4 element index 9", lambda: act_on_image(torch.randn(5, 5), 9, "C4"), ValueError,
     "index must be an element index of C(4) in [0, 4), got 9"),
    ("negative element index", lambda: act_on_image(torch.randn(5, 5), -1, "D4"), ValueError,
     "element index of D(4) in [0, 8), got -1"),
    ("element index tensor out of range", lambda: act_on_image(torch.randn(5, 5), torch.tensor(4), "C4"),
     ValueError, "index must index elements of C(4) in [0, 4)"),
    ("frame for another number of clouds",
     lambda: VNPointNet(3, frame_channels=3).double()(POS, frame=torch.randn(POS.shape[0] + 1, 3, 3, dtype=torch.float64)),
     ValueError, f"frame must have shape ({POS.shape[0]}, 3, 3)"),
    ("NaN frame", lambda: VNPointNet(3, frame_channels=3).double()(POS, frame=torch.full((POS.shape[0], 3, 3), float("nan"),
                                                                                      dtype=torch.float64)),
     ValueError, "frame contains NaN"),
    ("two element indices", lambda: act_on_image(torch.randn(5, 5), torch.tensor([0, 1]), "C4"), ValueError,
     "index must be one element index"),
]


@pytest.mark.parametrize("what,call,exc,phrase", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_clearly(what, call, exc, phrase):
    assert_refused(call, exc, phrase)


def test_at_least_25_cases():
    assert len(CASES) >= 25


# ---------------------------------------------------------------- valid input and degenerate geometry
def test_valid_inputs_are_accepted():
    assert pca_frames(FLAT, "SE3", batch=BATCH).frames.shape == (3, 4, 3, 3)
    assert pca_frames(POS, "E3", MASK, signs="skewness").frames.shape == (3, 1, 3, 3)
    assert _fa()(POS, mask=MASK).shape == (3, 3)


@pytest.mark.parametrize("orthogonalization", ["gram_schmidt", "procrustes"])
@pytest.mark.parametrize("group", ["SO3", "E3"])
def test_coincident_points_get_the_identity_not_a_zero_matrix(group, orthogonalization):
    """A cloud whose points coincide has every rotation as a symmetry: the canonicalizer returns
    the identity (a defined rotation) and stays finite, also in the gradient."""
    # (for the linear group SO(3) "coincident" means all at the origin: elsewhere the point's own
    # direction is a feature, and only the rotations about it remain ambiguous)
    where = [0.0, 0.0, 0.0] if group == "SO3" else [0.3, -1.0, 2.0]
    same = torch.tensor([[where] * 6], dtype=torch.float64, requires_grad=True)
    can = PointCloudCanonicalizer(group, orthogonalization=orthogonalization).double()
    g = can(torch.cat([same, POS[:1, :6]]))
    assert torch.equal(g.R[0], torch.eye(3, dtype=torch.float64))
    assert (g.R[1].T @ g.R[1] - torch.eye(3, dtype=torch.float64)).abs().max() < 1e-12
    one_direction = can(torch.tensor([[[0.3, -1.0, 2.0]] * 6], dtype=torch.float64)).R[0]
    assert (one_direction.T @ one_direction - torch.eye(3, dtype=torch.float64)).abs().max() < 1e-12
    model = Canonicalization(can, PointMLP(out_dim=2).double(), Scalars())
    model(same).sum().backward()
    assert torch.isfinite(same.grad).all()


def test_gram_schmidt_of_degenerate_vectors_is_orthogonal():
    zero = torch.zeros(2, 3, dtype=torch.float64)
    v = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    for a, b in ((zero, v), (v, 2 * v), (v, zero)):
        R = gram_schmidt_rotation(a, b)
        assert (R.transpose(-1, -2) @ R - torch.eye(3, dtype=torch.float64)).abs().max() < 1e-12
        assert (torch.linalg.det(R) - 1).abs().max() < 1e-12


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_clouds_get_float32_accurate_frames(dtype):
    # coordinates of a few hundred: float16 second moments (|x|^2 ~ 1e5) overflow, float32 ones do not
    g = torch.Generator().manual_seed(3)
    pos = (torch.randn(2, 40, 3, generator=g, dtype=torch.float64) * torch.tensor([3.0, 2.0, 1.0]) * 300).to(dtype)
    half = pca_frames(pos, "O3")
    exact = pca_frames(pos.to(torch.float64), "O3")  # oracle: the same (rounded) cloud in float64
    assert half.frames.dtype == dtype and half.centroid.dtype == dtype
    assert half.eigenvalues.dtype == torch.float32 and torch.isfinite(half.eigenvalues).all()
    torch.testing.assert_close(half.frames.double(), exact.frames, rtol=0, atol=3 * torch.finfo(dtype).eps)
    torch.testing.assert_close(half.eigenvalues.double(), exact.eigenvalues, rtol=1e-5, atol=0)
