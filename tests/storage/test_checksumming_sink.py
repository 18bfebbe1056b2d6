"""A checksumming sink hands a local file its large writes in pieces: the same bytes, the same checksum."""

from __future__ import annotations

from pathlib import Path

import awkward as ak
import google_crc32c
import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

import giod
from giod.storage.checksum import Checksum, ChecksummingSink
from giod.storage.pending import LOCAL_PIECE, LocalPending
from giod.store.consistency import fsck
from giod.testing import synthetic


class _Recording:
    """A pending file that keeps what it is given, write by write."""

    def __init__(self, piece: int | None):
        self.piece = piece
        self.writes: list[bytes] = []

    def write(self, data: bytes | memoryview) -> int:
        self.writes.append(bytes(data))
        return len(data)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=12), st.one_of(st.none(), st.integers(min_value=1, max_value=64)))
def test_pieces_carry_the_same_bytes_and_checksum(chunks: list[bytes], piece: int | None) -> None:
    target = _Recording(piece)
    sink = ChecksummingSink(target)
    for chunk in chunks:
        assert sink.write(chunk) == len(chunk)
    whole = b"".join(chunks)
    assert b"".join(target.writes) == whole
    assert sink.checksum.size == len(whole) == sink.tell()
    assert sink.checksum.hexdigest() == f"crc32c:{google_crc32c.value(whole):08x}"
    if piece is not None:
        assert all(len(w) <= piece for w in target.writes)
    else:  # a pending file without pieces gets each write whole
        assert target.writes == [c for c in chunks]


def test_a_local_file_gets_a_large_write_in_pieces(tmp_path: Path, monkeypatch) -> None:
    sizes: list[int] = []
    real = LocalPending.write
    monkeypatch.setattr(LocalPending, "write", lambda self, data: (sizes.append(len(data)), real(self, data))[1])
    data = np.random.default_rng(1).integers(0, 256, size=3 * LOCAL_PIECE + 17, dtype=np.uint8)
    pending = LocalPending(tmp_path, "a/b.bin")
    sink = ChecksummingSink(pending)
    sink.write(pa.py_buffer(data))
    sink.write(b"tail")
    pending.publish()
    assert sizes == [LOCAL_PIECE] * 3 + [17, 4]
    on_disk = (tmp_path / "a/b.bin").read_bytes()
    assert on_disk == data.tobytes() + b"tail"
    expected = Checksum()
    expected.update(on_disk)
    assert sink.checksum.hexdigest() == expected.hexdigest()


def test_raw_containers_written_in_pieces_read_back_verified(tmp_path: Path) -> None:
    # min_savings near 1: every container raw, its cluster buffers (several MB) well above a piece
    fed = giod.open(tmp_path / "fed", create=True)
    ds = fed.create_dataset("d", synthetic.schema())
    events = synthetic.events(3000, seed=3)
    with ds.writer(min_savings=0.99) as w:
        w.append(events)
    records = [c for db in ds.databases() for c in db.containers]
    assert records and max(c.size for c in records) > 4 * LOCAL_PIECE
    report = fsck(fed.store)  # every replica read and checked against its catalog checksum
    assert not report.damaged and not report.problems
    back = ds.read(["cells", "hits"])
    for field in ("cells", "hits"):  # the raw containers
        assert ak.to_list(ak.num(back[field])) == ak.to_list(ak.num(events[field]))
        for member in ak.fields(events[field]):
            got, want = ak.flatten(back[field][member], axis=None), ak.flatten(events[field][member], axis=None)
            assert np.array_equal(ak.to_numpy(got), ak.to_numpy(want), equal_nan=True), (field, member)
    fed.close()
