"""Validation of the reconstruction against the generator truth.

``validate(dataset_or_events, output_dir)`` measures, on simulated events:

* **tracking efficiency**: the share of charged final-state particles
  (``pt > 1 GeV``, ``|eta| < 2.4`` for the headline number) that some track
  matches; a track matches the particle that made at least 75 % of its hits
  (truth matching by hits, through ``TrackerHit.particle``);
* **fake rate**: the share of tracks (same pT and eta cuts) that match no
  particle; **duplicate rate**: matched tracks beyond the first per particle;
* **track pT resolution**: half the 16-84 % width of ``(pt_reco - pt_true) / pt_true``, in bins
  of pT and (for 1 < pT < 10 GeV) of eta; **impact-parameter resolution**: the same width of
  ``d0_reco - d0_true`` (``d0_true`` of the particle's helix at its vertex, ``x sin phi - y cos phi``);
* **comparison with CMS**: each figure of :mod:`giod.physics.reference` beside giod's value
  measured the same way (same pT window and eta range), with the ratio and whether it is within
  the issue's factor of 1.5;
* **jet response**: median ``reco pt / particle-jet pt`` of reconstructed jets
  matched (dR < 0.2) to particle jets (anti-kt R = 0.4 on the final-state
  particles except neutrinos) with ``|eta| < 2.5``, in bins of particle-jet pT;
  **jet resolution**: half the 16-84 % width of that ratio over its median;
* **di-jet mass**: the mass of the two leading jets, reconstructed and truth,
  in events where both pass the di-jet analysis's pT and |eta| cuts.

It returns a dict of numbers (with the issue's targets checked) and, given a
directory, writes PNG plots there (:mod:`giod.physics.validation_plots`); the cuts,
bins and binned statistics both share are in :mod:`giod.physics.binning`.
A dataset is read database by database, only the columns needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np

from giod.errors import DataError
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
from giod.physics.calibration import match_jets, truth_jets
from giod.physics.reference import RESOLUTION_FACTOR, citation, cms_reference

__all__ = ["TARGETS", "report_rows", "validate"]

MATCH_FRACTION = 0.75
#: Fewest objects for a comparison with a reference figure.
REFERENCE_MIN_ENTRIES = 20
DIJET_CUTS = (30.0, 2.5)  # jet pt and |eta| of the two leading jets, as in the di-jet analysis
_COLUMNS = ["mcparticles", "tracker_hits.particle", "tracks", "jets"]


def validate(source: Any, output_dir: str | Path | None = None, *, max_events: int | None = None,
             step_size: int = 5000) -> dict[str, Any]:
    """Measure the reconstruction on a dataset or on in-memory events; plots into ``output_dir``."""
    parts: dict[str, list[np.ndarray]] = {}
    n_events = 0
    for chunk in _chunks(source, max_events, step_size):
        for key, value in _measure(chunk).items():
            parts.setdefault(key, []).append(value)
        n_events += len(chunk)
    if n_events == 0:
        raise DataError("nothing to validate: no events")
    data = {key: np.concatenate(values) for key, values in parts.items()}
    summary = _summarise(data, n_events)
    if output_dir is not None:
        from giod.physics.validation_plots import write_plots

        summary["plots"] = write_plots(data, summary, Path(output_dir))
    return summary


def _chunks(source: Any, max_events: int | None, step_size: int) -> Iterator[ak.Array]:
    left = max_events if max_events is not None else np.inf
    if isinstance(source, ak.Array):
        events = source if max_events is None else source[:max_events]
        if "tracks" not in ak.fields(events):
            from giod.physics.layout import with_fields
            from giod.physics.reconstruct import reconstruct

            reco = reconstruct(events)
            events = with_fields(events, {c: reco[c] for c in ("tracks", "clusters", "jets")})
        yield events
        return
    schema = source.schema
    missing = [c for c in ("mcparticles", "tracker_hits", "tracks", "jets") if c not in schema.collections]
    if missing:
        raise DataError(f"dataset {source.name} has no {', '.join(missing)}: validation needs simulated, "
                        "reconstructed events")
    reco = schema.container_of("tracks")
    if any(db.container(reco) is None for db in source.databases()):
        raise DataError(f"dataset {source.name} is not reconstructed yet: reconstruct it first "
                        "(giod.physics.chain.reconstruct_dataset)")
    for chunk in source.select().iterate(_COLUMNS, step_size=step_size):
        if left <= 0:
            return
        if len(chunk) > left:
            chunk = chunk[: int(left)]
        left -= len(chunk)
        yield chunk


def _indices(collection: ak.Array, relation: str) -> ak.Array:
    """A relation's index lists, in memory from ``reconstruct`` or read back from a dataset."""
    name = f"{relation}_index" if f"{relation}_index" in ak.fields(collection) else relation
    return collection[name]


def _flat(array: ak.Array) -> np.ndarray:
    return np.asarray(ak.to_numpy(ak.flatten(array, axis=1)))


def _measure(events: ak.Array) -> dict[str, np.ndarray]:
    """Per-object truth comparisons of one chunk of events."""
    out: dict[str, np.ndarray] = {}
    mc = events.mcparticles
    n_mc = np.asarray(ak.num(mc, axis=1), dtype=np.int64)
    mc_first = np.concatenate([[0], np.cumsum(n_mc)[:-1]])
    px, py, pz = (_flat(mc[c]).astype(np.float64) for c in ("px", "py", "pz"))
    mc_pt = np.hypot(px, py)
    mc_eta = np.arcsinh(pz / np.maximum(mc_pt, 1e-9))
    charged = (_flat(mc.status) == 1) & (_flat(mc.charge) != 0)

    # Which particle made most of each track's hits.
    tracks = events.tracks
    n_trk = np.asarray(ak.num(tracks, axis=1), dtype=np.int64)
    trk_event = np.repeat(np.arange(len(events)), n_trk)
    hits_of = _indices(tracks, "hits")
    n_hits = ak.to_numpy(ak.flatten(ak.num(hits_of, axis=2)))
    particle_of = _indices(events.tracker_hits, "particle")
    hit_particle = ak.to_numpy(ak.flatten(particle_of[ak.flatten(hits_of, axis=2)], axis=1))
    trk_of_hit = np.repeat(np.arange(len(n_hits)), n_hits)
    best, best_count = _majority(trk_of_hit, hit_particle, len(n_hits))
    matched = (best >= 0) & (best_count >= MATCH_FRACTION * np.maximum(n_hits, 1))
    particle = np.where(matched, mc_first[trk_event] + best, -1)

    trk_pt, trk_eta = _flat(tracks.pt).astype(np.float64), _flat(tracks.eta).astype(np.float64)
    out["trk_pt"], out["trk_eta"], out["trk_fake"] = trk_pt, trk_eta, ~matched
    tracks_per_particle = np.bincount(particle[matched], minlength=len(mc_pt))
    out["trk_duplicate"] = np.zeros(len(particle), dtype=bool)
    if matched.any():
        # every matched track after the first of its particle
        order = np.argsort(particle, kind="stable")
        first = np.r_[True, particle[order][1:] != particle[order][:-1]]
        dup = np.zeros(len(particle), dtype=bool)
        dup[order] = ~first
        out["trk_duplicate"] = dup & matched
    found = tracks_per_particle > 0
    out["mc_pt"], out["mc_eta"], out["mc_found"] = mc_pt[charged], mc_eta[charged], found[charged]
    which = particle[matched]
    out["res_true_pt"] = mc_pt[which]
    out["res_true_eta"] = mc_eta[which]
    out["res_delta"] = (trk_pt[matched] - mc_pt[which]) / mc_pt[which]
    vx, vy = (_flat(mc[c]).astype(np.float64)[which] for c in ("vx", "vy"))
    mc_phi = np.arctan2(py, px)[which]
    d0_true = vx * np.sin(mc_phi) - vy * np.cos(mc_phi)
    out["res_d0"] = _flat(tracks.d0).astype(np.float64)[matched] - d0_true

    # Jets against particle jets.
    truth = truth_jets(events, min_pt=10.0)
    jets = events.jets
    n_jets = np.asarray(ak.num(jets, axis=1), dtype=np.int64)
    jet = {c: _flat(jets[c]).astype(np.float64) for c in ("pt", "eta", "phi", "mass")}
    match = match_jets(truth["n"], truth["eta"], truth["phi"], n_jets, jet["eta"], jet["phi"])
    out["jet_truth_matched"] = match[np.abs(truth["eta"]) < JET_ETA_MAX] >= 0
    central = (np.abs(truth["eta"]) < JET_ETA_MAX) & (match >= 0)
    out["jet_true_pt"] = truth["pt"][central]
    out["jet_true_eta"] = truth["eta"][central]
    out["jet_response"] = jet["pt"][match[central]] / truth["pt"][central]
    out["mjj_reco"] = _dijet_mass(n_jets, jet)
    out["mjj_true"] = _dijet_mass(truth["n"], truth)
    return out


def _majority(group: np.ndarray, value: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group: the most frequent non-negative value (-1 if none) and how often it occurs."""
    best = np.full(n_groups, -1, dtype=np.int64)
    count = np.zeros(n_groups, dtype=np.int64)
    keep = value >= 0
    if not keep.any():
        return best, count
    pairs, counts = np.unique(np.stack([group[keep], value[keep]]), axis=1, return_counts=True)
    order = np.lexsort((counts, pairs[0]))  # the largest count of each group comes last
    best[pairs[0][order]] = pairs[1][order]
    count[pairs[0][order]] = counts[order]
    return best, count


def _dijet_mass(n: np.ndarray, jets: dict[str, np.ndarray]) -> np.ndarray:
    """Mass of the two leading jets per event (NaN where they fail the di-jet cuts)."""
    pt_cut, eta_cut = DIJET_CUTS
    event = np.repeat(np.arange(len(n)), n)
    good = (jets["pt"] > pt_cut) & (np.abs(jets["eta"]) < eta_cut)
    order = np.lexsort((-jets["pt"], event))
    order = order[good[order]]
    ev = event[order]
    rank = np.arange(len(ev)) - np.searchsorted(ev, ev)
    out = np.full(len(n), np.nan)
    lead, sub = order[rank == 0], order[rank == 1]
    has_two = np.zeros(len(n), dtype=bool)
    has_two[event[sub]] = True
    e_sum = np.zeros((len(n), 4))
    for idx in (lead, sub):
        pt, eta, phi, m = (jets[c][idx] for c in ("pt", "eta", "phi", "mass"))
        pz = pt * np.sinh(eta)
        np.add.at(e_sum, event[idx], np.stack([np.sqrt(pt**2 + pz**2 + m**2), pt * np.cos(phi),
                                               pt * np.sin(phi), pz], axis=1))
    mass2 = e_sum[:, 0] ** 2 - (e_sum[:, 1:] ** 2).sum(axis=1)
    out[has_two] = np.sqrt(np.maximum(mass2[has_two], 0.0))
    return out


def _rate(flags: np.ndarray) -> tuple[float, float]:
    n = len(flags)
    if n == 0:
        return float("nan"), float("nan")
    p = float(np.mean(flags))
    return p, float(np.sqrt(max(p * (1 - p), 1.0 / n) / n))


def _window(x: np.ndarray, entry: dict[str, Any]) -> np.ndarray:
    return np.asarray((x >= entry["pt_min"]) & (x < entry["pt_max"]))


def reference_label(entry: dict[str, Any], what: str = "pT") -> str:
    """``pT 0.8–1.25 GeV, |η| < 0.9`` for a reference entry."""
    return f"{what} {entry['pt_min']:g}–{entry['pt_max']:g} GeV, |η| < {entry['eta_max']:g}"


def _width(values: np.ndarray) -> float:
    if len(values) < REFERENCE_MIN_ENTRIES:
        return float("nan")
    lo, hi = np.percentile(values, [16, 84])
    return float(0.5 * (hi - lo))


def compare_with_cms(d: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """Each CMS reference figure beside giod's value measured the same way.

    Resolutions are compared as a ratio (giod / CMS, met within a factor
    :data:`~giod.physics.reference.RESOLUTION_FACTOR` either way); an
    efficiency as a difference. ``giod`` is NaN where giod has too few objects
    in the reference's window (:data:`REFERENCE_MIN_ENTRIES`).
    """
    ref = cms_reference()
    out: list[dict[str, Any]] = []

    def add(quantity: str, label: str, entry: dict[str, Any], giod: float, n: int, ratio: bool = True) -> None:
        cms = float(entry["value"])
        row = {"quantity": quantity, "label": label, "giod": giod, "cms": cms, "entries": n,
               "source": citation(entry["source"]), "kind": entry["kind"],
               "particles": entry.get("particles", "")}
        if ratio:
            row["ratio"] = giod / cms if np.isfinite(giod) else float("nan")
            row["met"] = bool(np.isfinite(giod) and 1 / RESOLUTION_FACTOR <= row["ratio"] <= RESOLUTION_FACTOR)
        else:
            row["difference"] = giod - cms
        out.append(row)

    pt, eta = d["res_true_pt"], np.abs(d["res_true_eta"])
    for quantity, values in (("pt_resolution", d["res_delta"]), ("d0_resolution", d["res_d0"])):
        for entry in ref["tracking"][quantity]:
            sel = _window(pt, entry) & (eta < entry["eta_max"])
            add(quantity, reference_label(entry), entry, _width(values[sel]), int(sel.sum()))
    for entry in ref["tracking"]["efficiency"]:
        sel = (d["mc_pt"] > 0.9) & (np.abs(d["mc_eta"]) >= entry["eta_min"]) & (np.abs(d["mc_eta"]) < entry["eta_max"])
        eff = float(np.mean(d["mc_found"][sel])) if sel.any() else float("nan")
        add("efficiency", f"pT > 0.9 GeV, {entry['eta_min']:g} ≤ |η| < {entry['eta_max']:g}", entry, eff,
            int(sel.sum()), ratio=False)
    jet_pt, response = d["jet_true_pt"], d["jet_response"]
    for entry in ref["jets"]["pt_resolution"]:
        sel = _window(jet_pt, entry) & (np.abs(d["jet_true_eta"]) < entry["eta_max"])
        width = _width(response[sel])
        median = float(np.median(response[sel])) if sel.sum() >= REFERENCE_MIN_ENTRIES else float("nan")
        add("jet_resolution", reference_label(entry, "jet pT"), entry, width / median, int(sel.sum()))
    return out


def _summarise(d: dict[str, np.ndarray], n_events: int) -> dict[str, Any]:
    accept = (d["mc_pt"] > TRACK_PT_MIN) & (np.abs(d["mc_eta"]) < TRACK_ETA_MAX)
    trk_accept = (d["trk_pt"] > TRACK_PT_MIN) & (np.abs(d["trk_eta"]) < TRACK_ETA_MAX)
    eff, eff_err = _rate(d["mc_found"][accept])
    fake, fake_err = _rate(d["trk_fake"][trk_accept])
    dup, _ = _rate(d["trk_duplicate"][trk_accept])
    res = binned_widths(d["res_true_pt"], d["res_delta"], PT_BINS)
    response = binned_medians(d["jet_true_pt"], d["jet_response"], JET_PT_BINS)
    high = JET_PT_BINS[:-1] >= TARGETS["jet_response_min_pt"]
    deviations = np.abs(response[high] - 1.0)
    worst = float(np.nanmax(deviations)) if np.isfinite(deviations).any() else float("nan")
    above = d["jet_true_pt"] > TARGETS["jet_response_min_pt"]
    both = np.isfinite(d["mjj_reco"]) & np.isfinite(d["mjj_true"])
    barrel = np.abs(d["res_true_eta"]) < BARREL_ETA_MAX
    res_barrel = binned_widths(d["res_true_pt"][barrel], d["res_delta"][barrel], PT_BINS)
    d0_barrel = binned_widths(d["res_true_pt"][barrel], d["res_d0"][barrel], PT_BINS)
    mid = (d["res_true_pt"] > ETA_PLOT_PT[0]) & (d["res_true_pt"] < ETA_PLOT_PT[1])
    res_eta = binned_widths(d["res_true_eta"][mid], d["res_delta"][mid], ETA_BINS)
    jet_res = binned_widths(d["jet_true_pt"], d["jet_response"], JET_PT_BINS) / response
    cms = compare_with_cms(d)
    resolutions = [c for c in cms if "ratio" in c and np.isfinite(c["giod"])]
    return {
        "events": n_events,
        "tracking": {
            "efficiency": eff, "efficiency_error": eff_err,
            "fake_rate": fake, "fake_rate_error": fake_err, "duplicate_rate": dup,
            "particles": int(accept.sum()), "tracks": int(trk_accept.sum()),
            "particles_found": int(d["mc_found"][accept].sum()), "fake_tracks": int(d["trk_fake"][trk_accept].sum()),
            "pt_resolution": {_label(PT_BINS, b): float(v) for b, v in enumerate(res) if np.isfinite(v)},
            "pt_resolution_barrel": _labelled(PT_BINS, res_barrel),
            "pt_resolution_vs_eta": _labelled(ETA_BINS, res_eta),
            "d0_resolution_barrel": _labelled(PT_BINS, d0_barrel),
        },
        "jets": {
            "matched": int(len(d["jet_response"])), "particle_jets": int(len(d["jet_truth_matched"])),
            "response": {_label(JET_PT_BINS, b): float(v) for b, v in enumerate(response) if np.isfinite(v)},
            "response_above_50": float(np.median(d["jet_response"][above])) if above.any() else float("nan"),
            "worst_response_deviation_above_50": worst,
            "resolution": _labelled(JET_PT_BINS, jet_res),
        },
        "cms": cms,
        "dijet": {
            "events_reco": int(np.isfinite(d["mjj_reco"]).sum()),
            "events_truth": int(np.isfinite(d["mjj_true"]).sum()),
            "mass_ratio_median": float(np.median(d["mjj_reco"][both] / d["mjj_true"][both]))
            if both.any() else float("nan"),
        },
        "targets": {
            "tracking_efficiency": bool(eff >= TARGETS["tracking_efficiency"]),
            "fake_rate": bool(fake <= TARGETS["fake_rate"]),
            "jet_response": bool(worst <= TARGETS["jet_response_tolerance"]),
            "resolutions_within_1.5x_of_CMS": bool(resolutions) and all(c["met"] for c in resolutions),
        },
    }


def _labelled(edges: np.ndarray, values: np.ndarray) -> dict[str, float]:
    return {_label(edges, b): float(v) for b, v in enumerate(values) if np.isfinite(v)}


def _label(edges: np.ndarray, b: int) -> str:
    return f"{edges[b]:g}-{edges[b + 1]:g}"


def _percent(p: float, err: float | None = None) -> str:
    """A fraction in percent with as many decimals as its uncertainty (or its size) needs."""
    if not np.isfinite(p):
        return "—"
    scale = err if err is not None and err > 0 else abs(p)
    digits = 1 if scale <= 0 else int(min(max(1 - np.floor(np.log10(100 * scale)), 1), 4))
    text = f"{100 * p:.{digits}f}"
    return f"{text} ± {100 * err:.{digits}f} %" if err is not None and np.isfinite(err) else f"{text} %"


def _share(k: int, n: int) -> str:
    """``k`` of ``n`` in percent with its binomial uncertainty."""
    if n == 0:
        return "— (none)"
    p = k / n
    return _percent(p, float(np.sqrt(max(p * (1 - p), 1.0 / n) / n)))


def report_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The summary of :func:`validate` as rows of a table a physicist reads: what was measured, on
    which objects (in words), and the value as a percentage with its uncertainty or a count."""
    t, j, dj = summary["tracking"], summary["jets"], summary["dijet"]
    acc = f"pT > {TRACK_PT_MIN:g} GeV, |η| < {TRACK_ETA_MAX:g}"
    rows = [
        (f"charged final-state particles ({acc})", f"{t['particles']:,}"),
        ("  of them found by a track (≥ 75 % of its hits from the particle)", f"{t['particles_found']:,}"),
        ("tracking efficiency", _percent(t["efficiency"], t["efficiency_error"])),
        (f"reconstructed tracks ({acc})", f"{t['tracks']:,}"),
        ("  of them fakes (no particle made ≥ 75 % of their hits)", f"{t['fake_tracks']:,}"),
        ("fake rate", _percent(t["fake_rate"], t["fake_rate_error"])),
        ("duplicate rate (matched tracks beyond the first per particle)", _percent(t["duplicate_rate"])),
    ]
    for label, width in t["pt_resolution"].items():
        rows.append((f"track σ(pT)/pT, true pT {label.replace('-', '–')} GeV", _percent(width)))
    rows += [
        (f"particle jets (anti-kt R = 0.4, pT > 10 GeV, |η| < {JET_ETA_MAX:g})", f"{j['particle_jets']:,}"),
        ("  of them matched by a reconstructed jet (ΔR < 0.2)", f"{j['matched']:,}"),
        ("jet matching efficiency", _share(j["matched"], j["particle_jets"])),
    ]
    for label, response in j["response"].items():
        rows.append((f"jet response (median reco / particle pT), {label.replace('-', '–')} GeV",
                     f"{response:.3f} ({100 * (response - 1):+.1f} %)"))
    rows += [
        (f"jet response above {TARGETS['jet_response_min_pt']:g} GeV", f"{j['response_above_50']:.3f}"),
        (f"worst deviation from 1 above {TARGETS['jet_response_min_pt']:g} GeV (target ≤ "
         f"{100 * TARGETS['jet_response_tolerance']:g} %)", _percent(j["worst_response_deviation_above_50"])),
        (f"events with two leading jets pT > {DIJET_CUTS[0]:g} GeV, |η| < {DIJET_CUTS[1]:g}: reconstructed",
         f"{dj['events_reco']:,} of {summary['events']:,}"),
        ("  the same from particle jets", f"{dj['events_truth']:,} of {summary['events']:,}"),
        ("di-jet mass, median reco / particle-jet", f"{dj['mass_ratio_median']:.3f}"),
    ]
    rows += [(f"CMS: {_QUANTITY[c['quantity']]}, {c['label']}, {c['particles'] or 'charged particles'} "
              f"({c['source']}, {c['kind']})", _versus(c)) for c in summary.get("cms", [])]
    return rows


def cms_verdict(summary: dict[str, Any]) -> str | None:
    """One line on the comparison with CMS: how many reference resolutions giod meets, and each row it
    misses by name (its quantity and window, how far off and which way); None without a comparison."""
    rows = [c for c in summary.get("cms", []) if "ratio" in c]
    if not rows:
        return None
    missed = [c for c in rows if not c["met"]]
    head = f"CMS resolutions: {len(rows) - len(missed)} of {len(rows)} within ×{RESOLUTION_FACTOR:g}"
    if not missed:
        return head
    def why(c: dict[str, Any]) -> str:
        if not np.isfinite(c["giod"]):
            return "too few objects"
        r = c["ratio"]
        return f"{max(r, 1 / r):.1f}× {'worse' if r > 1 else 'better'}"
    return head + "; missed: " + "; ".join(f"{_QUANTITY[c['quantity']]} {c['label']} ({why(c)})" for c in missed)


_QUANTITY = {"pt_resolution": "track σ(pT)/pT", "d0_resolution": "track σ(d0)", "efficiency": "tracking efficiency",
             "jet_resolution": "jet σ(pT)/pT"}


def _versus(c: dict[str, Any]) -> str:
    """giod's value beside CMS's, and whether the target is met (resolutions: within a factor 1.5)."""
    def show(v: float) -> str:
        if c["quantity"] == "d0_resolution":
            return f"{1e4 * v:.0f} µm"
        return _percent(v)

    if not np.isfinite(c["giod"]):
        return f"giod — (fewer than {REFERENCE_MIN_ENTRIES} objects here) vs CMS {show(c['cms'])}"
    text = f"giod {show(c['giod'])} vs CMS {show(c['cms'])}"
    if "ratio" not in c:
        return f"{text} ({100 * c['difference']:+.1f} points)"
    r = c["ratio"]
    if c["met"]:
        return f"{text}: ratio {r:.2f}, within ×{RESOLUTION_FACTOR:g}"
    return f"{text}: ratio {r:.2f}, missed: giod {max(r, 1 / r):.1f}× {'worse' if r > 1 else 'better'}"
