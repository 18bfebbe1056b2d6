"""Looking at a saved figure as a reader does: what is drawn where, measured in the rendered image."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest


def capture(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Record every figure saved from now on, by the file name it was saved to."""
    from pathlib import Path

    from matplotlib.figure import Figure

    saved: dict[str, Any] = {}
    original = Figure.savefig

    def savefig(self: Figure, fname: Any, *args: Any, **kwargs: Any) -> Any:
        saved[Path(str(fname)).name] = self
        return original(self, fname, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return saved


def errorbars(ax: Any) -> list[Any]:
    from matplotlib.container import ErrorbarContainer

    return [c for c in ax.containers if isinstance(c, ErrorbarContainer)]


def markers(ax: Any) -> np.ndarray:
    """The data coordinates of every point drawn with error bars."""
    xy = [np.asarray(c.lines[0].get_xydata(), dtype=float) for c in errorbars(ax)]
    return np.concatenate(xy) if xy else np.zeros((0, 2))


def vertical_segments(ax: Any) -> np.ndarray:
    """(x, y_low, y_high) in data coordinates of every vertical error bar."""
    out = []
    for c in errorbars(ax):
        for coll in c.lines[2]:
            for seg in coll.get_segments():
                seg = np.asarray(seg, dtype=float)
                if len(seg) == 2 and seg[0, 0] == seg[1, 0]:
                    out.append((seg[0, 0], min(seg[:, 1]), max(seg[:, 1])))
    return np.array(out).reshape(-1, 3)


def data_boxes(ax: Any) -> np.ndarray:
    """Display boxes (x0, y0, x1, y1) of the drawn points and all their error bar segments."""
    fig = ax.figure
    fig.canvas.draw()
    boxes = []
    for c in errorbars(ax):
        pts = ax.transData.transform(np.asarray(c.lines[0].get_xydata(), dtype=float))
        r = c.lines[0].get_markersize()
        boxes += [(x - r, y - r, x + r, y + r) for x, y in pts]
        for coll in c.lines[2]:
            for seg in coll.get_segments():
                s = ax.transData.transform(np.asarray(seg, dtype=float))
                boxes.append((*s.min(axis=0), *s.max(axis=0)))
    return np.array(boxes).reshape(-1, 4)


def legend_overlaps(ax: Any) -> int:
    """How many drawn points or error bars the legend's box covers."""
    legend = ax.get_legend()
    if legend is None:
        return 0
    ax.figure.canvas.draw()
    box = legend.get_window_extent()
    b = data_boxes(ax)
    return int(np.count_nonzero((b[:, 0] < box.x1) & (b[:, 2] > box.x0) & (b[:, 1] < box.y1) & (b[:, 3] > box.y0)))


def labelled_ticks(axis: Any) -> list[str]:
    """The texts of the major tick labels that are shown inside the axis's limits."""
    axis.figure.canvas.draw()
    lo, hi = sorted(axis.get_view_interval())
    return [t.get_text() for t in axis.get_ticklabels()
            if t.get_text() and lo <= t.get_position()[0 if axis.axis_name == "x" else 1] <= hi]


def texts(fig: Any) -> str:
    """Every piece of text on the figure, joined."""
    from matplotlib.text import Text

    return " ".join(t.get_text() for t in fig.findobj(Text))
