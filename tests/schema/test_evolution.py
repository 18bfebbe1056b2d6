"""Schema evolution: golden old/new cases, and reading old Parquet data with a new model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from giod.errors import DataError, NotFound, SchemaError
from giod.schema import TAG_CONTAINER, FieldDef, Schema
from giod.schema.adapt import source_name
from giod.schema.evolution import diff, source_field
from tests.schema.strategies import events_for

GOLDEN = Path(__file__).resolve().parent / "golden"
CASES = sorted(p.name for p in GOLDEN.iterdir() if p.is_dir())


def load_case(case: str) -> tuple[Schema, Schema, list[str]]:
    folder = GOLDEN / case
    old = Schema.from_yaml(folder / "old.yaml")
    new = Schema.from_yaml(folder / "new.yaml")
    expect = (folder / "expect.txt").read_text().splitlines()
    return old, new, expect


def test_golden_cases_cover_every_kind_of_change() -> None:
    kinds = {type(c).__name__ for case in CASES for c in diff(*load_case(case)[:2])}
    assert len(CASES) >= 8
    for kind in (
        "FieldAdded", "FieldWithoutDefault", "FieldRenamed", "FieldWidened", "FieldRemoved",
        "DtypeChanged", "ShapeChanged", "RelationAdded", "RelationRemoved", "RelationChanged",
        "CollectionAdded", "CollectionRemoved", "CollectionMoved", "CollectionRetyped",
        "ContainerAdded", "TypeAdded", "ModelRenamed", "DocChanged", "RenameAmbiguous",
    ):  # fmt: skip
        assert kind in kinds, f"no golden case exercises {kind}"


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str) -> None:
    old, new, expect = load_case(case)
    assert expect[0] == "ok" or expect[0].startswith("error: "), f"bad expect.txt in {case}"
    if expect[0] == "ok":
        assert new.check_evolution(old) == expect[1:]
    else:
        with pytest.raises(SchemaError) as info:
            new.check_evolution(old)
        assert expect[0].removeprefix("error: ") in info.value.message


def test_unchanged_model_has_no_changes() -> None:
    old, _, _ = load_case("full_evolution")
    assert old.check_evolution(Schema.from_yaml(old.to_yaml())) == []


def test_refused_changes_are_all_named_in_one_error() -> None:
    old, new, _ = load_case("full_evolution")
    with pytest.raises(SchemaError) as info:
        old.check_evolution(new)  # backwards: narrowing, fields without defaults
    message = info.value.message
    assert "Hit.energy is new but has no default" in message
    assert "field Track.pt: float64 -> float32 is not a widening" in message
    assert "relation Track.seed" not in message  # a removal is allowed


def test_source_field_prefers_name_then_alias() -> None:
    old = {"x": FieldDef("x", "float32"), "y": FieldDef("y", "float32")}
    assert source_field(FieldDef("x", "float64"), old) == old["x"]
    assert source_field(FieldDef("z", "float32", aliases=("y",)), old) == old["y"]
    assert source_field(FieldDef("z", "float32", aliases=("w",)), old) is None
    assert source_field(FieldDef("x", "float32", aliases=("y",)), old) == ("x", "y")


# -- reading old data with the new model ----------------------------------------------

OLD_EVENTS: list[dict[str, Any]] = [
    {
        "hits": [
            {"energy": 1.25, "layer": 3, "cov": [[1, 2], [3, 4]], "junk": 7},
            {"energy": 2.5, "layer": 255, "cov": [[5, 6], [7, 8]], "junk": -1},
        ],
        "tracks": [{"pt": 40.5, "charge": -1, "hits": [1, 0]}],
        "njets": 2,
        "lead_pt": 55.25,
    },
    {"hits": [], "tracks": [], "njets": 0, "lead_pt": 0.0},
    {
        "hits": [{"energy": 0.5, "layer": 0, "cov": [[0, 0], [0, 1]], "junk": 0}],
        "tracks": [{"pt": 10.0, "charge": 1, "hits": [0]}, {"pt": 3.5, "charge": 1, "hits": []}],
        "njets": -3,
        "lead_pt": 1.5,
    },
]


def write_old_files(old: Schema, tmp_path: Path, events: list[dict[str, Any]]) -> dict[str, Path]:
    paths = {}
    for container in old.containers:
        table = pa.Table.from_pylist(events, schema=old.arrow_schema(container))
        paths[container] = tmp_path / f"{container}.parquet"
        # Small row groups so that adapt_table sees several chunks.
        pq.write_table(table, paths[container], row_group_size=2)
    return paths


def test_old_parquet_read_with_new_model(tmp_path: Path) -> None:
    old, new, _ = load_case("full_evolution")
    paths = write_old_files(old, tmp_path, OLD_EVENTS)

    raw = new.adapt_table(pq.read_table(paths["raw"]), "raw", old)
    assert raw.schema.equals(new.arrow_schema("raw"), check_metadata=True)
    hits = [h for event in raw.to_pylist() for h in event["hits"]]
    old_hits = [h for event in OLD_EVENTS for h in event["hits"]]
    assert [h["e"] for h in hits] == [h["energy"] for h in old_hits]
    assert [h["layer"] for h in hits] == [h["layer"] for h in old_hits]
    assert [h["cov"] for h in hits] == [h["cov"] for h in old_hits]
    assert all(h["t"] == [1.5, 2.5, 3.5] and h["ok"] is True for h in hits)
    assert all("junk" not in h and "energy" not in h for h in hits)
    assert [len(e["hits"]) for e in raw.to_pylist()] == [len(e["hits"]) for e in OLD_EVENTS]

    reco = new.adapt_table(pq.read_table(paths["reco"]), "reco", old)
    assert reco.schema.equals(new.arrow_schema("reco"), check_metadata=True)
    rows = reco.to_pylist()
    tracks = [t for row in rows for t in row["tracks"]]
    old_tracks = [t for event in OLD_EVENTS for t in event["tracks"]]
    assert [(t["pt"], t["charge"], t["hits"]) for t in tracks] == [
        (t["pt"], t["charge"], t["hits"]) for t in old_tracks
    ]
    assert all(t["chi2"] == -1.0 and t["seed"] == -1 and t["parents"] == [] for t in tracks)
    assert [row["vertices"] for row in rows] == [[]] * len(OLD_EVENTS)

    tags = new.adapt_table(pq.read_table(paths[TAG_CONTAINER]), TAG_CONTAINER, old)
    assert tags.schema.equals(new.arrow_schema(TAG_CONTAINER), check_metadata=True)
    assert tags.column("n_jets").to_pylist() == [e["njets"] for e in OLD_EVENTS]
    assert tags.column("lead_pt").to_pylist() == [e["lead_pt"] for e in OLD_EVENTS]
    assert tags.column("ht").to_pylist() == [0.0] * len(OLD_EVENTS)


def test_projection_keeps_only_the_columns_read(tmp_path: Path) -> None:
    old, new, _ = load_case("full_evolution")
    paths = write_old_files(old, tmp_path, OLD_EVENTS)
    tags = new.adapt_table(
        pq.read_table(paths[TAG_CONTAINER], columns=["njets"]), TAG_CONTAINER, old
    )
    assert tags.column_names == ["n_jets"]
    assert tags.column("n_jets").type == pa.int32()
    assert tags.column("n_jets").to_pylist() == [e["njets"] for e in OLD_EVENTS]


def test_columns_argument_selects_and_fills_new_columns(tmp_path: Path) -> None:
    old, new, _ = load_case("full_evolution")
    paths = write_old_files(old, tmp_path, OLD_EVENTS)
    reco = new.adapt_table(pq.read_table(paths["reco"]), "reco", old, columns=["tracks"])
    assert reco.column_names == [
        "tracks"
    ]  # 'vertices' exists in the new layout but was not asked for
    nothing = pq.read_table(paths[TAG_CONTAINER], columns=[])
    tags = new.adapt_table(nothing, TAG_CONTAINER, old, columns=["ht"])
    assert tags.column("ht").to_pylist() == [0.0] * len(OLD_EVENTS)
    with pytest.raises(DataError, match="njets"):
        new.adapt_table(nothing, TAG_CONTAINER, old, columns=["n_jets"])
    with pytest.raises(NotFound, match="no column 'njets'"):
        new.adapt_table(nothing, TAG_CONTAINER, old, columns=["njets"])


def test_sub_field_projection_keeps_only_the_members_read(tmp_path: Path) -> None:
    old, new, _ = load_case("full_evolution")
    paths = write_old_files(old, tmp_path, OLD_EVENTS)
    path = source_name(new, old, "hits.e")
    assert path == "hits.energy"
    head, member = path.split(".")
    table = pq.ParquetFile(paths["raw"]).read(columns=[f"{head}.list.element.{member}"])
    raw = new.adapt_table(table, "raw", old)
    hits = raw.column("hits").type.value_type
    assert [hits.field(i).name for i in range(hits.num_fields)] == ["e"]
    assert hits.field("e").type == pa.float64()
    assert [[h["e"] for h in row["hits"]] for row in raw.to_pylist()] == [
        [h["energy"] for h in e["hits"]] for e in OLD_EVENTS
    ]


def test_source_name_maps_new_names_to_old() -> None:
    old, new, _ = load_case("full_evolution")
    assert source_name(new, old, "n_jets") == "njets"
    assert source_name(new, old, "ht") is None
    assert source_name(new, old, "tracks") == "tracks"
    assert source_name(new, old, "vertices") is None
    assert source_name(new, old, "tracks.hits") == "tracks.hits"
    assert source_name(new, old, "tracks.seed") is None
    assert source_name(new, old, "hits.t") is None


def test_sliced_tables_adapt_like_whole_ones(tmp_path: Path) -> None:
    old, new, _ = load_case("full_evolution")
    paths = write_old_files(old, tmp_path, OLD_EVENTS)
    for container in old.containers:
        table = pq.read_table(paths[container])
        whole = new.adapt_table(table, container, old)
        assert new.adapt_table(table.slice(1, 2), container, old).equals(whole.slice(1, 2))
        assert new.adapt_table(table.slice(2), container, old).to_pylist() == whole.to_pylist()[2:]


def test_same_model_is_identity(tmp_path: Path) -> None:
    old, _, _ = load_case("full_evolution")
    paths = write_old_files(old, tmp_path, OLD_EVENTS)
    table = pq.read_table(paths["raw"])
    assert old.adapt_table(table, "raw", old).equals(table)


def test_refused_evolution_refuses_to_adapt(tmp_path: Path) -> None:
    old, new, _ = load_case("narrow_dtype")
    table = pa.Table.from_pylist([{"tracks": []}], schema=old.arrow_schema("reco"))
    with pytest.raises(SchemaError, match="not a widening"):
        new.adapt_table(table, "reco", old)


def test_data_not_matching_its_model_is_a_data_error() -> None:
    old, new, _ = load_case("full_evolution")
    not_objects = pa.table({"tracks": pa.array([1, 2])})
    with pytest.raises(DataError, match="expected a list of structs"):
        new.adapt_table(not_objects, "reco", old)
    bad_member = pa.table({"tracks": pa.array([[{"pt": "fast", "charge": 1, "hits": []}]])})
    with pytest.raises(DataError, match="column 'tracks'"):
        new.adapt_table(bad_member, "reco", old)


# -- every allowed golden case, on random old data ----------------------------------------


def expected_member(field: FieldDef, old_fields: dict[str, FieldDef], obj: dict[str, Any]) -> Any:
    """What a new field reads for one old object, computed the slow, obvious way."""
    src = source_field(field, old_fields)
    if src is None:
        value = np.broadcast_to(np.asarray(field.default, dtype=field.dtype), field.shape)
        return value.tolist()
    return obj[src.name]


def expected_rows(old: Schema, new: Schema, container: str, events: list[dict]) -> list[dict]:
    rows = []
    for event in events:
        row: dict[str, Any] = {}
        if container == TAG_CONTAINER:
            for tag in new.tags.values():
                row[tag.name] = expected_member(tag, old.tags, event)
        for name in new.containers[container]:
            if name not in old.collections:
                row[name] = []
                continue
            old_type, new_type = old.collection_type(name), new.collection_type(name)
            objects = []
            for obj in event[name]:
                out = {
                    f.name: expected_member(f, old_type.fields, obj)
                    for f in new_type.fields.values()
                }
                for rel in new_type.relations.values():
                    out[rel.name] = obj.get(rel.name, [] if rel.many else -1)
                objects.append(out)
            row[name] = objects
        rows.append(row)
    return rows


OK_CASES = [c for c in CASES if load_case(c)[2][0] == "ok"]


@pytest.mark.parametrize("case", OK_CASES)
@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_allowed_cases_adapt_random_old_data(
    case: str, data: st.DataObject, tmp_path: Path
) -> None:
    old, new, _ = load_case(case)
    events = data.draw(events_for(old, 3, max_objects=3))
    for container in new.containers:
        if container not in old.containers:
            continue
        table = pa.Table.from_pylist(events, schema=old.arrow_schema(container))
        path = tmp_path / f"{container}.parquet"
        pq.write_table(table, path, row_group_size=2)
        adapted = new.adapt_table(pq.read_table(path), container, old)
        assert adapted.schema.equals(new.arrow_schema(container), check_metadata=True)
        assert adapted.to_pylist() == expected_rows(old, new, container, events)
