"""The clusters at a glance: the 2-D PCA projection by cluster, and cluster sizes by mean difficulty."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure


def plot(path: Path, proj: np.ndarray, labels: np.ndarray, difficulty: np.ndarray, title: str) -> Path:
    """Left: 2-D PCA projection coloured by cluster. Right: cluster sizes, bars coloured by mean difficulty."""
    k = int(labels.max()) + 1
    fig = Figure(figsize=(13, 5.5), dpi=110)
    FigureCanvasAgg(fig)
    ax, bx = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.1, 1]})
    ids = np.arange(k)  # distinct colours: tab10 / tab20, past 20 clusters turbo at golden-ratio steps
    colours = (colormaps["tab10"](ids) if k <= 10 else colormaps["tab20"](ids) if k <= 20
               else colormaps["turbo"]((ids * 0.618034) % 1.0))
    ax.scatter(proj[:, 0], proj[:, 1], c=colours[labels], s=6 if len(labels) > 2000 else 18, alpha=0.8, linewidths=0)
    for c in ids:  # cluster ids at their members' mean position, to match the bar chart
        centre = proj[labels == c].mean(0)
        ax.annotate(str(c), centre, fontsize=7, ha="center", va="center", weight="bold")
    ax.set(xlabel="PC 1", ylabel="PC 2", title=f"{len(labels)} samples, {k} clusters (2-D PCA)")
    sizes = np.bincount(labels, minlength=k)
    mean = np.bincount(labels, weights=difficulty, minlength=k) / np.maximum(sizes, 1)
    norm = Normalize(mean.min(), mean.max() if mean.max() > mean.min() else mean.min() + 1e-9)
    bx.bar(np.arange(k), sizes, color=colormaps["viridis"](norm(mean)))
    fig.colorbar(ScalarMappable(norm=norm, cmap=colormaps["viridis"]), ax=bx, label="mean difficulty (NLL)")
    bx.set(xlabel="cluster id", ylabel="samples", title="cluster sizes")
    fig.suptitle(title, fontsize=10)
    fig.savefig(path)
    return path
