"""`giod validate`'s plots read at a glance: no error bar from an empty or nearly empty bin across the
whole axis, empty bins not drawn, several labelled ticks on log axes, legends that cover no point and
are as legible as the ticks, the bin width on histograms, the giod "Simulation" label with √s."""

from __future__ import annotations

import awkward as ak
import numpy as np
import pytest

from giod.physics.validation import ETA_BINS, PT_BINS, TRACK_ETA_MAX, TRACK_PT_MIN, validate
from giod.physics.validation_plots import MIN_ENTRIES
from tests.analysis.figures import capture, labelled_ticks, legend_overlaps, markers, texts, vertical_segments

pytestmark = pytest.mark.slow  # the module's figures are a validation pass
RATE_PLOTS = ("tracking_efficiency.png", "tracking_fake_rate.png")
CMS_PLOTS = ("tracking_efficiency.png", "track_pt_resolution.png", "track_d0_resolution.png", "jet_resolution.png")


@pytest.fixture(scope="module")
def reconstructed(simulated: ak.Array) -> ak.Array:
    from giod.physics.layout import with_fields
    from giod.physics.reconstruct import reconstruct

    reco = reconstruct(simulated)
    return with_fields(simulated, {c: reco[c] for c in ("tracks", "clusters", "jets")})


@pytest.fixture(scope="module")
def figures(reconstructed: ak.Array, tmp_path_factory: pytest.TempPathFactory) -> dict:
    with pytest.MonkeyPatch.context() as mp:
        saved = capture(mp)
        validate(reconstructed, tmp_path_factory.mktemp("validation"))
    assert {*RATE_PLOTS, *CMS_PLOTS, "jet_response.png", "dijet_mass.png"} <= set(saved)
    return saved


def test_rate_plots_have_no_error_bar_across_the_axis(figures: dict) -> None:
    for name in RATE_PLOTS:
        for ax in figures[name].axes:
            lo, hi = ax.get_ylim()
            seg = vertical_segments(ax)
            assert len(markers(ax)), name
            assert np.all(seg[:, 1] >= lo) and np.all(seg[:, 2] <= hi), f"{name}: an error bar leaves the axes"
            # measured as drawn (log or linear): no bar covers more than half of the axis's height
            to_axes = ax.transScale + ax.transLimits
            ends = to_axes.transform(np.column_stack([seg[:, 0], seg[:, 1]]))[:, 1], \
                to_axes.transform(np.column_stack([seg[:, 0], seg[:, 2]]))[:, 1]
            frac = ends[1] - ends[0]
            assert np.all(frac < 0.75), f"{name}: an error bar spans {frac.max():.0%} of the y axis"


def test_rate_plots_draw_no_point_for_an_empty_or_nearly_empty_bin(figures: dict, reconstructed: ak.Array) -> None:
    pt = np.asarray(ak.flatten(reconstructed.tracks.pt), dtype=float)
    eta = np.asarray(ak.flatten(reconstructed.tracks.eta), dtype=float)
    # the fake-rate plot's tracks, binned as the plot bins them
    by_pt, _ = np.histogram(pt[np.abs(eta) < TRACK_ETA_MAX], PT_BINS)
    by_eta, _ = np.histogram(eta[pt > TRACK_PT_MIN], ETA_BINS)
    left, right = figures["tracking_fake_rate.png"].axes
    for ax, counts, edges in ((left, by_pt, PT_BINS), (right, by_eta, ETA_BINS)):
        x = markers(ax)[:, 0]
        which = np.searchsorted(edges, x, side="right") - 1
        assert np.all(counts[which] >= MIN_ENTRIES), "a point drawn for an empty or nearly empty bin"
        assert len(np.unique(which)) == np.count_nonzero(counts >= MIN_ENTRIES), "a bin with tracks has no point"


def test_log_axes_have_several_labelled_ticks(figures: dict) -> None:
    seen = 0
    for name, fig in figures.items():
        for ax in fig.axes:
            for axis, scale in ((ax.xaxis, ax.get_xscale()), (ax.yaxis, ax.get_yscale())):
                if scale == "log":
                    seen += 1
                    shown = labelled_ticks(axis)
                    assert len(shown) >= 3, f"{name}: log {axis.axis_name} axis labelled only {shown}"
    assert seen >= 4


def test_legends_cover_no_point_and_read_like_the_ticks(figures: dict) -> None:
    for name, fig in figures.items():
        for ax in fig.axes:
            legend = ax.get_legend()
            assert legend is not None, name
            assert legend_overlaps(ax) == 0, f"{name}: the legend covers data"
            tick = ax.xaxis.get_ticklabels()[0].get_fontsize()
            assert min(t.get_fontsize() for t in legend.get_texts()) >= 0.6 * tick, f"{name}: tiny legend"


def test_every_plot_has_units_label_and_bin_width(figures: dict) -> None:
    for name, fig in figures.items():
        words = texts(fig)
        assert "giod" in words and "Simulation" in words and "√s = 13.6 TeV" in words, name
        for ax in fig.axes:
            assert ax.get_xlabel() and ax.get_ylabel(), name
            if "p_T" in ax.get_xlabel() or "m_{jj}" in ax.get_xlabel():
                assert "[GeV]" in ax.get_xlabel(), name
    (ax,) = figures["dijet_mass.png"].axes
    assert ax.get_ylabel().startswith("events / ") and ax.get_ylabel().endswith(" GeV")


def test_cms_reference_figures_are_drawn_beside_giods(figures: dict) -> None:
    for name in CMS_PLOTS:
        labels = [t.get_text() for ax in figures[name].axes if ax.get_legend() for t in ax.get_legend().get_texts()]
        assert any("CMS, JINST" in label for label in labels), f"{name}: no CMS reference in {labels}"
        assert any(label.startswith("giod") or "GeV" in label for label in labels), name
