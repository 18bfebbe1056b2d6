"""The ``precision`` of float fields: validated in the model, applied when events are stored."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import giod
from giod.errors import SchemaError
from giod.schema import Schema
from giod.schema.precision import round_mantissa
from giod.testing import synthetic

MODEL = """\
schema_version: 1
name: precise
types:
  Hit:
    fields: {x: {type: float32, precision: 10}, y: float32, cov: {type: "float64[3]", precision: 20}}
collections:
  hits: Hit
containers:
  raw: [hits]
tags:
  ht: {type: float32, precision: 8}
"""


def test_precision_is_part_of_the_model() -> None:
    schema = Schema.from_yaml(MODEL)
    fields = schema.collection_type("hits").fields
    assert (fields["x"].precision, fields["y"].precision, fields["cov"].precision) == (10, None, 20)
    assert schema.tags["ht"].precision == 8
    again = Schema.from_yaml(schema.to_yaml())
    assert again.fingerprint == schema.fingerprint and again.tags["ht"].precision == 8
    assert Schema.from_yaml(MODEL.replace(", precision: 10", "")).fingerprint != schema.fingerprint


@pytest.mark.parametrize(("spec", "message"), [
    ("{type: int32, precision: 3}", "precision applies to float32 and float64 fields, not int32"),
    ("{type: float32, precision: 24}", "a whole number from 1 to 23 for float32, got 24"),
    ("{type: float64, precision: 0}", "a whole number from 1 to 52 for float64, got 0"),
    ("{type: float32, precision: true}", "got True"),
    ("{type: float32, precision: '10'}", "got '10'"),
])
def test_a_bad_precision_is_one_clear_error(spec: str, message: str) -> None:
    with pytest.raises(SchemaError, match="types.Hit.fields.y.precision: .*" + message.replace("(", r"\(")):
        Schema.from_yaml(MODEL.replace("y: float32", f"y: {spec}"))


@given(values=hnp.arrays(np.float32, st.integers(0, 64), elements=st.floats(width=32, allow_nan=True)),
       bits=st.integers(1, 23))
def test_rounding_keeps_the_nearest_value_with_that_many_bits(values: np.ndarray, bits: int) -> None:
    out = round_mantissa(values, bits)
    assert out.dtype == np.float32 and out.shape == values.shape
    finite = np.isfinite(values) & np.isfinite(out)
    # the dropped mantissa bits are zero, and the value moved by at most half of its last kept bit
    low = (1 << (23 - bits)) - 1
    assert not np.any(out[finite].view(np.uint32) & np.uint32(low))
    moved = np.abs(out[finite].astype(np.float64) - values[finite].astype(np.float64))
    # (subnormal values have the spacing of the smallest normal one)
    scale = np.maximum(np.abs(values[finite].astype(np.float64)), np.finfo(np.float32).tiny)
    assert np.all(moved <= scale * 2.0 ** -(bits + 1))
    np.testing.assert_array_equal(round_mantissa(out, bits), out)  # rounding twice changes nothing
    same = ~np.isfinite(values)
    np.testing.assert_array_equal(out[same].view(np.uint32), values[same].view(np.uint32))


def test_stored_values_keep_their_precision_and_take_less_room(tmp_path: Path) -> None:
    fed = giod.open(tmp_path / "fed", create=True)
    base = synthetic.schema()
    text = (resources.files("giod.testing") / "synthetic.yaml").read_text()
    hit = "fields: {x: float32, y: float32, z: float32, e: float32, layer: uint8}"
    assert hit in text
    precise = Schema.from_yaml(text.replace(hit, hit.replace("x: float32", "x: {type: float32, precision: 7}")
                                            .replace(" e: float32", " e: {type: float32, precision: 7}")))
    assert precise.collection_type("hits").fields["x"].precision == 7
    events = synthetic.events(3000, seed=4, cells=0, tracks=0, jets=2)[["hits", "run", "event", "njets", "ntracks",
                                                                       "ht", "lead_pt"]]
    sizes = {}
    for name, schema in (("full", base), ("precise", precise)):
        ds = fed.create_dataset(name, schema)
        with ds.writer() as w:
            w.append(events)
        got = ds.read(["hits"])
        flat_x = np.asarray(giod_flat(got.hits.x))
        want = giod_flat(events.hits.x)
        if name == "precise":
            np.testing.assert_array_equal(flat_x, round_mantissa(want, 7))
            np.testing.assert_array_equal(giod_flat(got.hits.y), giod_flat(events.hits.y))  # no precision: as given
        else:
            np.testing.assert_array_equal(flat_x, want)
        sizes[name] = ds.databases()[0].container("raw.tracker").size
    assert sizes["precise"] < 0.9 * sizes["full"]
    fed.close()


def giod_flat(array) -> np.ndarray:
    import awkward as ak

    return ak.to_numpy(ak.flatten(array)).astype(np.float32)
