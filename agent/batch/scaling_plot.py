"""The paper's scaling curves as a PNG: execution and call accuracy, and the geometric mean speedup of the passing
problems, per iteration (matplotlib, headless Agg backend)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def plot_scaling(curves: Sequence[dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """Write the plot of `metrics.iteration_curves` to `path`; returns the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [c["iteration"] for c in curves]
    fig, accuracy = plt.subplots(figsize=(7, 4.2), dpi=120)
    accuracy.plot(x, [100 * c["exec_accuracy"] for c in curves], "o-", color="tab:green", label="execution accuracy")
    accuracy.plot(x, [100 * c["call_accuracy"] for c in curves], "s--", color="tab:gray", label="call accuracy")
    accuracy.set_xlabel("iteration (model rounds, then search trials)")
    accuracy.set_ylabel("accuracy (%)")
    accuracy.set_ylim(0, 105)
    accuracy.grid(alpha=0.3)
    speed = accuracy.twinx()
    points = [(c["iteration"], c["speedup_geomean"]) for c in curves if c["speedup_geomean"] is not None]
    if points:
        speed.plot(*zip(*points, strict=True), "^-", color="tab:blue", label="speedup (geomean of passing)")
    speed.set_ylabel("speedup over the golden code (x)")
    lines = accuracy.get_legend_handles_labels()
    more = speed.get_legend_handles_labels()
    accuracy.legend(lines[0] + more[0], lines[1] + more[1], loc="lower right", fontsize=8)
    if title:
        accuracy.set_title(title, fontsize=10)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
