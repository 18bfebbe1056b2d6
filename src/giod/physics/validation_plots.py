"""The validation's PNG plots (matplotlib, mplhep's CMS style, the shared helpers of
:mod:`giod.analysis.plots`): rates in percent with Wilson intervals, widths and medians with their
statistical errors, log axes with several labelled ticks, legends where they cover no point."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from giod.physics.binning import (
    BARREL_ETA_MAX,
    ETA_BINS,
    ETA_PLOT_PT,
    JET_ETA_MAX,
    JET_PT_BINS,
    PT_BINS,
    TARGETS,
    TRACK_ETA_MAX,
    TRACK_PT_MIN,
    binned_medians,
    binned_widths,
)
from giod.physics.reference import citation, cms_reference

__all__ = ["MIN_ENTRIES", "figures", "write_plots"]

#: Fewest entries for a bin of a rate plot to be drawn (as for the binned medians and widths).
MIN_ENTRIES = 10


def _counts(x: np.ndarray, flags: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per bin of ``x``: how many objects are flagged, and how many there are."""
    total, _ = np.histogram(x, edges)
    passed, _ = np.histogram(x[flags], edges)
    return passed, total


def _rate_axes(ax: Any, edges: np.ndarray, passed: np.ndarray, total: np.ndarray, target: float,
               ylabel: str, point_label: str, fake: bool, reference: tuple[float, ...] = ()) -> None:
    """One rate plot: Wilson intervals, the target, a range that shows both. A bin with fewer than
    :data:`MIN_ENTRIES` entries is not drawn: its interval would only be a bar across the axis.

    A fake rate is drawn on a log axis: it spans decades, and a bin without a fake is an upper
    limit (a downward triangle at the interval's upper end), not a point at zero.
    """
    from giod.analysis import plots

    low, high = (100 * end for end in plots.wilson_interval(passed, total))  # in percent
    rate = np.where(total > 0, 100 * passed / np.maximum(total, 1), np.nan)
    target = 100 * target
    drawn = total >= MIN_ENTRIES
    if fake:
        zero = drawn & (passed == 0)
        if (drawn & ~zero).any():
            plots.errorbar(ax, edges, np.where(drawn & ~zero, rate, np.nan), low, high, label=point_label)
        if zero.any():
            plots.errorbar(ax, edges, np.where(zero, high, np.nan), fmt="v", color="C0",
                           label=f"{point_label}, no fake: upper end of the 68 % interval")
        ax.set_yscale("log")
        floor = np.concatenate([low[drawn & ~zero], high[zero]])
        floor = floor[floor > 0]
        lo = float(floor.min()) / 3 if len(floor) else target / 100
        hi = max(float(np.nanmax(high[drawn], initial=0.0)), target)
        ax.set_ylim(lo, min(hi * 30, 100.0))  # room above the points and the target for the legend
    else:
        plots.errorbar(ax, edges, np.where(drawn, rate, np.nan), low, high, label=point_label)
        lo = min(float(np.nanmin(low[drawn], initial=100.0)), target, *(100 * r for r in reference))
        ax.set_ylim(max(lo - 0.35 * (100 - lo), 0.0), 100 + 0.1 * (100 - lo))
    ax.axhline(target, color="red", linestyle="--", label=f"target {target:g} %")
    ax.set_ylabel(f"{ylabel} [%]")


def figures(d: dict[str, np.ndarray], summary: dict[str, Any]) -> dict[str, Any]:
    """The validation plots as matplotlib figures, by file name."""
    from giod.analysis import plots
    from giod.physics.generator import BuiltinTune

    plt = plots.pyplot()
    out: dict[str, Any] = {}
    com = BuiltinTune().sqrt_s / 1000.0

    def done(fig: Any, name: str) -> None:
        for ax in fig.axes:  # ticks first: they set the label widths, and so the layout
            for axis in ("x", "y"):
                if (ax.get_xscale() if axis == "x" else ax.get_yscale()) == "log":
                    plots.log_ticks(ax, axis)
        fig.tight_layout()
        for ax in fig.axes:
            plots.label(ax, simulation=True, com=com)
            if ax.get_legend_handles_labels()[0]:
                plots.legend(ax)
        out[name] = fig

    central = np.abs(d["mc_eta"]) < TRACK_ETA_MAX
    trk_central = np.abs(d["trk_eta"]) < TRACK_ETA_MAX
    for name, flag_x, flag, title, target, sel_pt, sel_eta in (
        ("tracking_efficiency.png", ("mc_pt", "mc_eta"), d["mc_found"], "tracking efficiency",
         TARGETS["tracking_efficiency"], central, d["mc_pt"] > TRACK_PT_MIN),
        ("tracking_fake_rate.png", ("trk_pt", "trk_eta"), d["trk_fake"], "fake rate",
         TARGETS["fake_rate"], trk_central, d["trk_pt"] > TRACK_PT_MIN),
    ):
        fig, (left, right) = plt.subplots(1, 2, figsize=(15, 6.5))
        fake = "fake" in name
        _rate_axes(left, PT_BINS, *_counts(d[flag_x[0]][sel_pt], flag[sel_pt], PT_BINS), target, title,
                   f"|η| < {TRACK_ETA_MAX:g}", fake)
        left.set_xscale("log")
        left.set_xlabel(r"$p_T$ [GeV]")
        _rate_axes(right, ETA_BINS, *_counts(d[flag_x[1]][sel_eta], flag[sel_eta], ETA_BINS), target, title,
                   f"$p_T$ > {TRACK_PT_MIN:g} GeV", fake,
                   () if fake else tuple(e["value"] for e in cms_reference()["tracking"]["efficiency"]))
        if not fake:
            _cms_efficiency(right)
        right.set_xlabel(r"$\eta$")
        done(fig, name)

    fig, (left, right) = plt.subplots(1, 2, figsize=(15, 6.5))
    barrel = np.abs(d["res_true_eta"]) < BARREL_ETA_MAX
    for sel, label, colour in ((np.ones(len(barrel), dtype=bool), f"giod, |η| < {TRACK_ETA_MAX:g}", "C0"),
                               (barrel, f"giod, |η| < {BARREL_ETA_MAX:g}", "C1")):
        _width_points(left, PT_BINS, d["res_true_pt"][sel], d["res_delta"][sel], 100.0, label, colour)
    _cms_points(left, cms_reference()["tracking"]["pt_resolution"], 100.0)
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel(r"particle $p_T$ [GeV]")
    left.set_ylabel(r"$\sigma(p_T) / p_T$ [%]  (half the 16–84 % width)")
    mid = (d["res_true_pt"] > ETA_PLOT_PT[0]) & (d["res_true_pt"] < ETA_PLOT_PT[1])
    _width_points(right, ETA_BINS, d["res_true_eta"][mid], d["res_delta"][mid], 100.0,
                  f"giod, {ETA_PLOT_PT[0]:g} < $p_T$ < {ETA_PLOT_PT[1]:g} GeV", "C0")
    right.set_xlabel(r"particle $\eta$")
    right.set_ylabel(r"$\sigma(p_T) / p_T$ [%]")
    right.set_ylim(0, 1.6 * np.nanmax(100 * binned_widths(d["res_true_eta"][mid], d["res_delta"][mid], ETA_BINS),
                                      initial=1.0))
    done(fig, "track_pt_resolution.png")

    fig, ax = plt.subplots(figsize=(8, 6.5))
    _width_points(ax, PT_BINS, d["res_true_pt"][barrel], d["res_d0"][barrel], 1e4,
                  f"giod, |η| < {BARREL_ETA_MAX:g}", "C1")
    _cms_points(ax, cms_reference()["tracking"]["d0_resolution"], 1e4)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(r"particle $p_T$ [GeV]")
    ax.set_ylabel(r"$\sigma(d_0)$ [µm]")
    done(fig, "track_d0_resolution.png")

    fig, ax = plt.subplots(figsize=(8, 6.5))
    response = binned_medians(d["jet_true_pt"], d["jet_response"], JET_PT_BINS)
    spread = binned_widths(d["jet_true_pt"], d["jet_response"], JET_PT_BINS)
    n, _ = np.histogram(d["jet_true_pt"], JET_PT_BINS)
    err = 1.2533 * spread / np.sqrt(np.maximum(n, 1))  # a median's statistical error
    plots.errorbar(ax, JET_PT_BINS, response, response - err, response + err, label=f"median, |η| < {JET_ETA_MAX:g}")
    tol = TARGETS["jet_response_tolerance"]
    ax.axhspan(1 - tol, 1 + tol, color="green", alpha=0.15, label=f"target ±{tol:.0%} above "
               f"{TARGETS['jet_response_min_pt']:g} GeV")
    cms_scale = cms_reference()["jets"]["response"][0]
    ax.axhspan(1 - cms_scale["uncertainty"], 1 + cms_scale["uncertainty"], color="grey", alpha=0.25,
               label=f"{citation(cms_scale['source'])}: 1 ± {cms_scale['uncertainty']:.0%} (scale uncertainty)")
    ax.axhline(1.0, color="black", linewidth=1)
    ax.set_xscale("log")
    shown = np.isfinite(response)  # a wider range only when a point would fall outside the usual one
    ax.set_ylim(min(0.6, float(np.min(response[shown] - err[shown], initial=1.0)) - 0.05),
                max(1.4, float(np.max(response[shown] + err[shown], initial=1.0)) + 0.15))
    ax.set_xlabel(r"particle-jet $p_T$ [GeV]")
    ax.set_ylabel(r"$p_T^{reco} / p_T^{particle}$")
    done(fig, "jet_response.png")

    fig, ax = plt.subplots(figsize=(8, 6.5))
    _width_points(ax, JET_PT_BINS, d["jet_true_pt"], d["jet_response"], 100.0,
                  f"giod calorimeter jets, |η| < {JET_ETA_MAX:g}", "C0", relative=True)
    _cms_points(ax, cms_reference()["jets"]["pt_resolution"], 100.0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(r"particle-jet $p_T$ [GeV]")
    ax.set_ylabel(r"$\sigma(p_T^{reco} / p_T^{particle})$ / median [%]")
    done(fig, "jet_resolution.png")

    fig, ax = plt.subplots(figsize=(8, 6.5))
    reco, true = d["mjj_reco"][np.isfinite(d["mjj_reco"])], d["mjj_true"][np.isfinite(d["mjj_true"])]
    top = float(np.max(np.concatenate([reco, true]), initial=1.0))
    fine = np.arange(0.0, 1.2 * top + 50.0, 5.0)  # room for the empty bin that closes the range
    counts, edges = plots.display_bins(np.histogram(np.concatenate([reco, true]), fine)[0], fine)
    true_n, _ = np.histogram(true, edges)
    reco_n, _ = np.histogram(reco, edges)
    ax.stairs(true_n, edges, color="tab:orange", linewidth=2, label="particle jets")
    low, high = plots.poisson_interval(reco_n)
    plots.errorbar(ax, edges, np.where(reco_n > 0, reco_n, np.nan), low, high, color="black",
                   label="reconstructed jets")
    ax.set_xlim(edges[0], edges[-1])
    ax.set_ylim(0, 1.35 * max(float(high[reco_n > 0].max(initial=1.0)), float(true_n.max(initial=1))))
    ax.set_xlabel(r"$m_{jj}$ [GeV]")
    ax.set_ylabel(plots.bin_width_text(float(edges[1] - edges[0])))
    done(fig, "dijet_mass.png")
    return out


def _width_points(ax: Any, edges: np.ndarray, x: np.ndarray, y: np.ndarray, scale: float, label: str,
                  colour: str, relative: bool = False) -> None:
    """Half the 16-84 % width of ``y`` in bins of ``x`` (times ``scale``; over the median if
    ``relative``), with the statistical error of a Gaussian width."""
    from giod.analysis import plots

    width = scale * binned_widths(x, y, edges)
    if relative:
        width = width / binned_medians(x, y, edges)
    n, _ = np.histogram(x, edges)
    err = width / np.sqrt(2.0 * np.maximum(n - 1, 1))
    plots.errorbar(ax, edges, width, width - err, width + err, color=colour, label=label)


def _cms_points(ax: Any, entries: list[dict[str, Any]], scale: float) -> None:
    """The CMS reference figures as open squares across their pT range, one marker style per kind
    of particle; figure readings carry a 20 % bar."""
    kinds = list(dict.fromkeys(e["particles"] for e in entries))
    for k, (particles, marker) in enumerate(zip(kinds, ("s", "D", "^"), strict=False)):
        sel = [e for e in entries if e["particles"] == particles]
        lo, hi = np.array([e["pt_min"] for e in sel]), np.array([e["pt_max"] for e in sel])
        x = np.sqrt(lo * hi)
        value = scale * np.array([e["value"] for e in sel])
        err = np.where([e["kind"] == "figure" for e in sel], 0.2 * value, 0.0)
        ranges = ", ".join(sorted({f"{e['eta_max']:g}" for e in sel}))
        ax.errorbar(x, value, xerr=[x - lo, hi - x], yerr=err, fmt=marker, markersize=8, markerfacecolor="none",
                    color="red" if k == 0 else "darkred", capsize=3,
                    label=f"{citation(sel[0]['source'])},\n{particles} (|η| < {ranges})")


def _cms_efficiency(ax: Any) -> None:
    """CMS's ttbar tracking efficiency per |eta| range as open squares spanning the range."""
    entries = cms_reference()["tracking"]["efficiency"]
    xs, values, half = [], [], []
    for e in entries:
        for sign in (1.0, -1.0):
            if e["eta_min"] == 0 and sign < 0:
                continue
            lo, hi = (e["eta_min"], e["eta_max"]) if sign > 0 else (-e["eta_max"], -e["eta_min"])
            if e["eta_min"] == 0:
                lo = -e["eta_max"]
            xs.append(0.5 * (lo + hi))
            half.append(0.5 * (hi - lo))
            values.append(100 * e["value"])
    ax.errorbar(xs, values, xerr=half, fmt="s", markersize=8, markerfacecolor="none", color="red",
                label=f"{citation(entries[0]['source'])}:\n$t\\bar{{t}}$, 2011 pile-up, $p_T$ > 0.9 GeV")


def write_plots(d: dict[str, np.ndarray], summary: dict[str, Any], directory: Path) -> list[str]:
    """Write the validation plots into ``directory``; returns their paths."""
    from giod.analysis import plots

    directory.mkdir(parents=True, exist_ok=True)
    return [plots.save(fig, str(directory / name)) for name, fig in figures(d, summary).items()]
