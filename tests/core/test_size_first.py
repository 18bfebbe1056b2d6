"""The size-first setting (``min_savings = 0``): accepted wherever settings are, and its files read back."""

from __future__ import annotations

from pathlib import Path

import awkward as ak
import pyarrow as pa
import pytest

import giod
from giod.testing import synthetic


def _sizes(ds) -> dict[str, int]:
    return {c.name: c.size for c in ds.databases()[0].containers}


def _files(ds) -> dict[str, Path]:
    site = ds.federation.site()
    return {c.name: Path(site.local_path(c.path)) for c in ds.databases()[0].containers}


def test_size_first_compresses_every_container_and_reads_back_the_same(tmp_path: Path) -> None:
    events = synthetic.events(3000, seed=4)
    fed = giod.open(tmp_path / "fed", create=True)
    fast = fed.create_dataset("fast", synthetic.schema())
    small = fed.create_dataset("small", synthetic.schema())
    with fast.writer() as w:
        w.append(events)
    with small.writer(min_savings=0) as w:
        w.append(events)
    before, after = _sizes(fast), _sizes(small)
    # the Gaussian floats of hits and cells are written raw by default, compressed when size comes first
    for name in ("raw.tracker", "raw.calo"):
        assert after[name] < 0.97 * before[name], (name, before[name], after[name])
    assert sum(after.values()) < sum(before.values())
    want = fast.read()
    assert ak.array_equal(small.read(), want)
    assert ak.array_equal(small.read(["hits"]).hits, want.hits)
    for entry in (5, 1234, 2999):  # single events out of compressed batches
        assert ak.to_list(small.event(entry, ["cells"]).cells) == ak.to_list(want.cells[entry])
    # ordinary tools read them as any Arrow IPC file
    for name, path in _files(small).items():
        with pa.memory_map(str(path)) as source:
            assert pa.ipc.open_file(source).read_all().num_rows > 0, name


def test_size_first_from_the_file_and_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = synthetic.events(2000, seed=5)
    fed = giod.open(tmp_path / "fed", create=True)
    fast = fed.create_dataset("fast", synthetic.schema())
    with fast.writer() as w:
        w.append(events)
    (tmp_path / "fed" / "giod.toml").write_text("[giod]\nmin_savings = 0\n")
    by_file = fed.create_dataset("by_file", synthetic.schema())
    with by_file.writer() as w:
        w.append(events)
    (tmp_path / "fed" / "giod.toml").unlink()
    monkeypatch.setenv("GIOD_MIN_SAVINGS", "0.0")
    by_env = fed.create_dataset("by_env", synthetic.schema())
    with by_env.writer() as w:
        w.append(events)
    for ds in (by_file, by_env):
        assert _sizes(ds)["raw.calo"] < 0.97 * _sizes(fast)["raw.calo"]
        assert ak.array_equal(ds.read(["cells"]).cells, fast.read(["cells"]).cells)


def test_a_pass_takes_size_first_too(tmp_path: Path) -> None:
    fed = giod.open(tmp_path / "fed", create=True)
    ds = fed.create_dataset("s", synthetic.schema())
    events = synthetic.events(500, seed=6)
    with ds.writer() as w:
        w.append(events[["cells", "run", "event", "njets", "ntracks", "ht", "lead_pt"]])
    db = ds.databases()[0]
    with ds.add_containers(program="hits", min_savings=0) as p:
        p.write(db, events[["hits"]])
    assert ak.to_list(ds.read(["hits"]).hits) == ak.to_list(events.hits)


@pytest.mark.parametrize("value", [-0.1, 1.0, 1.5, "lots"])
def test_a_share_that_is_none_is_refused(tmp_path: Path, value: object) -> None:
    fed = giod.open(tmp_path / "fed", create=True)
    ds = fed.create_dataset("s", synthetic.schema())
    with pytest.raises(giod.ConfigError, match="min_savings"):
        ds.writer(min_savings=value)
