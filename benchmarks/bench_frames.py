"""Benchmark: frame averaging and learned canonicalization against the packages a user would pick.

* Frame averaging (E(3), |F| = 8 PCA frames) of one PointNet backbone: geomlin's
  :class:`~geomlin.frames.FrameAveraging` (``frames_per_call="auto"``: one frame per backbone call on
  CPU, and ``None``: all frames folded into one call) against ``frame-averaging-pytorch``'s
  ``FrameAverage`` (all frames folded into the batch), and the frame machinery's overhead
  ``FA / (|F| x backbone)``.
* Learned canonicalization (SO(3)) of the same backbone: geomlin's
  :class:`~geomlin.frames.Canonicalization` with :class:`~geomlin.frames.PointCloudCanonicalizer`
  (Gram-Schmidt and Procrustes) against ``equiadapt``'s ``EquivariantPointcloudCanonicalization``
  with its ``VNSmall`` network (k = 20 nearest-neighbour vector neurons, as in its examples).

Forward (inference) and forward + backward (training); one warm-up, interleaved runs, medians;
the activation memory of one training step (tensors saved for the backward pass). A peer that cannot be imported is reported as "not installed"
(equiadapt needs torchvision, which does not load next to a CPU-only torch 2.13; the recorded table
in docs/frames.md ran in a separate virtualenv, see its header for the torch version).

    python benchmarks/bench_frames.py [--quick] [--threads 1] [--repeats N]
"""

from __future__ import annotations

import importlib

import harness
import torch

from geomlin.frames import Canonicalization, FrameAveraging, PointCloudCanonicalizer
from geomlin.models import PointNet
from geomlin.reps import Scalars

#: (clouds, points per cloud): a small batch and a realistic training batch.
SIZES = [(8, 128), (32, 512)]
QUICK_SIZES = [(8, 128)]
#: Classes of the backbone's output.
NUM_CLASSES = 10
#: Nearest neighbours of equiadapt's VNSmall (its example configuration).
EQUIADAPT_KNN = 20


def _peer(name: str):
    try:
        return importlib.import_module(name), None
    except Exception as exc:  # noqa: BLE001 - any import failure means "not usable here"
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:80]}"


def _version(distribution: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return "?"


def saved_mib(forward) -> float:
    """MiB of the tensors that ``forward()`` saves for the backward pass (distinct storages): the
    activation memory of a training step, deterministic unlike a process's resident-set peak."""
    seen: dict[int, int] = {}

    def pack(t):
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        forward()
    return sum(seen.values()) / 2**20


def _step(fn, backward: bool):
    def run():
        if backward:
            fn().square().sum().backward()
        else:
            with torch.no_grad():
                fn()
    return run


class _PeerBackbone(torch.nn.Module):
    """frame-averaging-pytorch passes ``(B * F, N, 3)`` points: PointNet takes them as they are."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, points):
        return self.net(points)


def frame_averaging_table(args, sizes, repeats) -> None:
    fap, why = _peer("frame_averaging_pytorch")
    backbone = PointNet(NUM_CLASSES)
    table = harness.Table(["clouds x points", "mode", "backbone ms", "geomlin auto ms", "geomlin folded ms",
                           "frame-averaging-pytorch ms", "peer / geomlin", "FA / (8 x backbone)",
                           "activations MiB geomlin", "activations MiB peer"])
    for B, N in sizes:
        pos = torch.randn(B, N, 3) * torch.tensor([2.0, 1.0, 0.5])
        ours = FrameAveraging(backbone, "E3", Scalars(NUM_CLASSES))
        folded = FrameAveraging(backbone, "E3", Scalars(NUM_CLASSES), frames_per_call=None)
        peer = fap.FrameAverage(_PeerBackbone(backbone), dim=3, invariant_output=True) if fap else None
        for backward in (False, True):
            fns = {"backbone": _step(lambda pos=pos: backbone(pos), backward),
                   "auto": _step(lambda pos=pos, m=ours: m(pos), backward),
                   "folded": _step(lambda pos=pos, m=folded: m(pos), backward)}
            if peer is not None:
                fns["peer"] = _step(lambda pos=pos, m=peer: m(pos), backward)
            t = harness.measure(fns, repeats)
            best = min(t["auto"], t["folded"])
            mem_ours = mem_peer = "–"
            if backward:
                mem_ours = f"{saved_mib(lambda pos=pos, m=ours: m(pos)):.1f}"
                mem_peer = f"{saved_mib(lambda pos=pos, m=peer: m(pos)):.1f}" if peer is not None else "–"
            table.add(f"{B} x {N}", "fwd+bwd" if backward else "fwd", harness.ms(t["backbone"]),
                      harness.ms(t["auto"]), harness.ms(t["folded"]),
                      harness.ms(t["peer"]) if peer is not None else "not installed",
                      harness.ratio(t["peer"], best) if peer is not None else "–",
                      f"{t['auto'] / (8 * t['backbone']):.2f}", mem_ours, mem_peer)
    print("\n### Frame averaging, E(3), PointNet backbone (|F| = 8)\n")
    if fap is None:
        print(f"frame-averaging-pytorch: not installed ({why})\n")
    else:
        print(f"frame-averaging-pytorch {_version('frame-averaging-pytorch')}\n")
    table.print()
    print("\n`peer / geomlin` divides the peer's time by geomlin's faster mode; `FA / (8 x backbone)` is the "
          "frame machinery's overhead in the default mode (1.0 = none).")


def canonicalization_table(args, sizes, repeats) -> None:
    ea, why = _peer("equiadapt")
    backbone = PointNet(NUM_CLASSES)
    ours_gs = Canonicalization(PointCloudCanonicalizer("SO3", hidden_channels=21, num_blocks=1), backbone)
    ours_pr = Canonicalization(PointCloudCanonicalizer("SO3", hidden_channels=21, num_blocks=1,
                                                       orthogonalization="procrustes"), backbone)
    peer = None
    if ea is not None:
        from omegaconf import OmegaConf

        net = ea.pointcloud.VNSmall(OmegaConf.create({"n_knn": EQUIADAPT_KNN, "pooling": "mean"}))
        canon = ea.pointcloud.EquivariantPointcloudCanonicalization(net, OmegaConf.create({}))

        def peer(pos):  # equiadapt's point clouds are (B, 3, N)
            return backbone(canon(pos.transpose(1, 2)).transpose(1, 2))

        modules = [net]
    table = harness.Table(["clouds x points", "mode", "geomlin Gram-Schmidt ms", "geomlin Procrustes ms",
                           "equiadapt ms", "equiadapt / geomlin", "activations MiB geomlin",
                           "activations MiB equiadapt"])
    for B, N in sizes:
        pos = torch.randn(B, N, 3) * torch.tensor([2.0, 1.0, 0.5])
        for backward in (False, True):
            for m in [ours_gs, ours_pr] + (modules if peer else []):
                m.train(backward)
            fns = {"gs": _step(lambda pos=pos: ours_gs(pos), backward),
                   "pr": _step(lambda pos=pos: ours_pr(pos), backward)}
            if peer is not None:
                fns["peer"] = _step(lambda pos=pos: peer(pos), backward)
            t = harness.measure(fns, repeats)
            mem_ours = mem_peer = "–"
            if backward:
                mem_ours = f"{saved_mib(lambda pos=pos: ours_gs(pos)):.1f}"
                mem_peer = f"{saved_mib(lambda pos=pos, m=peer: m(pos)):.1f}" if peer is not None else "–"
            table.add(f"{B} x {N}", "fwd+bwd" if backward else "fwd", harness.ms(t["gs"]), harness.ms(t["pr"]),
                      harness.ms(t["peer"]) if peer is not None else "not installed",
                      harness.ratio(t["peer"], t["gs"]) if peer is not None else "–", mem_ours, mem_peer)
    print("\n### Learned canonicalization, SO(3), PointNet backbone\n")
    if ea is None:
        print(f"equiadapt: not installed ({why})\n")
    else:
        print(f"equiadapt {_version('equiadapt')}\n")
    table.print()
    print("\nThe networks differ: geomlin's canonicalizer is a vector-neuron PointNet on moment channels "
          "(x, Cx, C^2x; 21 channels, one block), equiadapt's VNSmall runs vector neurons on a k = 20 "
          "nearest-neighbour graph. Both predict a rotation per cloud and call the backbone once.")


def main() -> None:
    p = harness.parser(__doc__.split("\n")[0])
    args = p.parse_args()
    harness.setup(args)
    repeats = args.repeats or (3 if args.quick else 7)
    sizes = QUICK_SIZES if args.quick else SIZES
    print(harness.header("Frame averaging and canonicalization vs frame-averaging-pytorch and equiadapt",
                         args, repeats))
    frame_averaging_table(args, sizes, repeats)
    canonicalization_table(args, sizes, repeats)


if __name__ == "__main__":
    main()
