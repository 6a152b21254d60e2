"""``curves.png``: training loss and evaluation metrics per epoch, one line per model."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def _split(column: str) -> tuple[str, str]:
    model, _, metric = column.partition("/")
    return model, metric


def plot_curves(history: Sequence[dict], path: str | Path, title: str = "") -> None:
    """Draw one panel per metric (``model/metric`` columns of ``history``) and save a PNG.

    ``history`` is the list of metric rows (``{"epoch": 1, "pointnet/train_loss": 0.7, ...}``).
    Loss panels use a log scale. Draws on a figure of its own with the Agg canvas (no display
    needed), so matplotlib's process-wide backend and pyplot's figure list are left alone.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    epochs = [row["epoch"] for row in history]
    metrics: dict[str, dict[str, list[float]]] = {}
    for column in (history[0] if history else {}):
        if "/" not in column:
            continue
        model, metric = _split(column)
        metrics.setdefault(metric, {})[model] = [float(row[column]) for row in history]
    n = max(1, len(metrics))
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig = Figure(figsize=(4.2 * cols, 3.2 * rows))
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, (metric, per_model) in zip(axes.flat, sorted(metrics.items())):
        for model, values in per_model.items():
            ax.plot(epochs, values, marker="o", markersize=3, label=model)
        ax.set_title(metric)
        ax.set_xlabel("epoch")
        if "loss" in metric and all(v > 0 for vs in per_model.values() for v in vs):
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(metrics):]:
        ax.axis("off")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    from geomlin.io_atomic import atomic_write

    atomic_write(path, lambda fh: fig.savefig(fh, format="png", dpi=110))
