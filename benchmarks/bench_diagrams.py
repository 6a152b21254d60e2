"""Fast factored diagram layer vs the same layer as one dense weight matrix.

No peer package exists for diagram layers: EMLP and escnn solve dense bases of the equivariant
maps (they would materialise the same ``n^(k+l)`` matrices), and no installable package
implements Pearce-Crump's factored diagram product. The comparison is therefore with **geomlin's
own baseline**: the identical ``DiagramLinear`` materialised as a dense
``(C_out n^l) x (C_in n^k)`` matrix (built column by column from the layer itself, so both
compute the same map; checked with ``allclose``), applied as one ``x @ W^T + b``. Groups S_n and
O(n), ``k = l = 2``, 8 -> 8 channels, batch 32, float32, forward pass without autograd.

Time: warm-up, then interleaved repeats of both, medians.
Memory: peak bytes of live tensors = persistent tensors the method needs
(input, parameters / dense weight, buffers) + the peak of tensors allocated
during the forward, tracked exactly with a ``TorchDispatchMode`` that
watches every storage the forward creates until it is freed.

Usage: ``python benchmarks/bench_diagrams.py [--quick] [--threads 2]``
"""

from __future__ import annotations

import statistics
import time
import weakref

import torch
from harness import Table, header, parser, setup
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from geomlin.linear.diagrams.layer import DiagramLinear

BATCH = 32
CHANNELS = 8
ORDER = 2
#: Refuse dense weights larger than this (the benchmark machine is shared; keep the process small).
DENSE_LIMIT_BYTES = 2 * 2 ** 30
#: Columns of the dense weight built per chunk.
BUILD_CHUNK = 256


class PeakMemory(TorchDispatchMode):
    """Track the bytes of storages created inside the context and their peak while alive."""

    def __init__(self):
        super().__init__()
        self.live: dict[int, int] = {}
        self.current = 0
        self.peak = 0

    def _free(self, key: int) -> None:
        self.current -= self.live.pop(key, 0)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0]
                  if isinstance(t, torch.Tensor)}
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                key = storage.data_ptr()
                # views and in-place results share an input's storage: not a new allocation
                if key in self.live or key in inputs or storage.nbytes() == 0:
                    continue
                self.live[key] = storage.nbytes()
                self.current += storage.nbytes()
                self.peak = max(self.peak, self.current)
                weakref.finalize(storage, self._free, key)
        return out


def tensor_bytes(*tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


@torch.no_grad()
def dense_weight(layer: DiagramLinear) -> torch.Tensor:
    """The layer's linear part as one ``(C_out n^l, C_in n^k)`` matrix, built from the layer."""
    n, k = layer.n, layer.order_in
    cols = layer.in_channels * n ** k
    rows = layer.out_channels * n ** layer.order_out
    W = torch.empty(rows, cols)
    bias = layer.bias
    layer.bias = None
    try:
        for start in range(0, cols, BUILD_CHUNK):
            stop = min(cols, start + BUILD_CHUNK)
            eye = torch.zeros(stop - start, cols)
            eye[torch.arange(stop - start), torch.arange(start, stop)] = 1.0
            W[:, start:stop] = layer(eye.reshape(-1, layer.in_channels, *([n] * k))).reshape(stop - start, rows).T
    finally:
        layer.bias = bias
    return W


def forward_peak(fn, x) -> int:
    with PeakMemory() as mem:
        y = fn(x)
        del y
    return mem.peak


def run_case(group: str, n: int, repeats: int) -> dict:
    torch.manual_seed(0)
    layer = DiagramLinear(group, n, ORDER, ORDER, CHANNELS, CHANNELS).float()
    with torch.no_grad():
        layer.bias.normal_()
    x = torch.randn(BATCH, CHANNELS, *([n] * ORDER))
    fast_persistent = tensor_bytes(x, *layer.parameters(), *layer.buffers())

    def fast(inp):
        with torch.no_grad():
            return layer(inp)

    row = {"group": group, "n": n, "basis": layer.num_basis}
    fast_times = []
    fast_peak = fast_persistent + forward_peak(fast, x)
    dense_bytes = (CHANNELS * n ** ORDER) ** 2 * 4
    if dense_bytes > DENSE_LIMIT_BYTES:
        for _ in range(repeats):
            t = time.perf_counter()
            fast(x)
            fast_times.append(time.perf_counter() - t)
        row.update(fast_ms=1e3 * statistics.median(fast_times), fast_mb=fast_peak / 2 ** 20,
                   dense_ms=None, dense_mb=dense_bytes / 2 ** 20,
                   note=f"dense weight needs {dense_bytes / 2 ** 30:.1f} GiB (> {DENSE_LIMIT_BYTES / 2 ** 30:.0f} "
                        "GiB limit on this shared machine); not built")
        return row
    W = dense_weight(layer)
    with torch.no_grad():  # the layer's value at zero is its (equivariant) bias
        b = layer(torch.zeros(1, CHANNELS, *([n] * ORDER))).reshape(-1)

    def dense(inp):
        return torch.addmm(b, inp.reshape(inp.shape[0], -1), W.T).reshape(inp.shape[0], CHANNELS, *([n] * ORDER))

    err = (dense(x) - fast(x)).abs().max().item() / fast(x).abs().max().item()
    if err > 1e-4:
        raise RuntimeError(f"dense and fast layers disagree (relative error {err:.2e})")
    dense_peak = tensor_bytes(x, W, b) + forward_peak(dense, x)
    dense_times = []
    for _ in range(2):  # warm-up
        fast(x)
        dense(x)
    fast_cpu, dense_cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        fast(x)
        fast_times.append(time.perf_counter() - t)
        fast_cpu.append(time.process_time() - c)
        t, c = time.perf_counter(), time.process_time()
        dense(x)
        dense_times.append(time.perf_counter() - t)
        dense_cpu.append(time.process_time() - c)
    row.update(fast_cpu=1e3 * statistics.median(fast_cpu), dense_cpu=1e3 * statistics.median(dense_cpu))
    row.update(fast_ms=1e3 * statistics.median(fast_times), dense_ms=1e3 * statistics.median(dense_times),
               fast_mb=fast_peak / 2 ** 20, dense_mb=dense_peak / 2 ** 20, note=f"max rel. diff {err:.1e}")
    return row


def main(argv=None) -> None:
    args = parser(__doc__.splitlines()[0]).parse_args(argv)
    setup(args)
    repeats = args.repeats or (5 if args.quick else 15)
    sizes = (8, 16) if args.quick else (8, 16, 32, 64)
    print(header("DiagramLinear (fast factored product) vs its dense materialised weight", args, repeats))
    print(f"No peer package implements diagram layers; the dense column is geomlin's own baseline. "
          f"k = l = {ORDER}, {CHANNELS} -> {CHANNELS} channels, batch {BATCH}, float32, forward without autograd.\n")
    table = Table(["group", "n", "basis", "fast ms", "dense (baseline) ms", "speed-up", "fast CPU ms",
                   "dense CPU ms", "CPU speed-up", "fast MiB", "dense MiB", "memory fast / dense", "note"])
    for group in ("S", "O"):
        for n in sizes:
            r = run_case(group, n, repeats)
            mem = (f"{r['fast_mb']:.2f}", f"{r['dense_mb']:.2f}", f"{r['fast_mb'] / r['dense_mb']:.4f}")
            if r["dense_ms"] is None:
                table.add(group, n, r["basis"], f"{r['fast_ms']:.3f}", "–", "–", "–", "–", "–", *mem, r["note"])
            else:
                table.add(group, n, r["basis"], f"{r['fast_ms']:.3f}", f"{r['dense_ms']:.3f}",
                          f"{r['dense_ms'] / r['fast_ms']:.1f}x", f"{r['fast_cpu']:.3f}", f"{r['dense_cpu']:.3f}",
                          f"{r['dense_cpu'] / r['fast_cpu']:.1f}x", *mem, r["note"])
    table.print()
    print("ms: median wall time; CPU: median process CPU time (robust on a shared machine); speed-up = dense / fast. "
          "MiB: peak live tensor bytes (input, weights, buffers and every temporary of the forward). "
          "Where the dense weight would not fit, its MiB is the weight matrix alone (not built).")


if __name__ == "__main__":
    main()
