"""Malformed models: each must raise one SchemaError at the right line with a clear message.

Each case marks the line the error must point at with ``# <-``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from giod.errors import SchemaError
from giod.schema import Schema

MARK = "# <-"

CASES: dict[str, tuple[str, str]] = {
    "unknown_dtype": (
        """\
schema_version: 1
name: m
types:
  Track:
    fields:
      pt: float31  # <-
collections:
  tracks: Track
""",
        (
            "types.Track.fields.pt: unknown dtype 'float31' (expected one of int8, int16, int32, "
            "int64, uint8, uint16, uint32, uint64, float32, float64, bool, optionally with [N] "
            "for a fixed-size array, or string)"
        ),
    ),
    "undefined_collection_type": (
        """\
schema_version: 1
name: m
types:
  Track: {fields: {pt: float32}}
  TrackerHit: {fields: {x: float32}}
collections:
  hits: TrackerHit
  tracks: Trak  # <-
""",
        "collections.tracks: type 'Trak' is not defined (defined types: Track, TrackerHit)",
    ),
    "missing_relation_target": (
        """\
schema_version: 1
name: m
types:
  Hit: {fields: {x: float32}}
  Track:
    fields: {pt: float32}
    relations:
      hits:
        many: true
        to: hitz  # <-
collections: {hits: Hit, tracks: Track}
""",
        "relation Track.hits: target collection 'hitz' does not exist",
    ),
    "collection_in_two_containers": (
        """\
schema_version: 1
name: m
types:
  Hit: {fields: {x: float32}}
collections: {hits: Hit, more: Hit}
containers:
  raw: [hits]
  reco:
    - more
    - hits  # <-
""",
        "containers: collection 'hits' is in both 'raw' and 'reco'",
    ),
    "collection_in_no_container": (
        """\
schema_version: 1
name: m
types:
  Hit: {fields: {x: float32}}
collections: {hits: Hit, more: Hit}
containers:  # <-
  raw: [hits]
""",
        "collection 'more' is in no container",
    ),
    "malformed_yaml": (
        """\
schema_version: 1
name: m
types:
  Hit:
    fields:
\tx: float32  # <-
collections: {hits: Hit}
""",
        "invalid YAML",
    ),
    "unquoted_fixed_array_in_flow_mapping": (
        """\
schema_version: 1
name: m
types:
  Hit:
    fields: {cov: float32[6]}  # <-
collections: {hits: Hit}
""",
        "quote a fixed-array dtype",
    ),
    "duplicate_key": (
        """\
schema_version: 1
name: m
types:
  Hit:
    fields:
      x: float32
      y: float32
      x: float64  # <-
collections: {hits: Hit}
""",
        "types.Hit.fields.x: duplicate key 'x' (first given at line 6)",
    ),
    "duplicate_type": (
        """\
schema_version: 1
name: m
types:
  Hit: {fields: {x: float32}}
  Hit: {fields: {y: float32}}  # <-
collections: {hits: Hit}
""",
        "duplicate key 'Hit'",
    ),
    "missing_schema_version": (
        """\
name: m  # <-
types:
  Hit: {fields: {x: float32}}
collections: {hits: Hit}
""",
        "required key 'schema_version' is missing",
    ),
    "unknown_format_version": (
        """\
schema_version: 2  # <-
name: m
types:
  Hit: {fields: {x: float32}}
collections: {hits: Hit}
""",
        "schema_version: unknown format version 2 (expected 1)",
    ),
    "float_format_version": (
        """\
schema_version: 1.0  # <-
name: m
types:
  Hit: {fields: {x: float32}}
collections: {hits: Hit}
""",
        "schema_version: unknown format version 1.0 (expected 1)",
    ),
    "unknown_top_level_key": (
        """\
schema_version: 1
name: m
types:
  Hit: {fields: {x: float32}}
collection: {hits: Hit}  # <-
""",
        (
            "unknown key 'collection' (expected one of: schema_version, name, description, types, "
            "collections, containers, tags); did you mean 'collections'?"
        ),
    ),
    "unknown_field_key": (
        """\
schema_version: 1
name: m
types:
  Hit:
    fields:
      e:
        type: float32
        defualt: 0  # <-
collections: {hits: Hit}
""",
        "types.Hit.fields.e.defualt: unknown key 'defualt'",
    ),
    "reserved_index_suffix": (
        """\
schema_version: 1
name: m
types:
  Hit:
    fields:
      x: float32
      layer_index: int32  # <-
collections: {hits: Hit}
""",
        "field name 'layer_index' ends in '_index', which is reserved",
    ),
    "field_and_relation_share_a_name": (
        """\
schema_version: 1
name: m
types:
  Hit: {fields: {x: float32}}
  Track:
    fields: {hits: int32}
    relations:
      hits: {to: hits, many: true}  # <-
collections: {hits: Hit, tracks: Track}
""",
        "relation 'hits' has the same name as a field of Track",
    ),
    "tag_is_an_array": (
        """\
schema_version: 1
name: m
types:
  Hit: {fields: {x: float32}}
collections: {hits: Hit}
tags:
  njets: int32
  lead: float32[2]  # <-
""",
        "tags.lead: tags are scalars, but 'float32[2]' is a fixed-size array",
    ),
    "container_named_tag": (
        """\
schema_version: 1
name: m
types:
  Hit: {fields: {x: float32}}
collections: {hits: Hit}
containers:
  tag: [hits]  # <-
""",
        "the container name 'tag' is reserved for tags",
    ),
    "bad_container_name": (
        """\
schema_version: 1
name: m
types:
  Hit: {fields: {x: float32}}
collections: {hits: Hit}
containers:
  Raw.Tracker: [hits]  # <-
""",
        "invalid container name 'Raw.Tracker'",
    ),
    "default_out_of_range": (
        """\
schema_version: 1
name: m
types:
  Hit:
    fields:
      layer:
        type: uint8
        default: 300  # <-
collections: {hits: Hit}
""",
        "invalid default 300: 300 is out of range for uint8 (0..255)",
    ),
    "default_wrong_shape": (
        """\
schema_version: 1
name: m
types:
  Hit:
    fields:
      x: float32
      cov: {type: "float32[3]", default: [1, 2]}  # <-
collections: {hits: Hit}
""",
        "expected a scalar or nested lists of shape [3]",
    ),
    "many_not_boolean": (
        """\
schema_version: 1
name: m
types:
  Hit:
    fields: {x: float32}
    relations:
      next:
        to: hits
        many: sometimes  # <-
collections: {hits: Hit}
""",
        "types.Hit.relations.next.many: expected true or false, got the text 'sometimes'",
    ),
    "no_types": (
        """\
schema_version: 1
name: m
types: {}
collections: {hits: Hit}  # <-
""",
        "collections.hits: type 'Hit' is not defined",
    ),
    "nothing_to_store": (
        """\
schema_version: 1  # <-
name: m
types: {T: {fields: {x: float32}}}
""",
        "a model needs at least one collection or tag",
    ),
    "type_without_members": (
        """\
schema_version: 1
name: m
types:
  Hit: {fields: {x: float32}}
  Empty: {description: nothing}  # <-
collections: {hits: Hit}
""",
        "types.Empty: a type needs at least one field or relation",
    ),
    "empty_document": (
        "# nothing but a comment  # <-\n",
        "the model is empty",
    ),
    "alias_names_a_field": (
        """\
schema_version: 1
name: m
types:
  Hit:
    fields:
      x: float32
      y:
        type: float32
        aliases:
          - x  # <-
collections: {hits: Hit}
""",
        "alias 'x' is also the name of a member",
    ),
    "tag_named_like_a_collection": (
        """\
schema_version: 1
name: m
types:
  Hit: {fields: {x: float32}}
collections: {hits: Hit}
tags:
  hits: int32  # <-
""",
        "tag 'hits' has the same name as a collection",
    ),
    "invalid_field_name": (
        """\
schema_version: 1
name: m
types:
  Hit:
    fields:
      2x: float32  # <-
collections: {hits: Hit}
""",
        "invalid field name '2x'",
    ),
    "relation_without_target": (
        """\
schema_version: 1
name: m
types:
  Hit:
    fields: {x: float32}
    relations:
      next: {many: true}  # <-
collections: {hits: Hit}
""",
        "required key 'to' is missing",
    ),
    "unsafe_yaml_tag": (
        """\
schema_version: 1
name: !!python/object:os.system m  # <-
types:
  Hit: {fields: {x: float32}}
collections: {hits: Hit}
""",
        "invalid value",
    ),
    "recursive_alias": (
        """\
schema_version: 1
name: m
types: &loop  # <-
  Hit: {fields: {x: float32}}
  Again: *loop
collections: {hits: Hit}
""",
        "YAML anchors and aliases (&name, *name) are not allowed",
    ),
}


def marked_line(text: str) -> int:
    lines = [i for i, line in enumerate(text.splitlines(), start=1) if MARK in line]
    assert len(lines) == 1, "each case marks exactly one line"
    return lines[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_model(case: str) -> None:
    text, expected = CASES[case]
    with pytest.raises(SchemaError) as info:
        Schema.from_yaml(text)
    error = info.value
    assert expected in error.message
    assert error.source == "<string>"
    assert error.line == marked_line(text), error.message
    assert str(error).startswith(f"<string>:{error.line}: ")


def test_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "model.yaml"
    path.write_text(CASES["unknown_dtype"][0])
    with pytest.raises(SchemaError) as info:
        Schema.from_yaml(path)
    assert info.value.source == str(path)
    assert info.value.line == marked_line(CASES["unknown_dtype"][0])


def test_missing_file_is_a_schema_error(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="cannot read the model file"):
        Schema.from_yaml(tmp_path / "absent.yaml")


def test_dict_errors_have_a_path_but_no_line() -> None:
    model = {
        "schema_version": 1,
        "name": "m",
        "types": {"Hit": {"fields": {"x": "float31"}}},
        "collections": {"hits": "Hit"},
    }
    with pytest.raises(SchemaError) as info:
        Schema.from_dict(model, source="inline")
    assert info.value.line is None
    assert info.value.source == "inline"
    assert info.value.message.startswith("types.Hit.fields.x: unknown dtype 'float31'")


def test_dict_keys_must_be_names() -> None:
    model = {
        "schema_version": 1,
        "name": "m",
        "types": {"Hit": {"fields": {3: "float32"}}},
        "collections": {"hits": "Hit"},
    }
    with pytest.raises(SchemaError, match="invalid field name '3'"):
        Schema.from_dict(model)


def test_yaml_booleans_as_keys_stay_names() -> None:
    # YAML 1.1 reads a bare `on` as true; as a key it must stay the name "on".
    schema = Schema.from_yaml(
        "schema_version: 1\nname: m\ntypes: {Hit: {fields: {on: bool}}}\ncollections: {hits: Hit}\n"
    )
    assert list(schema.types["Hit"].fields) == ["on"]
