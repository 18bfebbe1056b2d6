"""``iterate`` reads consecutive entries by clusters: its parts, put together, are the whole read.

The datasets cut their events every way a part can meet: several databases of different sizes, clusters
of different sizes in one database and across its containers (a pass rewrote one container with its own
clusters), an Arrow and a Parquet database, a selection that leaves runs and one that leaves scattered
events. Whatever the step, the parts are the whole read sliced: same values, types, behaviours, relations
(``events.jets.tracks``) in each library, and each cluster is decoded once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.server.conftest import serve

import giod
from giod.read.objects import unlink
from giod.read.selection import _steps
from giod.storage.container import ContainerReader
from giod.testing import synthetic

SIZES = (130, 97, 73)  # events of each database
EVENTS = synthetic.events(sum(SIZES), seed=11)
SELECTIONS = (None, "event >= 50 and event < 260", "njets >= 2")  # everything, runs, scattered events
COLUMNS = (None, ["jets", "tracks"], ["ht", "hits", "njets"])


def _fill(f: giod.Federation) -> None:
    ds = f.create_dataset("cut", synthetic.schema())
    at = 0
    for size, options in zip(SIZES, [{"cluster_events": 17}, {"cluster_events": 40},
                                      {"container_format": "parquet", "cluster_events": 30}], strict=True):
        with ds.writer(database_events=size, **options) as w:
            w.append(EVENTS[at : at + size])
        at += size
    first = ds.snapshot.databases()[0]
    with ds.add_containers(replace=True, cluster_events=23) as p:  # reco cut otherwise than raw.tracker
        p.write(first, EVENTS[: SIZES[0]], containers=["reco"])


@pytest.fixture(scope="module")
def cut(tmp_path_factory: pytest.TempPathFactory) -> Iterator[giod.Federation]:
    f = giod.open(tmp_path_factory.mktemp("iterate") / "fed", create=True)
    _fill(f)
    yield f
    f.close()


def test_the_layouts_cut_the_events_as_meant(cut: giod.Federation) -> None:
    dbs = cut.dataset("cut").snapshot.databases()
    assert [db.n_events for db in dbs] == list(SIZES)
    first = {c.name: c.cluster_entries for c in dbs[0].containers}
    assert first["raw.tracker"][:2] == (17, 17) and first["reco"][:2] == (23, 23)
    assert len(dbs[1].container("reco").cluster_entries) == 3
    assert dbs[2].container("reco").format == "parquet" and len(dbs[2].container("reco").cluster_entries) == 3


def _rows(part: Any, library: str) -> int:
    return part.num_rows if library == "pa" else len(part) if library == "ak" else len(next(iter(part.values())))


def _plain(x: Any) -> Any:
    """Nested lists of an array, its elements (jagged leaves) too."""
    return [_plain(e) for e in x] if isinstance(x, np.ndarray) and x.dtype == object else \
        x.tolist() if isinstance(x, np.ndarray) else x


def _same(part: Any, whole: Any, at: int, library: str) -> None:
    """``part`` is rows ``at`` on of ``whole``: the same values and types."""
    n = _rows(part, library)
    if library == "pa":
        assert part.schema.equals(whole.schema) and part.equals(whole.slice(at, n))
    elif library == "np":
        assert part.keys() == whole.keys()
        for k, v in whole.items():
            assert part[k].dtype == v.dtype, k
            assert _plain(part[k]) == _plain(v[at : at + n]), k
    else:
        assert str(part.type) == str(whole[at : at + n].type)
        schema = synthetic.schema()
        got = ak.to_arrow_table(unlink(part, schema), extensionarray=False)
        assert got.equals(ak.to_arrow_table(unlink(whole[at : at + n], schema), extensionarray=False))


@settings(max_examples=25, deadline=None)
@given(step=st.integers(1, 320), which=st.integers(0, len(SELECTIONS) - 1), cols=st.integers(0, len(COLUMNS) - 1),
       library=st.sampled_from(["ak", "pa", "np"]))
def test_parts_put_together_are_the_whole_read(cut: giod.Federation, step: int, which: int, cols: int,
                                               library: str) -> None:
    sel = cut.dataset("cut").select(SELECTIONS[which])
    columns = COLUMNS[cols]
    parts = list(sel.iterate(columns, step_size=step, library=library))
    # a number of events cuts exactly as before: steps within each database, never across one
    expected = []
    for db, local in sel.plan():
        n = db.n_events if local is None else len(local)
        expected += [min(step, n - a) for a in range(0, n, step)]
    assert [_rows(p, library) for p in parts] == expected
    whole = sel.read(columns, library=library)
    at = 0
    for part in parts:
        _same(part, whole, at, library)
        at += _rows(part, library)


@pytest.mark.parametrize("step", [1, 16, 17, 18, 23, 50, 129])
def test_behaviours_and_relations_across_parts(cut: giod.Federation, step: int) -> None:
    sel = cut.dataset("cut").select(None)
    whole = sel.read(["jets", "tracks", "hits"])
    at = 0
    for part in sel.iterate(["jets", "tracks", "hits"], step_size=step):
        same = whole[at : at + len(part)]
        assert str(part.type.content) == str(same.type.content)
        assert type(part.jets) is type(same.jets) and part.jets.layout.content.parameter("__record__") == "Jet"
        # relations are indices within an event: the same targets, whoever's part holds the event
        assert part.jets.tracks.pt.to_list() == same.jets.tracks.pt.to_list()
        assert part.jets.leading.eta.to_list() == same.jets.leading.eta.to_list()
        assert part.tracks.hits.x.to_list() == same.tracks.hits.x.to_list()
        at += len(part)
    assert at == len(whole) == sum(SIZES)
    pts = EVENTS.tracks.pt[0].to_list()  # stored: a jet's tracks are indices into its event's tracks
    assert whole.jets[0].tracks.pt.to_list() == [[pts[i] for i in jet] for jet in EVENTS.jets.tracks[0].to_list()]


def test_each_cluster_is_decoded_once(cut: giod.Federation, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: Counter[tuple[str, int]] = Counter()
    real = ContainerReader.read

    def counting(self: ContainerReader, columns: Any = None, row_groups: Any = None) -> pa.Table:
        for b in range(self.num_row_groups) if row_groups is None else row_groups:
            asked[(self.path, int(b))] += 1
        return real(self, columns, row_groups)

    def no_rows(*args: Any) -> None:
        raise AssertionError("a part of consecutive entries was read entry by entry")

    monkeypatch.setattr(ContainerReader, "read", counting)
    monkeypatch.setattr(ContainerReader, "read_rows", no_rows)
    sel = cut.dataset("cut").select(None)
    for step in (7, 40):  # parts smaller than a cluster, and parts that cut clusters in two
        asked.clear()
        n = sum(len(p) for p in sel.iterate(["hits", "jets", "ht"], step_size=step))
        assert n == sum(SIZES)
        clusters = {(c.path, b) for db, _ in sel.plan() for c in db.containers
                    if c.name in ("raw.tracker", "reco", "tag") for b in range(len(c.cluster_entries))}
        assert set(asked) == clusters
        assert max(asked.values()) == 1


@settings(max_examples=300, deadline=None)
@given(n=st.integers(1, 2_000), step=st.integers(1, 700),
       sizes=st.lists(st.integers(1, 300), min_size=1, max_size=20))
def test_memory_steps_end_where_clusters_end(n: int, step: int, sizes: list[int]) -> None:
    cuts = np.cumsum(sizes)
    ranges = list(_steps(n, step, cuts))
    assert ranges[0][0] == 0 and ranges[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    for start, stop in ranges:
        assert 0 < stop - start <= step
        if stop == n:
            continue
        if stop - start < step:  # shorter only to end with a cluster, and by at most half
            assert stop in cuts and 2 * (stop - start) >= step
        elif stop not in cuts:  # a full step: no cluster ended in its second half
            assert not ((2 * (cuts - start) >= step) & (cuts <= stop)).any()


def test_a_memory_step_ends_parts_with_clusters(cut: giod.Federation) -> None:
    sel = cut.dataset("cut").select(None)
    per_event = ak.to_packed(unlink(sel.read(["hits"]), synthetic.schema())).nbytes / sum(SIZES)
    parts = list(sel.iterate(["hits"], step_size=f"{int(per_event * 40)} B"))
    ends = np.cumsum([len(p) for p in parts])
    tracker = [c.cluster_entries for db, _ in sel.plan() for c in db.containers if c.name == "raw.tracker"]
    assert ends[0] in np.cumsum(tracker[0])  # 34: the second cluster of 17 events ends at it
    assert ak.concatenate(parts).hits.x.to_list() == sel.read(["hits"]).hits.x.to_list()


def test_iterate_through_a_server(tmp_path: Path) -> None:
    for served in serve(tmp_path / "served"):
        _fill(served.local)
        remote = served.remote()
        try:
            for text in (None, "event >= 50 and event < 260"):
                sel = remote.dataset("cut").select(text)
                parts = list(sel.iterate(["jets", "tracks", "ht"], step_size=45, library="pa"))
                assert [p.num_rows for p in parts][:3] == [45, 45, 40] if text is None else True
                assert pa.concat_tables(parts).equals(sel.read(["jets", "tracks", "ht"], library="pa"))
                local = served.local.dataset("cut").select(text).read(["jets", "tracks", "ht"], library="pa")
                assert pa.concat_tables(parts).equals(local)
        finally:
            remote.close()
