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
