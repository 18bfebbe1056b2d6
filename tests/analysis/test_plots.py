"""The di-jet plot reads at a glance: range and bin width from the data, error bars, no empty bins,
a legend that covers no point; and the intervals the plots draw."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import giod
from giod.analysis import dijet
from giod.cli import main
from tests.analysis.figures import capture, errorbars, legend_overlaps, markers, texts, vertical_segments

NANO = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "nanoAOD_2015_CMS_Open_Data_ttbar.root"


def _bin_width(ylabel: str) -> float:
    found = re.fullmatch(r"events / ([\d.]+) GeV", ylabel)
    assert found, f"no bin width in the y label {ylabel!r}"
    return float(found.group(1))


def check_histogram_plot(ax, masses: np.ndarray) -> None:
    """What a reader of a mass histogram relies on, measured on the drawn axes."""
    lo, hi = ax.get_xlim()
    assert lo <= masses.min() and masses.max() <= hi, "an entry lies outside the x range"
    width = _bin_width(ax.get_ylabel())
    # the range follows the data: at most the data's span plus a bin each side, rounded out to a bin
    assert hi - lo <= masses.max() - masses.min() + 4 * width, (lo, hi, masses.min(), masses.max())
    points = markers(ax)
    assert len(points) and errorbars(ax), "no points with error bars"
    assert np.all(points[:, 1] > 0), "an empty bin is drawn"
    assert points[:, 1].sum() == len(masses), "the drawn points do not add up to the entries"
    # each point is its bin's count at its bin's centre, bins of the width the y label says
    edges = lo + width * np.arange(int(round((hi - lo) / width)) + 1)
    counts, _ = np.histogram(masses, edges)
    centres = 0.5 * (edges[1:] + edges[:-1])
    assert np.allclose(points[:, 0], centres[counts > 0]) and np.array_equal(points[:, 1], counts[counts > 0])
    seg = vertical_segments(ax)
    assert len(seg) == len(points) and np.all(seg[:, 1] < seg[:, 2]), "a point without its error bar"
    assert np.all(seg[:, 1] >= 0) and np.all(seg[:, 2] <= ax.get_ylim()[1]), "an error bar leaves the axes"
    assert legend_overlaps(ax) == 0, "the legend covers data"


@pytest.mark.rootdata
def test_dijet_plot_of_the_ttbar_open_data_follows_its_18_entries(tmp_path: Path, monkeypatch) -> None:
    if not NANO.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"CMS open-data file missing: {NANO} (CI=true)")
        pytest.skip(f"CMS open-data file not found at {NANO}")
    fed = str(tmp_path / "fed")
    r = CliRunner().invoke(main, ["import", str(NANO), "--create", "-f", fed, "--dataset", "ttbar"])
    assert r.exit_code == 0, r.output
    saved = capture(monkeypatch)
    png = tmp_path / "dijet.png"
    r = CliRunner().invoke(main, ["analyze", "dijet", "ttbar", "-o", str(png), "-f", fed])
    assert r.exit_code == 0, r.output
    with giod.open(fed) as f:
        masses = dijet.dijet_masses(f.dataset("ttbar").read(["Jet"]).Jet)
    assert len(masses) == 18
    (ax,) = saved["dijet.png"].axes
    check_histogram_plot(ax, masses)
    # imported data: the label names giod, and claims neither simulation nor an energy
    words = texts(saved["dijet.png"])
    assert "giod" in words and "Simulation" not in words and "TeV" not in words


def test_dijet_plot_of_simulated_masses_says_simulation_and_energy(tmp_path: Path, monkeypatch) -> None:
    rng = np.random.default_rng(5)
    masses = np.concatenate([rng.normal(140, 30, 300), rng.exponential(150, 40) + 200])
    masses = masses[(masses > 0) & (masses < 1000)]
    h = dijet.mass_histogram(200, 0, 1000)
    h.fill(mjj=masses)
    saved = capture(monkeypatch)
    dijet.plot(h, str(tmp_path / "m.png"), label="reconstructed jets", simulation=True, com=13.6)
    (ax,) = saved["m.png"].axes
    check_histogram_plot(ax, masses)
    assert "Simulation" in texts(ax.figure) and "√s = 13.6 TeV" in texts(ax.figure)


def test_the_label_knows_the_program_of_giods_simulation() -> None:
    from giod.analysis import plots
    from giod.physics.chain import SIMULATE_PROGRAM

    assert plots.SIMULATED_BY == SIMULATE_PROGRAM


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=400), st.integers(0, 3))
def test_display_bins_keep_every_entry_in_round_bins(counts: list[int], offset: int) -> None:
    from giod.analysis import plots

    counts_a = np.array(counts, dtype=float)
    edges = 5.0 * np.arange(len(counts) + 1) + 5.0 * offset
    merged, merged_edges = plots.display_bins(counts_a, edges)
    assert merged.sum() == counts_a.sum()
    assert len(merged_edges) == len(merged) + 1
    if counts_a.sum():
        width = np.diff(merged_edges)
        assert np.allclose(width[:-1], width[0]) and width[-1] <= width[0] + 1e-9
        assert set(np.round(merged_edges, 6)) <= set(np.round(edges, 6))  # whole fine bins only
        first, last = np.flatnonzero(counts_a)[[0, -1]]
        assert merged_edges[0] <= edges[first] and merged_edges[-1] >= edges[last + 1]
        # the range is the data's, give or take one merged bin each side and the alignment
        assert merged_edges[-1] - merged_edges[0] <= edges[last + 1] - edges[first] + 3 * width[0] + 1e-9


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 10_000))
def test_wilson_interval_holds_the_rate_inside_zero_one(a: int, b: int) -> None:
    from giod.analysis import plots

    k, n = min(a, b), max(a, b)
    lo, hi = plots.wilson_interval(np.array([k]), np.array([n]))
    if n == 0:
        assert np.isnan(lo[0]) and np.isnan(hi[0])  # no entries: nothing to draw
        return
    p = k / n
    assert 0.0 <= lo[0] <= p + 1e-12 and p - 1e-12 <= hi[0] <= 1.0
    assert lo[0] < hi[0]
    if k == 0:
        assert lo[0] == 0 and hi[0] == pytest.approx(1 / (n + 1))  # z = 1: the 68 % upper end


@given(st.integers(0, 100_000))
def test_poisson_interval_is_the_score_interval(n: int) -> None:
    from giod.analysis import plots

    lo, hi = plots.poisson_interval(np.array([n]))
    assert 0 <= lo[0] <= n <= hi[0]
    for end in (lo[0], hi[0]):
        if end > 0:  # (n - mu)^2 / mu = 1 at both ends
            assert (n - end) ** 2 / end == pytest.approx(1.0, rel=1e-6)


@pytest.mark.parametrize("corner", [(1, 1), (0, 1), (1, 0), (0, 0)])
def test_legend_moves_away_from_points_in_its_corner(corner: tuple[int, int]) -> None:
    """Points crowd one corner of the axes (and a line crosses the middle): the legend goes elsewhere."""
    from giod.analysis import plots

    plt = plots.pyplot()
    fig, ax = plt.subplots(figsize=(8, 6))
    rng = np.random.default_rng(sum(corner))
    x = corner[0] * 0.7 + rng.uniform(0.0, 0.3, 40)
    y = corner[1] * 0.7 + rng.uniform(0.0, 0.3, 40)
    ax.errorbar(x, y, yerr=0.02, fmt="o", label="points in one corner")
    ax.errorbar([0.5], [0.5], yerr=0.05, xerr=0.5, fmt="s", label="a bar across the middle")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    plots.legend(ax)
    assert legend_overlaps(ax) == 0
    plt.close(fig)


def test_legend_goes_outside_when_points_fill_the_axes() -> None:
    from giod.analysis import plots

    plt = plots.pyplot()
    fig, ax = plt.subplots(figsize=(8, 6))
    grid = np.linspace(0.02, 0.98, 12)
    x, y = np.meshgrid(grid, grid)
    ax.errorbar(x.ravel(), y.ravel(), yerr=0.03, fmt="o", label="points everywhere")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    legend = plots.legend(ax)
    assert legend_overlaps(ax) == 0
    fig.canvas.draw()
    assert legend.get_window_extent().x0 >= ax.get_window_extent().x1  # right of the axes
    plt.close(fig)
