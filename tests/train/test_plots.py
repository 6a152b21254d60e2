"""``plot_curves`` draws on its own figure: matplotlib's backend and pyplot's figures are left alone."""

import matplotlib
import matplotlib.pyplot as plt
from PIL import Image

from geomlin.train.plots import plot_curves


def test_plot_curves_leaves_matplotlib_settings_alone(tmp_path):
    backend, figures = matplotlib.get_backend(), plt.get_fignums()
    history = [{"epoch": e, "pointnet/train_loss": 1.0 / e, "pointnet/test_acc": 0.1 * e} for e in (1, 2, 3)]
    path = tmp_path / "curves.png"
    plot_curves(history, path, title="t")
    assert matplotlib.get_backend() == backend
    assert plt.get_fignums() == figures
    with Image.open(path) as image:  # a real PNG with two panels side by side
        assert image.format == "PNG" and image.size[0] > image.size[1]


def test_curves_pair_train_and_test_panels_with_labelled_axes(tmp_path):
    history = [{"epoch": e, "lr": 0.1, "a/train_loss": 10.0 / e**2, "b/train_loss": 5.0 / e, "a/test_loss": 9.0 / e,
                "b/test_loss": 6.0 / e, "a/test_acc": 0.1 * e, "b/test_acc": 0.05 * e, "a/rotated_acc": 0.1}
               for e in range(1, 6)]
    fig = plot_curves(history, tmp_path / "curves.png")
    shown = [ax for ax in fig.axes if ax.axison]
    titles = [ax.get_title() for ax in shown]
    # one row per metric, train | test | rotated across: the loss row first, then accuracy
    assert titles == ["train: loss", "test: loss", "test: accuracy", "test, randomly rotated: accuracy"]
    loss_train, loss_test = shown[:2]
    assert loss_train.get_ylim() == loss_test.get_ylim()  # shared range: the pair reads against each other
    assert loss_train.get_yscale() == "log" and "(log scale)" in loss_train.get_ylabel()
    assert all(ax.get_xlabel() == "epoch" for ax in shown)
    assert shown[2].get_yscale() == "linear" and shown[2].get_ylabel() == "accuracy"
    assert len(fig.legends) == 1 and [t.get_text() for t in fig.legends[0].get_texts()] == ["a", "b"]
    assert not any(ax.get_legend() for ax in shown)  # no legend repeated per panel
