"""Crafted containers whose checksums are all consistent: refused with IntegrityError on every read path,
never a wrong answer, a signal or a runaway allocation (each read runs in a child under an address-space
limit, so that a crash fails the test instead of killing it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import awkward as ak
import numpy as np
import pytest

import giod
from giod.errors import GiodError, IntegrityError
from giod.storage import validation
from giod.storage.container import WriteOptions
from giod.testing import synthetic
from giod_bench import crafted

LIMIT = 2 << 30  # bytes of address space a reading child may use


def _federation(root: Path, n: int = 200, cluster: int = 50, **options: object) -> Path:
    fed = giod.open(root, create=True)
    ds = fed.create_dataset("qcd", synthetic.schema())
    with ds.writer(database_events=n, cluster_events=cluster,
                   options=WriteOptions(**{"compression": "none", **options})) as w:  # type: ignore[arg-type]
        w.append(synthetic.events(n, seed=1))
    fed.close()
    return root


def _craft(root: Path, container: str, change: Callable[[bytearray, object], None]) -> None:
    """Change the bytes of ``container`` of the first database, then make every checksum agree again."""
    fed = giod.open(root)
    ds = fed.dataset("qcd")
    rec = ds.databases()[0].container(container)
    path = Path(crafted.local_file(fed, rec))
    schema = ds.schema.arrow_schema(container)
    fed.close()
    data = bytearray(path.read_bytes())
    change(data, schema)
    crafted.reseal(data)
    path.write_bytes(data)
    crafted.recatalog(f"sqlite:///{root / 'catalog.sqlite'}", rec.path, crafted.seal(data))


def _offset(column: str, at: int, value: int, batch: int = 0, buffer: int = 1) -> Callable[[bytearray, object], None]:
    def change(data: bytearray, schema: object) -> None:
        crafted.column_buffer(data, schema, batch, column, buffer)[at] = value  # type: ignore[arg-type]
    return change


def _isolated(root: Path, code: str) -> str:
    """Run ``code`` (with ``ds``, the dataset) in a child under an address-space limit: its outcome line."""
    script = textwrap.dedent(f"""
        import resource, giod
        ds = giod.open({str(root)!r}).dataset("qcd")
        resource.setrlimit(resource.RLIMIT_AS, ({LIMIT}, {LIMIT}))
        try:
            result = {code}
            print("OK", result)
        except giod.GiodError as exc:
            print(type(exc).__name__, exc)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"the read died ({done.returncode}): {done.stderr[-2000:]}"
    return done.stdout.strip().splitlines()[-1]


PATHS = {
    "read": 'ds.read(["jets"]).jets.pt.to_list()',
    "iterate": 'sum(len(a) for a in ds.iterate(["jets"], step_size=7))',
    "select": 'len(ds.select("count(jets.pt > 0) >= 1").read(["jets"]))',
    "event": 'ds.event(5, ["jets"]).jets.pt.to_list()',
}


@pytest.mark.parametrize("value", [-1583, 100_000_000, 3000])
def test_crafted_list_offsets_are_refused_on_every_path(tmp_path: Path, value: int) -> None:
    root = _federation(tmp_path / "fed")
    _craft(root, "reco", _offset("jets", 3, value))
    for name, code in PATHS.items():
        outcome = _isolated(root, code)
        assert outcome.startswith("IntegrityError"), (name, outcome)
        assert "reco.arrow" in outcome and "record batch 0" in outcome and "jets" in outcome, (name, outcome)


def test_other_batches_still_read_right(tmp_path: Path) -> None:
    root = _federation(tmp_path / "fed")
    _craft(root, "reco", _offset("jets", 3, -1583))
    want = synthetic.events(200, seed=1).jets.pt[120].to_list()
    assert _isolated(root, 'ds.event(120, ["jets"]).jets.pt.to_list()') == f"OK {want}"


def test_a_bad_offset_among_the_events_read_one_by_one(tmp_path: Path) -> None:
    # one batch of 4000 events, read block by block for a few of them
    root = _federation(tmp_path / "fed", n=4000, cluster=4000)
    _craft(root, "raw.tracker", _offset("hits", 2501, 10**8))
    outcome = _isolated(root, 'ds.event(2500, ["hits"]).hits.x.to_list()')
    assert outcome.startswith("IntegrityError") and "hits" in outcome, outcome
    _craft(root, "raw.tracker", _offset("hits", 2501, 0))  # now below its predecessor
    assert _isolated(root, 'ds.event(2500, ["hits"]).hits.x.to_list()').startswith("IntegrityError")
    want = synthetic.events(4000, seed=1).hits.x[10].to_list()
    assert _isolated(root, 'ds.event(10, ["hits"]).hits.x.to_list()') == f"OK {want}"


@pytest.mark.parametrize(("column", "value"), [("jets.leading", 999), ("jets.leading", -2),
                                               ("jets.tracks[]", 4000), ("tracks.hits[]", -1)])
def test_relation_indices_outside_their_event_are_refused(tmp_path: Path, column: str, value: int) -> None:
    root = _federation(tmp_path / "fed")
    _craft(root, "reco", _offset(column, 2, value))
    source, target = column.split(".")[0], "hits" if column.startswith("tracks") else "tracks"
    outcome = _isolated(root, f'ds.read(["{source}", "{target}"]).{source}.pt.to_list()')
    assert outcome.startswith("IntegrityError") and f"{column.rstrip('[]')} to {target}" in outcome, outcome


def test_a_bad_relation_fails_its_own_event_not_the_others_of_its_block(tmp_path: Path) -> None:
    """``ds.event`` builds blocks of events at once: a block holding an event whose relation points outside it
    is not kept, and each of its events is read alone, as before: the bad one refused, the others given."""
    root = _federation(tmp_path / "fed")
    jets = synthetic.events(200, seed=1).jets
    bad = int(np.searchsorted(np.cumsum(ak.num(jets)), 2, side="right"))  # the event of the batch's jet 2
    _craft(root, "reco", _offset("jets.leading", 2, 999))
    outcome = _isolated(root, f'ds.event({bad}, ["jets", "tracks"]).jets.pt.to_list()')
    assert outcome.startswith("IntegrityError") and "jets.leading to tracks" in outcome, outcome
    good = bad + 1  # in the same block of events (and cluster)
    want = jets.pt[good].to_list()
    assert _isolated(root, f'ds.event({good}, ["jets", "tracks"]).jets.pt.to_list()') == f"OK {want}"


def test_a_compressed_buffer_claiming_a_terabyte_allocates_nothing(tmp_path: Path) -> None:
    root = _federation(tmp_path / "fed", compression="zstd", min_savings=0.0)

    def claim(data: bytearray, schema: object) -> None:
        b = crafted.batches(data)[0]
        assert b.msg.codec == "zstd"
        raw = crafted.buffer_of(data, b, int(np.flatnonzero(b.msg.buffers[:, 1] > 8)[-1]))
        raw[:8] = np.frombuffer((1 << 40).to_bytes(8, "little"), dtype=np.uint8)

    _craft(root, "reco", claim)
    for code in (PATHS["read"], PATHS["event"], 'len(ds.read(["jets", "tracks"]))'):
        outcome = _isolated(root, code)
        assert outcome.startswith("IntegrityError"), outcome


def test_a_batch_is_validated_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _federation(tmp_path / "fed")
    seen = validation._Seen()
    added: list[object] = []
    original = seen.add
    monkeypatch.setattr(seen, "add", lambda key: (added.append(key), original(key)))
    monkeypatch.setattr(validation, "SEEN", seen)
    ds = giod.open(root).dataset("qcd")
    first = ds.read(["jets", "hits"])
    assert any(k[1] == "jets" for k in added) and any(k[1] == "hits" for k in added)
    added.clear()
    assert ds.read(["jets", "hits"]).jets.pt.to_list() == first.jets.pt.to_list()
    assert added == []


def test_a_copy_refuses_a_crafted_source(tmp_path: Path) -> None:
    from giod.exchange.copy import copy_dataset

    root = _federation(tmp_path / "src")
    _craft(root, "reco", _offset("jets", 3, 100_000_000))
    src, dst = giod.open(root), giod.open(tmp_path / "dst", create=True)
    with pytest.raises(IntegrityError, match="record batch 0, column jets"):
        copy_dataset(src, dst, "qcd")
    assert all(not dst.dataset(d.name).databases() for d in dst.catalog.datasets())
    src.close()
    dst.close()


def test_the_full_check_sees_a_relation_into_another_container(tmp_path: Path) -> None:
    from giod.storage.admission import check_files
    from giod.store.expected import stored_relations

    root = _federation(tmp_path / "fed")
    _craft(root, "reco", _offset("tracks.hits[]", 5, 10_000))
    fed = giod.open(root)
    ds = fed.dataset("qcd")
    db = ds.databases()[0]
    site = fed.site(fed.catalog.sites()[0].name)
    with pytest.raises(IntegrityError, match="relation tracks.hits"):
        check_files(site, db.containers, stored_relations(ds.schema))
    fed.close()
    shutil.rmtree(root)


def test_a_container_holding_fewer_events_than_its_database_is_refused(tmp_path: Path) -> None:
    # found by giod bench fuzz: a Parquet file of 41 of its database's 60 events, its catalog figures made to
    # agree with it, was joined side by side with the other containers, and awkward refused the record
    import google_crc32c
    import pyarrow.parquet as pq

    root = _federation(tmp_path / "fed", n=60, cluster=60, container_format="parquet")
    fed = giod.open(root)
    rec = fed.dataset("qcd").databases()[0].container("raw.tracker")
    path = crafted.local_file(fed, rec)
    fed.close()
    short = pq.read_table(path).slice(0, 41)
    pq.write_table(short, path)
    data = Path(path).read_bytes()
    crafted.recatalog(f"sqlite:///{root / 'catalog.sqlite'}", rec.path, crafted.Sealed(
        f"crc32c:{google_crc32c.value(data):08x}", len(data), (41,), ()))
    ds = giod.open(root).dataset("qcd")
    with pytest.raises(IntegrityError, match="gave 41 events, not 60"):
        ds.read(["hits", "jets"])
    assert ds.event(5).hits is not None  # an event the file does hold is read as written
    with pytest.raises(GiodError):  # one it does not: refused, never a ValueError from awkward
        ds.event(50)
