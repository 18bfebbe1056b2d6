"""What every giod plot shares: the style and label, intervals for small counts, ranges, ticks, legends.

The plots follow the mplhep CMS style, but the label names giod, not CMS:
these are not CMS results. Intervals are 68.3 % score intervals (Wilson for
a fraction, its Poisson analogue for a count): closed formulas, exact enough
for small counts, and never outside [0, 1] or below zero.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from giod.errors import needs_extra

__all__ = ["bin_width_text", "dataset_label", "display_bins", "errorbar", "label", "legend", "log_ticks",
           "poisson_interval", "pyplot", "save", "wilson_interval"]

#: The sub-label of plots made from giod's own simulation.
SIMULATION = "Simulation"
#: The program that giod's simulation records on the databases it writes (``giod.physics.chain``).
SIMULATED_BY = "giod.physics.simulate"


def pyplot() -> Any:
    """matplotlib's pyplot on the file-only backend, with the mplhep CMS style applied."""
    try:
        import matplotlib
        import mplhep
    except ImportError as exc:
        raise needs_extra("plots", "plotting", exc) from exc

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.style.use(mplhep.style.CMS)
    return plt


def wilson_interval(k: np.ndarray, n: np.ndarray, z: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of ``k`` successes in ``n`` trials (NaN where ``n`` is 0)."""
    k, n = np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        # none and all give exactly 0 and 1, where the formula only comes within a rounding error
        low = np.where(k == 0, 0.0, np.clip(centre - half, 0.0, 1.0))
        high = np.where((k == n) & (n > 0), 1.0, np.clip(centre + half, 0.0, 1.0))
    return np.where(n > 0, low, np.nan), np.where(n > 0, high, np.nan)


def poisson_interval(n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """68.3 % score interval of a Poisson mean given ``n`` counts: ``n + 1/2 ± sqrt(n + 1/4)``."""
    n = np.asarray(n, dtype=np.float64)
    half = np.sqrt(n + 0.25)
    return np.maximum(n + 0.5 - half, 0.0), n + 0.5 + half


def label(ax: Any, *, simulation: bool = False, com: float | None = None, text: str | None = None) -> None:
    """The experiment label above the axes: "giod", "Simulation" if so, and √s (in TeV) if known."""
    import mplhep

    right = [f"{text}"] if text else []
    if com is not None:
        right.append(f"√s = {com:g} TeV")  # unicode: the style's math font has no radical sign
    mplhep.label.exp_label(exp="giod", llabel=SIMULATION if simulation else "", rlabel=", ".join(right),
                           ax=ax, loc=0, fontsize=16)


def bin_width_text(width: float, unit: str = "GeV") -> str:
    """``"events / 20 GeV"``: the y label of a histogram with bins of ``width``."""
    number = np.format_float_positional(width, precision=4, unique=True, fractional=False, trim="-")
    return f"events / {number} {unit}".rstrip()


def _nice(x: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × 10^k not below ``x``."""
    if x <= 0:
        return 1.0
    scale = 10.0 ** np.floor(np.log10(x))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if m * scale >= x * (1 - 1e-9):
            return float(m * scale)
    return float(10.0 * scale)


def display_bins(counts: np.ndarray, edges: np.ndarray, target: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Counts and edges for drawing: cut to the bins that hold entries (plus one empty bin each side)
    and merged to a round bin width, about ``target`` bins (from the number of entries if not given).

    The x range then follows the data: a few entries at low mass do not sit in a
    corner of a wide fixed axis. Merging only adds whole bins, so no entry moves.
    """
    counts = np.asarray(counts, dtype=np.float64)
    edges = np.asarray(edges, dtype=np.float64)
    filled = np.flatnonzero(counts > 0)
    if len(filled) == 0:
        return counts, edges
    total = counts.sum()
    if target is None:
        target = int(np.clip(2 * np.sqrt(total), 8, 50))
    width = float(edges[1] - edges[0])
    factor = 1
    if np.allclose(np.diff(edges), width):
        span = (filled[-1] + 1 - filled[0]) * width
        factor = max(int(round(_nice(span / target) / width)), 1)
    # one empty merged bin each side, and groups aligned on the first edge so that the edges stay round
    first = max(filled[0] - factor, 0) // factor * factor
    last = min(filled[-1] + 1 + factor, len(counts))
    starts = np.arange(first, last, factor)
    sums = np.add.reduceat(counts[first:last], starts - first)
    merged_edges = np.append(edges[starts], edges[min(starts[-1] + factor, len(counts))])
    if starts[-1] + factor > len(counts) and sums[-1] == 0:  # a narrower, empty bin at the axis's end
        sums, merged_edges = sums[:-1], merged_edges[:-1]
    return sums, merged_edges


def errorbar(ax: Any, edges: np.ndarray, values: np.ndarray, low: np.ndarray | None = None,
             high: np.ndarray | None = None, **kw: Any) -> Any:
    """Points at the bin centres with asymmetric errors ``[low, high]`` (absolute bounds); bins whose
    value is not finite are not drawn."""
    edges = np.asarray(edges, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    centres = 0.5 * (edges[1:] + edges[:-1])
    ok = np.isfinite(values)
    yerr = None
    if low is not None and high is not None:
        ok &= np.isfinite(low) & np.isfinite(high)
        # clipped: an interval end one rounding error inside its value is no negative error
        yerr = np.maximum(np.stack([values[ok] - np.asarray(low)[ok], np.asarray(high)[ok] - values[ok]]), 0.0)
    kw.setdefault("fmt", "o")
    kw.setdefault("markersize", 5)
    return ax.errorbar(centres[ok], values[ok], yerr=yerr, xerr=0.5 * np.diff(edges)[ok], **kw)


def log_ticks(ax: Any, axis: str = "x") -> None:
    """Plain-number labels on a log axis, with enough of them (at least three) to read a value off.

    Call it once the axis's limits are final: the ticks are chosen for them.
    """
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, MaxNLocator, NullFormatter

    target = ax.xaxis if axis == "x" else ax.yaxis
    lo, hi = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
    decades = np.arange(np.floor(np.log10(lo)), np.ceil(np.log10(hi)) + 1)
    for subs in ((1.0,), (1.0, 3.0), (1.0, 2.0, 5.0), tuple(float(k) for k in range(1, 10))):
        ticks = [s * 10.0 ** d for d in decades for s in subs]
        if sum(lo <= t <= hi for t in ticks) >= 3:
            target.set_major_locator(LogLocator(base=10.0, subs=subs, numticks=len(ticks) + 2))
            break
    else:  # less than a factor of two: evenly spaced round numbers
        target.set_major_locator(FixedLocator(MaxNLocator(nbins=4).tick_values(lo, hi)))
    target.set_major_formatter(FuncFormatter(_tick_text))
    target.set_minor_formatter(NullFormatter())


def _tick_text(value: float, _: Any = None) -> str:
    """Plain numbers while they stay short, ``10^k`` beyond."""
    if value <= 0 or 1e-3 <= value < 1e5:
        return f"{value:g}"
    power = np.log10(value)
    return f"$10^{{{power:.0f}}}$" if np.isclose(power, round(power)) else f"{value:.0e}"


def _data_boxes(ax: Any) -> np.ndarray:
    """Display-space boxes (x0, y0, x1, y1) of what is drawn in data coordinates: markers, error bars,
    histogram steps. Reference lines and bands (axhline, axhspan) are not data."""
    from matplotlib.collections import LineCollection
    from matplotlib.patches import Rectangle, StepPatch

    boxes: list[np.ndarray] = []
    to_display = ax.transData.transform
    for line in ax.lines:
        if line.get_transform() != ax.transData or not line.get_visible():
            continue
        xy = np.asarray(line.get_xydata(), dtype=np.float64)
        xy = xy[np.isfinite(xy).all(axis=1)]
        if len(xy) == 0:
            continue
        pts = to_display(xy)
        if line.get_linestyle() in ("None", "none", "", " "):
            r = max(float(line.get_markersize()), 4.0)
            boxes.append(np.column_stack([pts - r, pts + r]))
        else:
            a, b = pts[:-1], pts[1:]
            boxes.append(np.column_stack([np.minimum(a, b), np.maximum(a, b)]))
    for coll in ax.collections:
        if isinstance(coll, LineCollection) and coll.get_transform() == ax.transData:
            for seg in coll.get_segments():
                pts = to_display(np.asarray(seg, dtype=np.float64))
                boxes.append(np.concatenate([pts.min(axis=0), pts.max(axis=0)])[None, :])
    for patch in ax.patches:
        if isinstance(patch, StepPatch):  # a histogram outline: each of its segments
            pts = patch.get_transform().transform(patch.get_path().vertices)
            a, b = pts[:-1], pts[1:]
            boxes.append(np.column_stack([np.minimum(a, b), np.maximum(a, b)]))
        elif isinstance(patch, Rectangle) and patch.get_transform() == ax.transData:
            ext = patch.get_window_extent()
            boxes.append(np.array([[ext.x0, ext.y0, ext.x1, ext.y1]]))
    return np.concatenate(boxes) if boxes else np.zeros((0, 4))


def _overlaps(box: Any, boxes: np.ndarray, pad: float = 2.0) -> int:
    return int(np.count_nonzero((boxes[:, 0] < box.x1 + pad) & (boxes[:, 2] > box.x0 - pad)
                                & (boxes[:, 1] < box.y1 + pad) & (boxes[:, 3] > box.y0 - pad)))


def legend(ax: Any, **kw: Any) -> Any:
    """A legend where it covers no data: the first free corner or edge of the axes, chosen by the
    drawn data; if every place inside is taken, outside on the right of the axes."""
    fig = ax.figure
    kw.setdefault("fontsize", 16)
    kw.setdefault("frameon", False)
    fig.canvas.draw()
    boxes = _data_boxes(ax)
    for loc in ("upper right", "upper left", "lower right", "lower left", "upper center", "lower center",
                "center right", "center left"):
        leg = ax.legend(loc=loc, **kw)
        fig.canvas.draw()
        if _overlaps(leg.get_window_extent(), boxes) == 0:
            return leg
    return ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **kw)


def dataset_label(dataset: Any) -> dict[str, Any]:
    """The label arguments for a dataset: "Simulation" and giod's √s if giod's simulation wrote it;
    nothing claimed for data brought in from elsewhere."""
    if any(db.program == SIMULATED_BY for db in dataset.databases()):
        # imported only here: analysing imported data needs no physics extra (numba, fastjet)
        from giod.physics.generator import BuiltinTune

        return {"simulation": True, "com": BuiltinTune().sqrt_s / 1000.0}
    return {"simulation": False, "com": None}


def save(fig: Any, path: str) -> str:
    """Write the figure as a PNG (nothing cut off: outside legends and labels included) and close it."""
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path
