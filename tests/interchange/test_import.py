"""import_root: ROOT file -> dataset, through a real embedded federation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import awkward as ak
import pytest
import uproot

from giod.errors import ConfigError, SchemaError
from giod.interchange import import_root, inspect_tree, write_root
from tests.interchange.conftest import write_tree

pytest.importorskip("giod.federation", reason="the federation layer is not available")


@pytest.fixture
def fed(tmp_path: Path) -> Iterator[Any]:
    import giod

    f = giod.open(tmp_path / "fed", create=True)
    yield f
    f.close()


@pytest.mark.rootdata
def test_import_creates_then_appends(fed: Any, hzz: Path) -> None:
    seen: list[tuple[int, int]] = []
    report = import_root(fed, hzz, "hzz", progress=lambda done, total: seen.append((done, total)), step_size=1000)
    with uproot.open(hzz) as f:
        n = f["events"].num_entries
        px = f["events"]["Jet_Px"].array()
    assert report.created and report.n_events == n and report.n_chunks == 3
    assert report.collections == ("Electron", "Jet", "Muon", "Photon")
    assert seen == [(1000, n), (2000, n), (n, n)]

    ds = fed.dataset("hzz")
    assert len(ds) == n
    assert ds.schema == inspect_tree(hzz).schema
    assert ak.array_equal(ds.read().Jet.Px, px)

    again = import_root(ds, hzz, "hzz", append=True)  # a Dataset works as well as a Federation
    assert not again.created and again.n_events == n
    assert len(fed.dataset("hzz")) == 2 * n


def test_relations_reach_the_dataset(fed: Any, tmp_path: Path) -> None:
    import numpy as np

    path = write_tree(
        tmp_path / "small.root",
        {
            "Events": {
                "Jet": ak.zip(
                    {
                        "pt": ak.Array([[30.0, 20.0], [10.0]]),
                        "muonIdx": ak.values_astype(ak.Array([[1, 7], [0]]), np.int32),
                    }
                ),
                "Muon": ak.zip({"pt": ak.Array([[5.0, 6.0], []])}),
                "run": np.array([1, 1], dtype=np.uint32),
            }
        },
    )
    report = import_root(fed, path, "small")
    assert report.n_events == 2 and report.tags == ("run",)
    events = fed.dataset("small").read()
    # the relation navigates; the index 7 (no such muon) reads as "no muon"
    assert events.Jet.muon.tolist() == [[{"pt": 6.0}, None], [None]]
    assert events.Jet.muon_index.tolist() == [[1, -1], [-1]]
    assert events.run.tolist() == [1, 1]

    # the field keeps the indices as the file had them, and so does the export
    assert events.Jet.muonIdx.tolist() == [[1, 7], [0]]
    out = tmp_path / "out.root"
    write_root(out, events, fed.dataset("small").schema)
    with uproot.open(out) as f:
        assert f["Events"]["Jet_muonIdx"].array().tolist() == [[1, 7], [0]]


def test_refusals(fed: Any, tmp_path: Path) -> None:
    import numpy as np

    a = write_tree(tmp_path / "a.root", {"Events": {"Jet": ak.zip({"pt": ak.Array([[1.0], []])})}})
    b = write_tree(tmp_path / "b.root", {"Events": {"Jet": ak.zip({"eta": ak.Array([[1.0], []])})}})
    import_root(fed, a, "jets")
    with pytest.raises(SchemaError, match="dataset jets exists with a schema different"):
        import_root(fed, b, "jets")
    assert len(fed.dataset("jets")) == 2
    with pytest.raises(ConfigError, match="dataset 'jets' was given but 'other' was named"):
        import_root(fed.dataset("jets"), a, "other")

    # a file giod wrote comes back into a dataset of the same schema
    out = tmp_path / "out.root"
    write_root(out, fed.dataset("jets").read(), fed.dataset("jets").schema)
    assert import_root(fed, out, "jets").n_events == 2
    assert np.array_equal(ak.flatten(fed.dataset("jets").read().Jet.pt).to_numpy(), [1.0, 1.0])


def test_failed_import_leaves_no_dataset(tmp_path, monkeypatch):
    import pytest as _pytest

    import giod
    from giod.interchange import nanoaod
    from giod.interchange.export import write_root
    from giod.testing import synthetic

    src = tmp_path / "small.root"
    write_root(src, synthetic.events(50, seed=1)[["jets", "ht", "njets"]], _jets_only_schema())
    real = nanoaod._read_tree  # what import_root reads the tree it opened with

    def broken(*args, **kwargs):
        for i, chunk in enumerate(real(*args, **kwargs)):
            if i == 0:
                yield chunk
            raise giod.DataError("the file ends early")

    monkeypatch.setattr(nanoaod, "_read_tree", broken)
    fed = giod.open(tmp_path / "fed", create=True)
    with _pytest.raises(giod.DataError):
        nanoaod.import_root(fed, src, "small", step_size=10)
    assert "small" not in fed.datasets()


def _jets_only_schema():
    import giod

    return giod.Schema.from_yaml(
        "schema_version: 1\nname: jets\ntypes:\n  Jet: {fields: {pt: float32, eta: float32, phi: float32, "
        "mass: float32}}\ncollections: {jets: Jet}\ntags: {ht: float32, njets: int32}\n")
