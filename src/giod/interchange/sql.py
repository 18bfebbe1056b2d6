"""SQL over a dataset's tags and collections, with DuckDB (``pip install 'giod[sql]'``).

DuckDB cannot read giod's containers itself (an Arrow IPC file needs a
community extension, and a container alone knows neither the snapshot nor
the selection). So the tables are made here, from what giod's read path gives
— a Dataset or a Selection, local or remote, pinned to its version, read with
its federation's token — and registered in DuckDB as Arrow tables:

- ``tags``: one row per selected event: ``entry`` (the event's entry in the
  dataset) and every tag;
- one table per collection (``Jet``, ``tracks``…): one row per object:
  ``entry``, ``index`` (its position in the event: the last part of its OID)
  and its fields and relations (a relation holds the target's ``index``, -1
  for none; a one-to-many relation a list of them).

``entry`` joins them (NanoAOD's own ``event`` tag is the CMS event number,
not a key). Only the tables a query names are read, whole for the selected
events, into memory: select first (``ds.select("nJet >= 2")``) to read less.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import awkward as ak
import numpy as np
import pyarrow as pa

from giod.errors import ConfigError, DataError, needs_extra
from giod.read.objects import unlink
from giod.schema import Schema

__all__ = ["ENTRY", "INDEX", "TAGS", "connect", "sql", "table_names", "tables"]

TAGS = "tags"  # the table of per-event tags
ENTRY = "entry"  # the column that joins every table: the event's entry in the dataset
INDEX = "index"  # a collection table's column: the object's position in its event
STEP = 100_000  # events read at a time


def _duckdb() -> Any:
    try:
        import duckdb
    except ImportError as exc:
        raise needs_extra("sql", "SQL over a dataset", exc) from exc
    return duckdb


def _selection(source: Any) -> Any:
    """A Selection as it is; a Dataset as all its events, pinned now."""
    return source.select(None) if hasattr(source, "select") else source


def table_names(schema: Schema) -> list[str]:
    """The tables a dataset of ``schema`` offers to SQL: ``tags`` (if it has tags), then its collections."""
    if TAGS in schema.collections:
        raise ConfigError(f"model {schema.name} has a collection called {TAGS!r}, the name of SQL's tag table")
    return ([TAGS] if schema.tags else []) + list(schema.collections)


def _arrow_schema(schema: Schema, name: str) -> pa.Schema:
    if name == TAGS:
        return pa.schema([pa.field(ENTRY, pa.int64(), nullable=False), *schema.arrow_schema("tag")])
    members = list(schema.arrow_type(name).value_type)
    return pa.schema([pa.field(ENTRY, pa.int64(), nullable=False), pa.field(INDEX, pa.int32(), nullable=False),
                      *members])


def _column(values: ak.Array, field: pa.Field) -> pa.Array:
    array = ak.to_arrow(values, extensionarray=False, list_to32=True, string_to32=True)
    return array.cast(field.type)


def _tags_table(chunk: ak.Array, entry: np.ndarray, target: pa.Schema) -> pa.Table:
    columns = [pa.array(entry, pa.int64())]
    columns += [_column(chunk[f.name], f) for f in list(target)[1:]]
    return pa.Table.from_arrays(columns, schema=target)


def _objects_table(objects: ak.Array, entry: np.ndarray, target: pa.Schema) -> pa.Table:
    counts = np.asarray(ak.num(objects, axis=1), dtype=np.int64)
    flat = ak.flatten(objects, axis=1)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    columns = [pa.array(np.repeat(entry, counts), pa.int64()),
               pa.array(np.arange(len(flat), dtype=np.int64) - starts, pa.int32())]
    columns += [_column(flat[f.name], f) for f in list(target)[2:]]
    return pa.Table.from_arrays(columns, schema=target)


def tables(source: Any, names: Sequence[str] | None = None, *, step_size: int = STEP) -> dict[str, pa.Table]:
    """The SQL tables of ``source`` (a Dataset or a Selection) as Arrow tables, read through giod.

    ``names`` chooses the tables (default: every one, see :func:`table_names`);
    an unknown name is a ``ConfigError`` listing the others.
    """
    sel = _selection(source)
    schema: Schema = sel.dataset.schema
    offered = table_names(schema)
    wanted = list(offered if names is None else dict.fromkeys(names))
    unknown = [n for n in wanted if n not in offered]
    if unknown:
        raise ConfigError(f"dataset {sel.dataset.name} has no table {unknown[0]!r} (tables: {', '.join(offered)})")
    targets = {n: _arrow_schema(schema, n) for n in wanted}
    parts: dict[str, list[pa.Table]] = {n: [] for n in wanted}
    columns = [n for n in wanted if n != TAGS] + (list(schema.tags) if TAGS in wanted else [])
    entries = sel.entries()
    at = 0
    if columns:
        for chunk in sel.iterate(columns, step_size=step_size):
            chunk = unlink(chunk, schema)
            entry = entries[at : at + len(chunk)]
            at += len(chunk)
            for name in wanted:
                make = _tags_table if name == TAGS else _objects_table
                parts[name].append(make(chunk if name == TAGS else chunk[name], entry, targets[name]))
    if columns and at != len(entries):  # the read path and the selection disagree: never join rows to the wrong events
        raise DataError(f"read {at:,} events of {sel!r}, which selects {len(entries):,}")
    return {n: pa.concat_tables(p) if p else targets[n].empty_table() for n, p in parts.items()}


def _named(query: str, offered: list[str]) -> list[str]:
    """The tables ``query`` names, as DuckDB parses it (its identifiers, when DuckDB cannot say)."""
    duckdb = _duckdb()
    lower = {n.lower(): n for n in offered}  # SQL identifiers ignore case
    try:
        found = duckdb.connect().get_table_names(query)
    except duckdb.Error:  # get_table_names binds some clauses (JOIN ... USING): take every identifier
        tokens = duckdb.tokenize(query)
        ends = [start for start, _ in tokens[1:]] + [len(query)]
        found = {query[start:end].strip().strip('"') for (start, kind), end in zip(tokens, ends, strict=True)
                 if kind == duckdb.token_type.identifier}
    return [lower[n.lower()] for n in found if n.lower() in lower]


def connect(source: Any, query: str | None = None, *, connection: Any = None) -> Any:
    """A DuckDB connection with the tables of ``source`` registered (those ``query`` names, if given).

    ``connection`` is an existing DuckDB connection to register them in
    (default: a new in-memory one).
    """
    duckdb = _duckdb()
    sel = _selection(source)
    offered = table_names(sel.dataset.schema)
    con = connection if connection is not None else duckdb.connect()
    for name, table in tables(sel, offered if query is None else _named(query, offered)).items():
        con.register(name, table)
    return con


def sql(source: Any, query: str, *, connection: Any = None) -> pa.Table:
    """Run one SQL query over the tags and collections of ``source`` (a Dataset or Selection).

    Example: ``sql(ds, "SELECT count(*) FROM Jet WHERE pt > 30")``. DuckDB's
    errors (syntax, an unknown column) are ``DataError`` naming the query.
    """
    duckdb = _duckdb()
    if not isinstance(query, str) or not query.strip():
        raise DataError("an SQL query must be non-empty text")
    con = connect(source, query, connection=connection)
    try:
        result: pa.Table = con.sql(query).to_arrow_table()
    except duckdb.Error as exc:
        raise DataError(f"SQL query failed: {' '.join(str(exc).split())}") from exc
    return result
