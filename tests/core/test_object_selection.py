"""Selections over objects and counters: ``count(jets.pt > 30) >= 2``, ``nhits > 60``, ``jets.pt[0] > 50``.

Each construct is compared with the same cut written in awkward over the
events written; the federation is real (SQLite, PostgreSQL, or a server on
loopback through the remote client).
"""

from __future__ import annotations

import awkward as ak
import numpy as np
import pytest

import giod
import giod.read.selection
from giod.testing import synthetic

EVENTS = 600


def _leading(values: ak.Array, k: int = 0) -> ak.Array:
    return ak.firsts(values[:, k : k + 1 or None], axis=1)


def _true(values: ak.Array) -> np.ndarray:
    return ak.to_numpy(ak.fill_none(values, False)).astype(bool)


# text, and the same cut in awkward (missing values: false)
CONSTRUCTS = [
    ("count(jets.pt > 40) >= 2", lambda e: ak.sum(e.jets.pt > 40, axis=1) >= 2),
    ("any(abs(tracks.eta) < 1.5 and tracks.pt > 2)",
     lambda e: ak.any((abs(e.tracks.eta) < 1.5) & (e.tracks.pt > 2), axis=1)),
    ("all(jets.pt > 40)", lambda e: ak.all(e.jets.pt > 40, axis=1)),
    ("sum(jets.pt) > 150", lambda e: ak.sum(e.jets.pt, axis=1) > 150),
    ("max(jets.pt) > 60", lambda e: ak.max(e.jets.pt, axis=1) > 60),
    ("min(tracks.pt) < 1.05", lambda e: ak.min(e.tracks.pt, axis=1) < 1.05),
    ("jets.pt[0] > 50", lambda e: _leading(e.jets.pt) > 50),
    ("jets.pt[-1] < 32", lambda e: _leading(e.jets.pt, -1) < 32),
    ("not (jets.pt[1] > 35)", lambda e: ~_true(_leading(e.jets.pt, 1) > 35)),
    ("nhits > 60", lambda e: ak.num(e.hits, axis=1) > 60),
    ("ncells < 95 and ht > 100", lambda e: (ak.num(e.cells, axis=1) < 95) & (e.ht > 100)),
    ("njets >= 3", lambda e: e.njets >= 3),  # the stored tag
    ("ht > 200 and count(jets.pt > 40) >= 1 or nhits < 50",
     lambda e: ((e.ht > 200) & (ak.sum(e.jets.pt > 40, axis=1) >= 1)) | (ak.num(e.hits, axis=1) < 50)),
    ("any(jets.pt > ht / 3)", lambda e: ak.any(e.jets.pt > e.ht / 3, axis=1)),
]


def _write(fed):
    ds = fed.create_dataset("qcd", synthetic.schema())
    events = synthetic.events(EVENTS, seed=23)
    with ds.writer(database_events=200, cluster_events=50) as w:
        w.append(events)
    return ds, events


@pytest.fixture
def written(fed):
    return _write(fed)


@pytest.fixture(scope="module")
def written_once(module_fed):
    """As ``written``, once per module and backend: for the tests that only select and read."""
    return _write(module_fed)


@pytest.mark.parametrize(("text", "reference"), CONSTRUCTS, ids=[c[0] for c in CONSTRUCTS])
def test_each_construct_selects_what_awkward_does(written_once, text, reference):
    ds, events = written_once
    expected = np.flatnonzero(_true(reference(events)))
    assert 0 < len(expected) < EVENTS  # the cut means something on these events
    sel = ds.select(text)
    np.testing.assert_array_equal(sel.entries(), expected)
    assert len(sel) == len(expected)
    got = sel.read(["jets.pt", "ht"])
    assert got.jets.pt.to_list() == events.jets.pt[expected].to_list()
    assert ak.to_list(ds.query(text, ["event"]).event) == ak.to_list(events.event[expected])


def test_a_stored_tag_wins_over_the_counter_of_the_same_name(written_once):
    ds, events = written_once
    # njets is stored; nhits is not: it comes from the list lengths of hits
    assert "njets" in ds.schema.tags and "nhits" not in ds.schema.tags
    assert ds.select("njets >= 3").expression.fields == {"njets"}
    assert dict(ds.select("nhits >= 3").expression.objects) == {"hits": frozenset()}


def test_tag_terms_prune_databases_and_events_first_and_only_named_columns_are_read(fed, monkeypatch):
    ds = fed.create_dataset("sorted", synthetic.schema())
    events = synthetic.events(EVENTS, seed=5)
    events = events[np.argsort(ak.to_numpy(events.ht), kind="stable")]
    with ds.writer(database_events=200, cluster_events=50) as w:
        w.append(events)
    ht = ak.to_numpy(events.ht)
    top = float(np.sort(ht)[-30])
    reads: list[tuple[dict[str, list[str]], int | None]] = []
    real = giod.read.selection.read_database

    def recording(dataset, db, proj, local):
        reads.append(({c: list(p) for c, p in proj.columns.items()}, None if local is None else len(local)))
        return real(dataset, db, proj, local)

    monkeypatch.setattr(giod.read.selection, "read_database", recording)
    sel = ds.select(f"ht >= {top} and count(jets.pt > 40) >= 2")
    assert len(sel.databases()) == 1  # the tag term prunes the other two databases
    expected = np.flatnonzero((ht >= top) & ak.to_numpy(ak.sum(events.jets.pt > 40, axis=1) >= 2))
    np.testing.assert_array_equal(sel.entries(), expected)
    assert reads == [
        ({"tag": ["ht"]}, None),
        # the objects are read for the 30 events the tags left, and only jets.pt
        ({"reco": ["jets.list.element.pt"]}, 30),
    ]


def test_a_counter_alone_reads_one_column_of_its_collection(written, monkeypatch):
    ds, events = written
    reads: list[dict[str, list[str]]] = []
    real = giod.read.selection.read_database

    def recording(dataset, db, proj, local):
        reads.append({c: list(p) for c, p in proj.columns.items()})
        return real(dataset, db, proj, local)

    monkeypatch.setattr(giod.read.selection, "read_database", recording)
    assert len(ds.select("ncells > 100")) == int(np.sum(ak.num(events.cells, axis=1) > 100))
    assert reads and all(r == {"raw.calo": ["cells.list.element.eta"]} for r in reads)


@pytest.mark.parametrize(("text", "says", "position"), [
    ("count(jet.pt > 30) >= 2", "unknown collection 'jet'; did you mean 'jets'?", 7),
    ("any(jets.ptt > 30)", "unknown jets field 'ptt'; did you mean 'pt'?", 10),
    ("nJets > 2", "did you mean 'njets'", 1),
    ("nhit > 2", "did you mean 'nhits'", 1),
    ("jets.pt > 30", "a condition on each jets object", 1),
    ("any(jets.pt > tracks.pt)", "cannot combine the objects of jets", 15),
    ("jets.cov[0] > 1", "unknown jets field 'cov'", 6),
    ("any(tracks.cov > 1)", "has type float32[3], which selections cannot use", 5),
])
def test_bad_names_are_expression_errors_with_suggestions(written_once, text, says, position):
    ds, _ = written_once
    with pytest.raises(giod.ExpressionError) as caught:
        ds.select(text)
    assert says in caught.value.message
    assert caught.value.position == position - 1


def test_counters_are_columns_too(written_once):
    ds, events = written_once
    passed = ak.to_numpy(ak.num(events.cells, axis=1) > 100)
    sel = ds.select("ncells > 100")
    got = sel.read(["nhits", "ht", "ncells"])
    assert got.fields == ["nhits", "ht", "ncells"]
    assert ak.to_list(got.nhits) == ak.to_list(ak.num(events.hits, axis=1)[passed])
    assert ak.to_list(got.ncells) == ak.to_list(ak.num(events.cells, axis=1)[passed])
    with_hits = sel.read(["hits.x", "nhits"])  # the collection read anyway gives the lengths
    assert with_hits.hits.fields == ["x"] and ak.to_list(with_hits.nhits) == ak.to_list(got.nhits)
    assert ak.to_list(ds.query("ncells > 100", ["nhits"]).nhits) == ak.to_list(got.nhits)
    assert ak.to_list(sel.read(["njets"]).njets) == ak.to_list(events.njets[passed])  # the stored tag
    assert ak.to_list(ds.select("false").read(["nhits"]).nhits) == []
