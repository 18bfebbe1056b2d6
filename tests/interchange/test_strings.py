"""Strings as a field type: schema, storage, ROOT and Parquet out, and where they are refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import uproot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import giod
from giod.errors import DataError, ExpressionError, SchemaError
from giod.interchange import write_parquet, write_root
from giod.schema import Schema

MODEL = {
    "schema_version": 1,
    "name": "labelled",
    "types": {"Muon": {"fields": {"pt": "float32", "label": "string"}}},
    "collections": {"Muon": "Muon"},
    "tags": {"Type": "string", "run": "int32"},
}
# ROOT's char* ends at a NUL; everything else, surrogates aside, is fair game
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=300)


@st.composite
def event_lists(draw: Any) -> list[dict[str, Any]]:
    n = draw(st.integers(1, 6))
    return [
        {
            "Muon": [{"pt": 1.0, "label": draw(TEXT)} for _ in range(draw(st.integers(0, 3)))],
            "Type": draw(TEXT),
            "run": i,
        }
        for i in range(n)
    ]


@pytest.mark.parametrize("fmt", ["arrow", "parquet"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_strings_round_trip(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
                            fmt: str, data: Any) -> None:
    monkeypatch.setenv("GIOD_CONTAINER_FORMAT", fmt)
    tmp = tmp_path_factory.mktemp("strings")
    events = data.draw(event_lists())
    fed = giod.open(str(tmp / "fed"), create=True)
    ds = fed.create_dataset("x", Schema.from_dict(MODEL))
    with ds.writer() as w:
        w.append(events)
    back = ds.read()
    assert back.Type.tolist() == [e["Type"] for e in events]
    assert back.Muon.label.tolist() == [[m["label"] for m in e["Muon"]] for e in events]
    assert ds.select("run >= 1").read().Type.tolist() == [e["Type"] for e in events[1:]]

    write_parquet(tmp / "x.parquet", back, ds.schema)
    table = pq.read_table(tmp / "x.parquet")
    assert table.column("Type").to_pylist() == [e["Type"] for e in events]
    assert [[m["label"] for m in row] for row in table.column("Muon").to_pylist()] == \
        [[m["label"] for m in e["Muon"]] for e in events]

    tags_only = Schema.from_dict({**MODEL, "types": {}, "collections": {}})
    write_root(tmp / "x.root", back[["Type", "run"]], tags_only)
    with uproot.open(tmp / "x.root") as f:
        branch = f["Events"]["Type"]
        assert branch.typename == "char*" and branch.array().tolist() == [e["Type"] for e in events]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres), "remote"])
def any_fed(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A federation on each catalog backend, and through a real giod server on loopback."""
    if request.param == "remote":
        from tests.server.conftest import serve

        for served in serve(tmp_path / "served"):
            f = served.remote()
            yield f
            f.close()
        return
    if request.param == "postgresql":
        from tests.conftest import fresh_postgres_schema

        f = giod.open(fresh_postgres_schema(request), create=True)
        f.add_site("local", str(tmp_path / "site"), 0)
    else:
        f = giod.open(str(tmp_path / "fed"), create=True)
    yield f
    f.close()


def test_strings_on_every_backend(any_fed: Any) -> None:
    ds = any_fed.create_dataset("x", Schema.from_dict(MODEL))
    events = [{"Muon": [{"pt": 1.0, "label": "tight"}], "Type": "GT", "run": 0},
              {"Muon": [], "Type": "TT", "run": 1},
              {"Muon": [{"pt": 2.0, "label": "μ"}, {"pt": 3.0, "label": ""}], "Type": "GG", "run": 2}]
    with ds.writer() as w:
        w.append(events)
    back = any_fed.dataset("x").read()
    assert back.Type.tolist() == ["GT", "TT", "GG"]
    assert back.Muon.label.tolist() == [["tight"], [], ["μ", ""]]
    picked = any_fed.dataset("x").select("run >= 1 and nMuon >= 1").read()
    assert picked.Type.tolist() == ["GG"] and picked.Muon.label.tolist() == [["μ", ""]]


def test_where_strings_cannot_go(tmp_path: Path) -> None:
    for bad, why in [("string[3]", r"unknown dtype 'string\[3\]'"), ({"type": "string", "default": "x"}, "no default")]:
        model = {**MODEL, "tags": {"Type": bad}}
        with pytest.raises(SchemaError, match=why):
            Schema.from_dict(model)

    fed = giod.open(str(tmp_path / "fed"), create=True)
    ds = fed.create_dataset("x", Schema.from_dict(MODEL))
    with pytest.raises(ExpressionError, match="has type string, which selections cannot use"):
        ds.select("Type > 1")
    with pytest.raises(ExpressionError, match="has type string, which selections cannot use"):
        ds.select("any(Muon.label > 1)")
    with pytest.raises(DataError, match="Type: expected strings, got"), ds.writer() as w:
        w.append({"Muon": [[]], "Type": [3], "run": [0]})
    with pytest.raises(DataError, match="Muon.pt: expected float32, got strings"), \
            ds.writer() as w:
        w.append([{"Muon": [{"pt": "fast", "label": "a"}], "Type": "GT", "run": 0}])
    assert len(fed.dataset("x")) == 0  # nothing half-written

    with ds.writer() as w:
        w.append([{"Muon": [{"pt": 1.0, "label": "a"}], "Type": "GT", "run": 0}])
    with pytest.raises(DataError, match="Muon.label: strings of objects cannot be written to a ROOT tree"):
        write_root(tmp_path / "x.root", ds.read(), ds.schema)
    assert not (tmp_path / "x.root").exists()
