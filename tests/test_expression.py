"""Parsing, precedence and evaluation of tag-selection expressions."""

from __future__ import annotations

import pickle
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from giod.errors import DataError, ExpressionError
from giod.expression import Expression, match_all, parse

FIELDS = {"a": "int32", "b": "int64", "x": "float64", "y": "float32", "f": "bool", "g": "bool"}
SIZE = 400


@pytest.fixture(scope="module")
def columns() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(20240611)
    x = rng.uniform(-1.0, 1.0, SIZE)
    x[rng.choice(SIZE, 8, replace=False)] = np.nan
    return {
        "a": rng.integers(-3, 7, SIZE).astype(np.int32),
        "b": rng.integers(0, 6, SIZE).astype(np.int64),
        "x": x,
        "y": rng.uniform(-2.0, 2.0, SIZE).astype(np.float32),
        "f": rng.random(SIZE) < 0.5,
        "g": rng.random(SIZE) < 0.3,
    }


def _ns(columns: dict[str, np.ndarray]) -> SimpleNamespace:
    """The columns widened the way selections compute: int64 and float64."""
    return SimpleNamespace(
        a=columns["a"].astype(np.int64),
        b=columns["b"],
        x=columns["x"],
        y=columns["y"].astype(np.float64),
        f=columns["f"],
        g=columns["g"],
    )


# Each case: text, and the same predicate written by hand in numpy.
PRECEDENCE = [
    ("a + b * 2 > 10", lambda c: c.a + c.b * 2 > 10),
    ("(a + b) * 2 > 10", lambda c: (c.a + c.b) * 2 > 10),
    ("a - b - 1 > 0", lambda c: (c.a - c.b) - 1 > 0),
    ("a / b / 2 < 0.4", lambda c: (c.a / c.b) / 2 < 0.4),
    ("x ** 2 ** 0.5 > 0.1", lambda c: np.power(c.x, 2**0.5) > 0.1),
    ("-x ** 2 < -0.25", lambda c: -(c.x**2) < -0.25),
    ("-a * b < 0", lambda c: (-c.a) * c.b < 0),
    ("a % 3 == 1", lambda c: np.remainder(c.a.astype(float), 3.0) == 1),
    ("a * 2 - b * 3 % 4 <= 1.5", lambda c: c.a * 2 - np.remainder(c.b * 3.0, 4.0) <= 1.5),
    ("not f and g", lambda c: ~c.f & c.g),
    ("not (f and g)", lambda c: ~(c.f & c.g)),
    ("f or g and not f", lambda c: c.f | (c.g & ~c.f)),
    ("f && g || !f", lambda c: (c.f & c.g) | ~c.f),
    ("not a > 3", lambda c: ~(c.a > 3)),
    ("not not f", lambda c: c.f),
    ("1 < a < 5", lambda c: (1 < c.a) & (c.a < 5)),
    ("0 <= x <= y < 1", lambda c: (0 <= c.x) & (c.x <= c.y) & (c.y < 1)),
    ("a == b == 2", lambda c: (c.a == c.b) & (c.b == 2)),
    ("a in (1, 2, 3)", lambda c: np.isin(c.a, [1, 2, 3])),
    ("a not in (1, 2,)", lambda c: ~np.isin(c.a, [1, 2])),
    ("not a in (1, 2) or f", lambda c: ~np.isin(c.a, [1, 2]) | c.f),
    ("b in (a, a + 1)", lambda c: (c.b == c.a) | (c.b == c.a + 1)),
    ("x between -0.5 and 0.5", lambda c: (-0.5 <= c.x) & (c.x <= 0.5)),
    ("x not between y and 1 and f", lambda c: ~((c.y <= c.x) & (c.x <= 1)) & c.f),
    (
        "abs(x) < 0.5 and sqrt(abs(y)) > 0.3",
        lambda c: (np.abs(c.x) < 0.5) & (np.sqrt(np.abs(c.y)) > 0.3),
    ),
    (
        "min(a, b) >= 2 or max(x, y, 0.5) > 0.9",
        lambda c: (np.minimum(c.a, c.b) >= 2) | (np.fmax(np.fmax(c.x, c.y), 0.5) > 0.9),
    ),
    ("a + b > x * 10 and not g", lambda c: (c.a + c.b > c.x * 10) & ~c.g),
    ("f == (a > 2)", lambda c: c.f == (c.a > 2)),
    ("f != g", lambda c: c.f != c.g),
    ("x / (a - a) > 0", lambda c: c.x / (c.a - c.a).astype(float) > 0),
    ("true and a > 2", lambda c: c.a > 2),
    ("false or not f", lambda c: ~c.f),
    ("a > 2 AND b < 3 OR x > 0.5", lambda c: ((c.a > 2) & (c.b < 3)) | (c.x > 0.5)),
    ("(((a))) > ((2))", lambda c: c.a > 2),
    ("2 * -a > -5", lambda c: 2 * -c.a > -5),
    ("a ** -1 > 0.3", lambda c: np.power(c.a.astype(float), -1.0) > 0.3),
    ("x > .5 and y < 1e0 or a >= 1.", lambda c: ((c.x > 0.5) & (c.y < 1.0)) | (c.a >= 1.0)),
    ("-(a + 1) * -2 == 2 * a + 2", lambda c: -(c.a + 1) * -2 == 2 * c.a + 2),
    ("1 < 2 and f", lambda c: c.f),
]


@pytest.mark.parametrize(("text", "reference"), PRECEDENCE, ids=[t for t, _ in PRECEDENCE])
def test_precedence_matches_hand_written_numpy(columns, text, reference):
    with np.errstate(all="ignore"):
        expected = np.broadcast_to(reference(_ns(columns)), (SIZE,))
    mask = parse(text, FIELDS).evaluate(columns)
    assert mask.dtype == np.bool_ and mask.shape == (SIZE,)
    np.testing.assert_array_equal(mask, expected)
    # The table is only meaningful if the predicates select something, but not everything.
    if not text.startswith(("not not", "-(a + 1)")):
        assert 0 < mask.sum() < SIZE, text


@pytest.mark.parametrize(
    ("text", "reference"), PRECEDENCE[:12], ids=[t for t, _ in PRECEDENCE[:12]]
)
def test_pyarrow_columns_and_filter_agree(columns, text, reference):
    expression = parse(text, FIELDS)
    table = pa.table({name: pa.array(values) for name, values in columns.items()})
    from_arrow = expression.evaluate({name: table[name] for name in table.column_names})
    np.testing.assert_array_equal(from_arrow, expression.evaluate(columns))
    rows = table.append_column("row", pa.array(np.arange(SIZE))).filter(expression.to_pyarrow())
    np.testing.assert_array_equal(rows["row"].to_numpy(), np.flatnonzero(from_arrow))


def test_canonical_form_is_fully_parenthesised():
    expression = parse("not a + 1 * 2 > -b ** 2 and f or x in (1, 2.5)", FIELDS)
    # constant parts are folded: "1 * 2" is computed once, at parse time
    assert str(expression) == ("(((not ((a + 2) > (-(b ** 2)))) and f) or (x in (1, 2.5)))")
    assert str(parse(str(expression), FIELDS)) == str(expression)
    assert str(parse("1 <= a < 3 and x between 0 and 1", FIELDS)) == (
        "((1 <= a < 3) and (x between 0 and 1))"
    )


def test_expression_attributes_equality_and_pickle():
    text = "a >= 2 && x > 0.5"
    expression = parse(text, FIELDS)
    assert isinstance(expression, Expression)
    assert expression.text == text
    assert expression.fields == frozenset({"a", "x"})
    assert repr(expression) == f"Expression({text!r})"
    assert expression == parse("(a >= 2) and (x > 0.5)", FIELDS)
    assert expression != parse("a >= 3 and x > 0.5", FIELDS)
    assert len({expression, parse("(a >= 2) and (x > 0.5)", FIELDS)}) == 1
    assert pickle.loads(pickle.dumps(expression)) == expression
    with pytest.raises(AttributeError):
        expression.text = "other"


def test_dtype_spellings_of_numpy_and_arrow():
    arrow_fields = {name: str(pa.from_numpy_dtype(np.dtype(t))) for name, t in FIELDS.items()}
    assert arrow_fields["x"] == "double" and arrow_fields["y"] == "float"
    assert str(parse("a > 1 and y < 2 and x < 3 and f", arrow_fields)) == str(
        parse("a > 1 and y < 2 and x < 3 and f", FIELDS)
    )


def test_match_all_selects_everything(columns):
    everything = match_all()
    assert everything.fields == frozenset()
    assert everything.evaluate(columns).all() and everything.evaluate(columns).shape == (SIZE,)
    assert everything.evaluate({}, size=3).tolist() == [True, True, True]
    assert everything.may_match({})
    assert str(parse(everything.text, {})) == str(everything) == "true"
    assert pa.table({"v": [1, 2]}).filter(everything.to_pyarrow()).num_rows == 2


def test_nulls_are_never_selected():
    expression = parse("not (a > 1) or x > 0", {"a": "int32", "x": "float64"})
    a = pa.array([0, None, 5, 0], pa.int32())
    x = pa.chunked_array([[1.0, 1.0], [None, -1.0]])
    mask = expression.evaluate({"a": a, "x": x})
    assert mask.tolist() == [True, False, False, True]
    masked = np.ma.MaskedArray([0, 0, 5, 0], mask=[False, True, False, False])
    assert expression.evaluate({"a": masked, "x": np.ones(4)}).tolist() == [
        True,
        False,
        True,
        True,
    ]
    table = pa.table({"a": a, "x": x})
    assert table.filter(expression.to_pyarrow()).num_rows == int(mask.sum())


def test_division_by_zero_gives_inf_and_nan_without_error():
    expression = parse("x / b > 1 or x % b == x % b or sqrt(x - 10) > 0", FIELDS)
    x = np.array([1.0, 0.0, -1.0, 4.0])
    b = np.array([0, 0, 0, 2])
    with np.errstate(all="raise"):  # the expression must not trip the caller's settings
        mask = expression.evaluate({"x": x, "b": b})
    # 1/0 = inf > 1; 0/0 and -1/0 give nan or -inf; 4 % 2 == 4 % 2.
    assert mask.tolist() == [True, False, False, True]


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({"x": np.ones(3)}, "no column given for tag field 'a'"),
        ({"a": np.ones(3, np.int32), "x": np.ones(4)}, "has 4 values, but other columns have 3"),
        ({"a": np.ones((3, 2), np.int32), "x": np.ones(3)}, "one-dimensional"),
        ({"a": np.ones(3), "x": np.ones(3)}, "holds float64 values"),
        ({"a": np.array(["1", "2", "3"]), "x": np.ones(3)}, "holds <U1 values"),
        ({"a": pa.array(["1", "2", "3"]), "x": np.ones(3)}, "column 'a'"),
    ],
)
def test_bad_columns_raise_data_error(columns, message):
    with pytest.raises(DataError, match=message):
        parse("a > 1 and x > 0", FIELDS).evaluate(columns)


def test_constant_expression_needs_a_size():
    with pytest.raises(DataError, match="number of events"):
        parse("1 < 2", {}).evaluate({})
    assert parse("1 > 2", {}).evaluate({"unused": np.zeros(5)}).tolist() == [False] * 5


# -- pruning with (min, max) statistics -----------------------------------------------

MAY_MATCH = [
    ("a == 3", {"a": (4, 9)}, False),
    ("a == 3", {"a": (0, 9)}, True),
    ("a == 3.5", {"a": (0, 9)}, False),
    ("a == 3", {"a": (3.2, 3.9)}, False),
    ("x == 3.5", {"x": (0, 9)}, True),
    ("x > 500", {"x": (0.0, 400.0)}, False),
    ("x > 500", {"x": (0.0, None)}, True),
    ("x > 500", {}, True),
    ("x > 500", {"x": (None, None)}, True),
    ("x < 0", {"x": (float("nan"), 400.0)}, True),
    ("x > 500", {"x": (float("nan"), 400.0)}, False),
    ("abs(a) < 1", {"a": (2, 5)}, False),
    ("abs(a) < 1", {"a": (-2, 5)}, True),
    ("-a > 0", {"a": (1, 2)}, False),
    ("a * b > 50", {"a": (0, 5), "b": (-3, 10)}, False),
    ("a * b < -20", {"a": (-5, 5), "b": (-3, 4)}, False),
    ("a * b < -14", {"a": (-5, 5), "b": (-3, 4)}, True),
    ("x / a > 10", {"x": (0, 5), "a": (1, 2)}, False),
    ("x / a > 10", {"x": (0, 5), "a": (-1, 2)}, True),
    ("a - b > 0", {"a": (0, 3), "b": (3, 8)}, False),
    ("sqrt(x) > 2", {"x": (0, 4)}, False),
    ("sqrt(x) >= 2", {"x": (0, 4)}, True),
    ("min(a, b) > 5", {"a": (0, 3), "b": (0, 100)}, False),
    ("max(a, b) < 0", {"a": (1, 2)}, False),
    ("a % 4 > 4", {}, False),
    ("a % -4 < -4", {}, False),
    ("a % 4 < 0", {}, False),
    ("a ** 2 < 0", {}, False),
    ("x ** 2 < 0", {}, False),
    ("x ** 0.5 < 0", {}, True),  # unknown sign of the base: not analysed
    ("(-a) ** 3 > 0", {"a": (1, 5)}, False),
    ("x ** -1 < 0", {"x": (0.0, 1.0)}, True),  # pow(-0.0, -1) is -inf
    ("a ** 0.5 > 3", {"a": (0, 9)}, True),
    ("a ** 0.5 > 3.01", {"a": (0, 9)}, False),
    ("not (a > 3)", {"a": (4, 9)}, False),
    ("not (x > 3)", {"x": (4, 9)}, True),  # a float field may hold nan
    ("a != 3", {"a": (3, 3)}, False),
    ("x != 3", {"x": (3, 3)}, True),
    ("a in (1, 2)", {"a": (3, 9)}, False),
    ("a in (1, 2, 7)", {"a": (3, 9)}, True),
    ("a not in (1, 2)", {"a": (1, 2)}, True),
    ("a between 10 and 20", {"a": (0, 5)}, False),
    ("a not between 0 and 9", {"a": (0, 5)}, False),
    ("1 < a < 5", {"a": (5, 9)}, False),
    ("f", {"f": (False, False)}, False),
    ("not f", {"f": (True, True)}, False),
    ("f == g", {"f": (True, True), "g": (False, False)}, False),
    ("f or a > 9", {"f": (False, False), "a": (0, 5)}, False),
    ("f or a > 4", {"f": (False, False), "a": (0, 5)}, True),
    ("a > 9 and x > 0", {"a": (0, 5)}, False),
    ("1 > 2", {}, False),
    ("1 < 2", {}, True),
]


@pytest.mark.parametrize(("text", "stats", "expected"), MAY_MATCH, ids=[t for t, _, _ in MAY_MATCH])
def test_may_match(text, stats, expected):
    assert parse(text, FIELDS).may_match(stats) is expected


def test_may_match_is_sound_on_the_example_data(columns):
    stats = {
        name: (values[~np.isnan(values)].min(), values[~np.isnan(values)].max())
        if values.dtype.kind == "f"
        else (values.min(), values.max())
        for name, values in columns.items()
    }
    for text, _ in PRECEDENCE:
        expression = parse(text, FIELDS)
        if expression.evaluate(columns).any():
            assert expression.may_match(stats), text


def test_may_match_rejects_malformed_statistics():
    with pytest.raises(DataError, match="statistics of tag field 'a'"):
        parse("a > 1", FIELDS).may_match({"a": (1, 2, 3)})
    with pytest.raises(DataError, match="statistics of tag field 'a'"):
        parse("a > 1", FIELDS).may_match({"a": ("low", "high")})


def test_filter_pushed_into_a_parquet_scan_matches_evaluate(tmp_path):
    rng = np.random.default_rng(7)
    table = pa.table(
        {
            "njets": pa.array(rng.integers(0, 8, 5000), pa.int32()),
            "ht": pa.array(rng.exponential(300.0, 5000), pa.float32()),
            "fired": pa.array(rng.random(5000) < 0.7),
        }
    )
    path = tmp_path / "tag.parquet"
    pq.write_table(table, path, row_group_size=1000)
    fields = {name: str(table.schema.field(name).type) for name in table.column_names}
    expression = parse("njets >= 2 and ht > 500 and fired or njets in (7,)", fields)
    scanned = pads.dataset(path).to_table(filter=expression.to_pyarrow())
    mask = expression.evaluate({name: table[name] for name in expression.fields})
    assert 0 < scanned.num_rows == int(mask.sum())
    assert scanned.equals(table.filter(pa.array(mask)))


def test_parse_reports_expression_errors_as_giod_errors():
    with pytest.raises(ExpressionError) as caught:
        parse("a >", FIELDS)
    assert caught.value.expression == "a >"
    assert caught.value.position == 3
    assert "column 4" in str(caught.value)
