"""`giod validate`'s table: percentages with uncertainties, counts said in words, no raw floats."""

from __future__ import annotations

import re

import awkward as ak

from giod.physics.validation import report_rows, validate


def _value(rows: list[tuple[str, str]], start: str) -> str:
    return next(v for k, v in rows if k.startswith(start))


def test_report_rows_read_as_a_physicist_expects(simulated: ak.Array) -> None:
    summary = validate(simulated)
    rows = report_rows(summary)
    t, j = summary["tracking"], summary["jets"]
    for name, value in rows:
        assert not re.search(r"\d\.\d{5,}", value), (name, value)  # never 0.9995221090419227
        assert name and value
    # counts come with what they count, and the sub-counts are parts of them
    assert _value(rows, "charged final-state particles (pT > 1 GeV") == f"{t['particles']:,}"
    assert _value(rows, "  of them found by a track") == f"{t['particles_found']:,}"
    assert t["particles_found"] <= t["particles"] and t["fake_tracks"] <= t["tracks"]
    assert j["matched"] <= j["particle_jets"]
    # a rate is a percentage with its uncertainty, and it is the counts' ratio
    eff = re.fullmatch(r"([\d.]+) ± ([\d.]+) %", _value(rows, "tracking efficiency"))
    assert eff is not None
    digits = len(eff.group(1).split(".")[1])
    assert abs(float(eff.group(1)) - 100 * t["particles_found"] / t["particles"]) <= 10 ** -digits
    assert re.fullmatch(r"[\d.]+ ± [\d.]+ %", _value(rows, "fake rate"))
    assert re.fullmatch(r"[\d.]+ ± [\d.]+ %", _value(rows, "jet matching efficiency"))
    assert any(k.startswith("track σ(pT)/pT, true pT 1–1.5 GeV") and v.endswith(" %") for k, v in rows)
