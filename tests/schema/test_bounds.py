"""The bounds on one model: refused before anything large is built, in one SchemaError.

A YAML alias stands for its whole anchored node, so a few hundred bytes can
name ten million elements; deep nesting exhausts a recursive composer; a
fixed-array dtype can name more elements than any machine holds.
"""

from __future__ import annotations

import math
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import giod
from giod.errors import SchemaError
from giod.schema import Schema
from giod.schema.parse import (
    MAX_ARRAY_DIMS,
    MAX_ARRAY_ELEMENTS,
    MAX_COLLECTIONS,
    MAX_DEPTH,
    MAX_MEMBERS,
    MAX_MODEL_BYTES,
    MAX_MODEL_MEMBERS,
    MAX_TAGS,
    MAX_TYPES,
)

FAST = settings(max_examples=25, deadline=None)


def alias_bomb(levels: int = 7, fan: int = 10) -> str:
    """A model whose last type expands to ``fan ** levels`` scalars through aliases."""
    lines = ["schema_version: 1", "name: bomb", "types:"]
    lines.append(f"  A0: &a0 [{','.join('x' * fan)}]")
    for i in range(1, levels - 1):
        lines.append(f"  A{i}: &a{i} [{','.join([f'*a{i - 1}'] * fan)}]")
    lines.append(f"  A{levels - 1}: [{','.join([f'*a{levels - 2}'] * fan)}]")
    lines.append(f"collections: {{g: A{levels - 1}}}")
    return "\n".join(lines) + "\n"


BOMB = alias_bomb()


def model(fields: str = "x: float32", extra: str = "") -> str:
    return f"schema_version: 1\nname: m\ntypes:\n  T:\n    fields:\n      {fields}\ncollections: {{t: T}}\n{extra}"


def test_the_bomb_is_small_and_names_ten_million_elements() -> None:
    assert len(BOMB.encode()) < 400
    assert BOMB.count("*a") == 10 * 5 + 10


def test_alias_bomb_is_refused_at_once_in_little_memory() -> None:
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(SchemaError) as info:
            Schema.from_text(BOMB)
        elapsed = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "anchors and aliases" in info.value.message
    assert info.value.line == 4  # the first anchor
    assert elapsed < 1.0
    assert peak < 8 << 20


@FAST
@given(levels=st.integers(2, 9), fan=st.integers(1, 12))
def test_any_alias_is_refused_at_its_first_anchor(levels: int, fan: int) -> None:
    with pytest.raises(SchemaError, match="anchors and aliases") as info:
        Schema.from_text(alias_bomb(levels, fan))
    assert info.value.line == 4


def test_a_lone_anchor_or_a_dangling_alias_is_refused_too() -> None:
    with pytest.raises(SchemaError, match="anchors and aliases") as info:
        Schema.from_text(model("x: &f float32"))
    assert info.value.line == 6
    with pytest.raises(SchemaError, match="anchors and aliases"):
        Schema.from_text(model("x: *nothing"))


def _nested(style: str, depth: int) -> str:
    # ``depth`` levels of lists inside the model's top-level mapping, in the description
    if style == "flow":
        return "schema_version: 1\nname: m\ndescription: " + "[" * depth + "]" * depth + "\n"
    return "schema_version: 1\nname: m\ndescription:\n" + "- " * depth + "x\n"


@FAST
@given(style=st.sampled_from(["flow", "block"]), depth=st.integers(1, 3 * MAX_DEPTH))
def test_nesting_is_bounded(style: str, depth: int) -> None:
    with pytest.raises(SchemaError) as info:
        Schema.from_text(_nested(style, depth))
    if depth + 1 > MAX_DEPTH:  # the top-level mapping is the first level
        assert f"nested deeper than {MAX_DEPTH} levels" in info.value.message
        assert info.value.line == (3 if style == "flow" else 4)
    else:
        assert "description: expected text, got a list" in info.value.message


@pytest.mark.parametrize("style", ["flow", "block"])
def test_ten_thousand_levels_are_one_schema_error(style: str) -> None:
    # This thread's CPU time, not wall time; it still swells on a loaded machine (0.25 s alone,
    # 1.5 s under the whole suite), so the bound is 20x: a quadratic scan would be ~100x.
    # PyYAML's scanner looks 1,024 characters ahead for a flow key, so the cost stops growing
    # there: 100,000 levels cost what 1,000 do.
    t0 = time.thread_time()
    with pytest.raises(SchemaError, match="nested deeper"):
        Schema.from_text(_nested(style, 10_000))
    assert time.thread_time() - t0 < 5.0


_DIMS = st.lists(st.integers(1, 2**40), min_size=1, max_size=2 * MAX_ARRAY_DIMS)


@FAST
@given(shape=_DIMS)
def test_array_shapes_are_bounded(shape: list[int]) -> None:
    dtype = "float32" + "".join(f"[{n}]" for n in shape)
    fits = len(shape) <= MAX_ARRAY_DIMS and math.prod(shape) <= MAX_ARRAY_ELEMENTS
    text = model(f"x: {dtype}")
    if fits:
        assert Schema.from_text(text).types["T"].fields["x"].shape == tuple(shape)
        return
    with pytest.raises(SchemaError) as info:
        Schema.from_text(text)
    assert info.value.line == 6
    assert "at most" in info.value.message and dtype in info.value.message


def test_a_billion_by_a_billion_is_refused() -> None:
    with pytest.raises(SchemaError, match=f"1,000,000,000,000,000,000 elements; at most {MAX_ARRAY_ELEMENTS:,}"):
        Schema.from_text(model("x: float32[1000000000][1000000000]"))
    # tags are scalars, but are checked the same way
    with pytest.raises(SchemaError, match=f"at most {MAX_ARRAY_ELEMENTS:,}"):
        Schema.from_text(model(extra="tags: {t2: 'float32[1000000000]'}\n"))


def test_text_over_the_byte_bound_is_refused_before_it_is_read() -> None:
    padding = "#" * (MAX_MODEL_BYTES + 1) + "\n"
    with pytest.raises(SchemaError, match=f"over {MAX_MODEL_BYTES:,} bytes"):
        Schema.from_text(model() + padding)
    # bytes, not characters: three-byte characters fill the bound a third as fast
    wide = "# " + "€" * (MAX_MODEL_BYTES // 3 + 1) + "\n"
    assert len(model() + wide) < MAX_MODEL_BYTES
    with pytest.raises(SchemaError, match="bytes"):
        Schema.from_text(model() + wide)
    assert Schema.from_text(model() + "#" * (MAX_MODEL_BYTES - len(model()) - 1) + "\n").name == "m"


def test_a_file_over_the_byte_bound_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(model() + "#" * (4 * MAX_MODEL_BYTES) + "\n")
    with pytest.raises(SchemaError, match="bytes") as info:
        Schema.from_yaml(path)
    assert info.value.source == str(path)


def _members(n: int, kind: str = "float32") -> dict[str, str]:
    return {f"f{i}": kind for i in range(n)}


def _dict(types: dict, collections: dict | None = None, tags: dict | None = None) -> dict:
    d = {"schema_version": 1, "name": "m", "types": types,
         "collections": collections if collections is not None else {"t": next(iter(types))}}
    if tags is not None:
        d["tags"] = tags
    return d


@pytest.mark.parametrize("case, says", [
    ("types", f"types: {MAX_TYPES + 1:,} entries; at most {MAX_TYPES:,}"),
    ("fields", f"types.T.fields: {MAX_MEMBERS + 1:,} entries; at most {MAX_MEMBERS:,}"),
    ("members", f"types.T: 600 fields and 600 relations; at most {MAX_MEMBERS:,} members"),
    ("collections", f"collections: {MAX_COLLECTIONS + 1:,} entries; at most {MAX_COLLECTIONS:,}"),
    ("tags", f"tags: {MAX_TAGS + 1:,} entries; at most {MAX_TAGS:,}"),
    ("model", f"more than {MAX_MODEL_MEMBERS:,} fields, relations and tags"),
])
def test_counts_are_bounded(case: str, says: str) -> None:
    one = {"fields": {"x": "float32"}}
    if case == "types":
        d = _dict({f"T{i}": one for i in range(MAX_TYPES + 1)})
    elif case == "fields":
        d = _dict({"T": {"fields": _members(MAX_MEMBERS + 1)}})
    elif case == "members":
        rel = {f"r{i}": {"to": "t"} for i in range(600)}
        d = _dict({"T": {"fields": _members(600), "relations": rel}})
    elif case == "collections":
        d = _dict({"T": one}, {f"c{i}": "T" for i in range(MAX_COLLECTIONS + 1)})
    elif case == "tags":
        d = _dict({"T": one}, tags=_members(MAX_TAGS + 1))
    else:
        per_type = MAX_MEMBERS
        n_types = MAX_MODEL_MEMBERS // per_type + 1
        d = _dict({f"T{i}": {"fields": _members(per_type)} for i in range(n_types)})
    with pytest.raises(SchemaError) as info:
        Schema.from_dict(d)
    assert says in info.value.message


def test_a_model_at_the_bounds_is_valid() -> None:
    d = _dict({"T": {"fields": _members(MAX_MEMBERS - 1), "relations": {"r": {"to": "t"}}}},
              tags=_members(MAX_TAGS))
    d["types"]["U"] = {"fields": {"a": "float32" + "[2]" * MAX_ARRAY_DIMS, "b": f"uint8[{MAX_ARRAY_ELEMENTS}]"}}
    d["collections"]["u"] = "U"
    schema = Schema.from_dict(d)
    assert len(schema.types["T"].fields) == MAX_MEMBERS - 1 and len(schema.tags) == MAX_TAGS


def test_a_model_whose_stored_text_would_be_over_the_bound_is_not_registered(tmp_path: Path) -> None:
    # From a dict, nothing bounds the text; the federation stores the canonical YAML, which must read back.
    n = min(MAX_ARRAY_ELEMENTS, MAX_MODEL_BYTES // 4)  # each default value takes at least 4 bytes of YAML
    default = [0.5] * n
    schema = Schema.from_dict(_dict({"T": {"fields": {"x": {"type": f"float64[{n}]",
                                                              "default": default}}}}))
    assert len(schema.to_yaml().encode()) > MAX_MODEL_BYTES
    fed = giod.open(tmp_path / "fed", create=True)
    version = fed.version
    with pytest.raises(SchemaError, match=f"over {MAX_MODEL_BYTES:,} bytes"):
        fed.create_dataset("big", schema)
    assert fed.datasets() == [] and fed.version == version
    with pytest.raises(giod.errors.NotFound):
        fed.catalog.schema(1)
    fed.close()


@FAST
@given(text=st.text(max_size=40))
def test_any_text_is_a_model_or_one_schema_error(text: str) -> None:
    # an unprintable character is refused by the YAML reader as soon as it is made (was a raw ReaderError)
    try:
        Schema.from_text(text, source="any")
    except SchemaError:
        pass


def test_an_unprintable_character_is_a_schema_error() -> None:
    with pytest.raises(SchemaError, match="invalid YAML"):
        Schema.from_text("name: x\x1f\n", source="any")
