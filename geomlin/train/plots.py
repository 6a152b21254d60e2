"""``curves.png``: training loss and evaluation metrics per epoch, one line per model, paired panels."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from geomlin.io_atomic import atomic_write

#: Data sets in the order of a row of panels (train beside the evaluations, so they read as pairs).
SET_ORDER = ("train", "valid", "test", "rotated")
#: Readable names of data sets and metrics (others are shown with underscores as spaces).
SET_NAMES = {"train": "train", "valid": "validation", "test": "test", "rotated": "test, randomly rotated"}
METRIC_NAMES = {"loss": "loss", "acc": "accuracy", "mae": "MAE", "mse": "MSE", "energy_mae": "energy MAE",
                "force_mae": "force MAE", "prior": "canonicalization prior"}


def _split(column: str) -> tuple[str, str, str] | None:
    """``"model/set_metric"`` -> ``(model, set, metric)``; None for columns that are not per-model metrics."""
    model, slash, rest = column.partition("/")
    data_set, underscore, metric = rest.partition("_")
    if not slash or not underscore:
        return None
    return model, data_set, metric


def _set_key(name: str) -> tuple[int, str]:
    return (SET_ORDER.index(name) if name in SET_ORDER else len(SET_ORDER), name)


def plot_curves(history: Sequence[dict], path: str | Path, title: str = ""):
    """Draw the metrics per epoch as a grid of panels, one line per model, and save a PNG.

    One row per metric (loss, accuracy, MAE, ...), one column per data set (train, validation,
    test, rotated test), so each metric's train and test panels sit side by side and share their
    y axis. Axes are labelled; a metric whose values are all positive and span more than a
    factor of ten is drawn on a log scale, which its axis label says. One legend names the models.

    Parameters
    ----------
    history : sequence of dict
        Metric rows, ``{"epoch": 1, "pointnet/train_loss": 0.7, "pointnet/test_acc": 0.5, ...}``.
    path : str or Path
        The PNG file (written atomically).
    title : str
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure
        The figure that was saved (its axes can be inspected).

    Draws on a figure of its own with the Agg canvas (no display needed), so matplotlib's
    process-wide backend and pyplot's figure list are left alone.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    epochs = [row["epoch"] for row in history]
    series: dict[str, dict[str, dict[str, list[float]]]] = {}  # metric -> set -> model -> values
    models: list[str] = []
    for column in (history[0] if history else {}):
        parts = _split(column)
        if parts is None:
            continue
        model, data_set, metric = parts
        models += [model] if model not in models else []
        series.setdefault(metric, {}).setdefault(data_set, {})[model] = [float(row[column]) for row in history]
    metrics = sorted(series, key=lambda m: (list(METRIC_NAMES).index(m) if m in METRIC_NAMES else len(METRIC_NAMES), m))
    sets = sorted({s for per_set in series.values() for s in per_set}, key=_set_key)
    rows, cols = max(1, len(metrics)), max(1, len(sets))
    fig = Figure(figsize=(3.8 * cols, 2.9 * rows + 0.6))
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False)
    colors = {m: f"C{k % 10}" for k, m in enumerate(models)}
    for r, metric in enumerate(metrics):
        values = [v for per_model in series[metric].values() for vs in per_model.values() for v in vs]
        finite = [v for v in values if math.isfinite(v)]
        log = bool(finite) and min(finite) > 0 and max(finite) > 10 * min(finite)
        name = METRIC_NAMES.get(metric, metric.replace("_", " "))
        for c, data_set in enumerate(sets):
            ax = axes[r, c]
            per_model = series[metric].get(data_set)
            if per_model is None:
                ax.axis("off")
                continue
            for model, vs in per_model.items():
                ax.plot(epochs, vs, marker="o", markersize=3, color=colors[model], label=model)
            ax.set_title(f"{SET_NAMES.get(data_set, data_set)}: {name}", fontsize=10)
            ax.set_xlabel("epoch")
            ax.set_ylabel(name + (" (log scale)" if log else ""))
            if log:
                ax.set_yscale("log")
            ax.grid(alpha=0.3)
        shown = [ax for ax in axes[r] if ax.axison]
        if len(shown) > 1:  # one y range per metric, so train and test read against each other
            low = min(ax.get_ylim()[0] for ax in shown)
            high = max(ax.get_ylim()[1] for ax in shown)
            for ax in shown:
                ax.set_ylim(low, high)
    if models:
        from matplotlib.lines import Line2D

        handles = [Line2D([], [], color=colors[m], marker="o", markersize=3) for m in models]
        fig.legend(handles, models, loc="lower center", ncol=min(len(models), 6), frameon=False)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.6 / (2.9 * rows + 0.6) if models else 0, 1, 1))
    atomic_write(path, lambda fh: fig.savefig(fh, format="png", dpi=110))
    return fig
