"""The validation's PNG plots (matplotlib with the mplhep CMS-like style)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from giod.physics.validation import (
    ETA_BINS,
    JET_PT_BINS,
    PT_BINS,
    TARGETS,
    TRACK_ETA_MAX,
    TRACK_PT_MIN,
    binned_medians,
    binned_widths,
)

__all__ = ["write_plots"]


def _binned_rate(x: np.ndarray, flags: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    total, _ = np.histogram(x, edges)
    hit, _ = np.histogram(x[flags], edges)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = hit / total
        err = np.sqrt(np.maximum(rate * (1 - rate), 1.0 / np.maximum(total, 1)) / total)
    return rate, err


def _points(ax: Any, edges: np.ndarray, values: np.ndarray, errors: np.ndarray | None = None, **kw: Any) -> None:
    centres = 0.5 * (edges[1:] + edges[:-1])
    ok = np.isfinite(values)
    ax.errorbar(centres[ok], values[ok], yerr=None if errors is None else errors[ok],
                xerr=0.5 * np.diff(edges)[ok], fmt="o", markersize=4, **kw)


def write_plots(d: dict[str, np.ndarray], summary: dict[str, Any], directory: Path) -> list[str]:
    """Write the validation plots into ``directory``; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import mplhep
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    directory.mkdir(parents=True, exist_ok=True)
    plt.style.use(mplhep.style.CMS)
    paths = []

    def save(fig: Any, name: str) -> None:
        for ax in fig.axes:
            if ax.get_xscale() == "log":  # plain numbers, and no crowded minor labels
                ax.xaxis.set_major_formatter(ScalarFormatter())
                ax.xaxis.set_minor_formatter(NullFormatter())
        path = directory / name
        fig.tight_layout()
        fig.savefig(path, dpi=80)
        plt.close(fig)
        paths.append(str(path))

    central = np.abs(d["mc_eta"]) < TRACK_ETA_MAX
    trk_central = np.abs(d["trk_eta"]) < TRACK_ETA_MAX
    for name, flag_x, flag, title, target, sel_pt, sel_eta in (
        ("tracking_efficiency.png", ("mc_pt", "mc_eta"), d["mc_found"], "tracking efficiency",
         TARGETS["tracking_efficiency"], central, d["mc_pt"] > TRACK_PT_MIN),
        ("tracking_fake_rate.png", ("trk_pt", "trk_eta"), d["trk_fake"], "fake rate",
         TARGETS["fake_rate"], trk_central, d["trk_pt"] > TRACK_PT_MIN),
    ):
        fig, (left, right) = plt.subplots(1, 2, figsize=(14, 6))
        rate, err = _binned_rate(d[flag_x[0]][sel_pt], flag[sel_pt], PT_BINS)
        _points(left, PT_BINS, rate, err, label=f"|η| < {TRACK_ETA_MAX}")
        left.set_xscale("log")
        left.set_xlabel(r"$p_T$ [GeV]")
        rate, err = _binned_rate(d[flag_x[1]][sel_eta], flag[sel_eta], ETA_BINS)
        _points(right, ETA_BINS, rate, err, label=f"$p_T$ > {TRACK_PT_MIN:g} GeV")
        right.set_xlabel(r"$\eta$")
        for ax in (left, right):
            ax.axhline(target, color="red", linestyle="--", label="target")
            ax.set_ylabel(title)
            ax.legend(fontsize=12)
        if "efficiency" in name:
            left.set_ylim(0.8, 1.02)
            right.set_ylim(0.8, 1.02)
        else:
            left.set_ylim(0, 0.1)
            right.set_ylim(0, 0.1)
        save(fig, name)

    fig, ax = plt.subplots(figsize=(8, 6))
    _points(ax, PT_BINS, binned_widths(d["res_true_pt"], d["res_delta"], PT_BINS))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(r"particle $p_T$ [GeV]")
    ax.set_ylabel(r"$\sigma(\Delta p_T / p_T)$")
    save(fig, "track_pt_resolution.png")

    fig, ax = plt.subplots(figsize=(8, 6))
    _points(ax, JET_PT_BINS, binned_medians(d["jet_true_pt"], d["jet_response"], JET_PT_BINS),
            label="median, |η| < 2.5")
    tol = TARGETS["jet_response_tolerance"]
    ax.axhspan(1 - tol, 1 + tol, color="green", alpha=0.15, label=f"±{tol:.0%}")
    ax.axhline(1.0, color="black", linewidth=1)
    ax.set_xscale("log")
    ax.set_ylim(0.6, 1.4)
    ax.set_xlabel(r"particle-jet $p_T$ [GeV]")
    ax.set_ylabel(r"$p_T^{reco} / p_T^{particle}$")
    ax.legend(fontsize=12)
    save(fig, "jet_response.png")

    fig, ax = plt.subplots(figsize=(8, 6))
    reco, true = d["mjj_reco"], d["mjj_true"]
    finite = np.concatenate([reco[np.isfinite(reco)], true[np.isfinite(true)]])
    top = float(np.percentile(finite, 99)) * 1.1 if len(finite) else 1.0
    edges = np.linspace(0.0, max(top, 1.0), 41)
    ax.hist(true[np.isfinite(true)], edges.tolist(), histtype="step", linewidth=2, label="particle jets")
    ax.hist(reco[np.isfinite(reco)], edges.tolist(), histtype="step", linewidth=2, label="reconstructed jets")
    ax.set_xlabel(r"$m_{jj}$ [GeV]")
    ax.set_ylabel("events / bin")
    ax.legend(fontsize=12)
    save(fig, "dijet_mass.png")
    return paths
