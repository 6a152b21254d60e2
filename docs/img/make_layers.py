"""Draw docs/img/layers.png: geomlin's package floors (each imports only from the floors above it).

    python docs/img/make_layers.py
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch

#: (floor label, packages on that floor, one line on what they hold)
FLOORS = [
    ("ground floor", ["tables", "precision", "validation", "linalg", "io_atomic", "neighbors"],
     "tables and device cache · autocast rule · checks · sync-free solvers · atomic writes · neighbours"),
    ("core", ["algebra", "groups", "reps", "testing"],
     "Clifford algebras, G(3,0,1) · groups as generators, versors · feature types · the checker"),
    ("layer families", ["linear", "clifford", "gatr", "frames", "gaunt"],
     "linear maps · CGENN/GLGENN/GCAN/GA attention · GATr · frames · Gaunt (none imports another)"),
    ("data and models", ["datasets", "models"], "PyG loaders and transforms · reference models"),
    ("running", ["train", "deploy", "cli"], "training loop and tasks · export · the geomlin command"),
]
COLORS = ["#dbe8f6", "#e3f1e1", "#fbeedd", "#f4e1ee", "#ececec"]


def main() -> None:
    fig, ax = plt.subplots(figsize=(9, 5.6))
    ax.set_xlim(0, 10)
    ax.set_ylim(-0.3, len(FLOORS) * 1.1)
    ax.axis("off")
    for i, ((label, packages, blurb), color) in enumerate(zip(FLOORS, COLORS)):
        y = (len(FLOORS) - 1 - i) * 1.1
        ax.add_patch(FancyBboxPatch((0.1, y), 9.8, 0.85, boxstyle="round,pad=0.02", fc=color, ec="#666666"))
        ax.text(0.3, y + 0.6, label, fontsize=9, color="#444444", style="italic")
        width = 7.6 / len(packages)
        for j, p in enumerate(packages):
            x = 2.1 + j * width
            ax.add_patch(FancyBboxPatch((x, y + 0.35), width - 0.2, 0.4, boxstyle="round,pad=0.02",
                                        fc="white", ec="#333333"))
            ax.text(x + (width - 0.2) / 2, y + 0.55, f"geomlin.{p}", ha="center", va="center", fontsize=9 if len(packages) < 5 else (8 if len(packages) < 6 else 6.5),
                    family="monospace")
        ax.text(2.1, y + 0.12, blurb, fontsize=8.5, color="#333333")
        if i:
            ax.annotate("", xy=(1.2, y + 0.85 + 0.22), xytext=(1.2, y + 0.85),
                        arrowprops={"arrowstyle": "->", "color": "#333333"})
    ax.set_title("geomlin's floors: each package imports only from the floors above it", fontsize=10)
    fig.tight_layout()
    fig.savefig(Path(__file__).with_name("layers.png"), dpi=110)


if __name__ == "__main__":
    main()
