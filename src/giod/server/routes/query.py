"""Server-side selection and projection: only the events and columns asked cross the link.

The answer is an Arrow IPC stream, written and sent a record batch at a
time, each of about ``BATCH_BYTES`` (its events estimated from the catalog's
container sizes), and the next batch is read only once the client has taken
the last one (``giod.server.streams.PacedStream``): a client that stops
reading holds one batch in the server, never the whole answer, whatever the
limit, and is disconnected after ``send_timeout_seconds``. One token
receives at most ``query_streams_per_token`` answers at once. Its headers give
the federation version it was computed at and whether the shared cache
answered it. A query at one version always has the same answer, so the cache
is exact for every user; answers up to the cache's largest entry are kept as
they stream out.
"""

from __future__ import annotations

import io
from collections.abc import Hashable, Iterator
from itertools import chain
from typing import Any

import awkward as ak
import pyarrow as pa
from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

from giod.catalog import framed
from giod.errors import DataError, TooLarge
from giod.server.cache import QueryCache
from giod.server.state import need, state
from giod.server.streams import PacedStream

__all__ = ["ARROW_STREAM", "BATCH_BYTES", "BATCH_ROWS", "MAX_ROWS", "MAX_RUNS", "MAX_SELECTED_BYTES", "QueryIn",
           "SelectIn", "ipc_stream", "router"]

router = APIRouter(prefix="/api/v1", tags=["query"])

ARROW_STREAM = "application/vnd.apache.arrow.stream"
MAX_ROWS = 10_000_000  # events in one answer; more are read with a selection, database by database
BATCH_ROWS = 65_536  # events per record batch at most (fewer where a database ends)
BATCH_BYTES = 2 << 20  # about this many bytes of columns per record batch: what a stalled client holds
MIN_BATCH_ROWS = 256
EXPANSION = 4  # bytes in memory per byte on disk, guessed high (zstd of event data): batches err small
MAX_RUNS = 4_000_000  # runs of selected entries in one plan made at the source (64 MB before compression)
MAX_SELECTED_BYTES = 256 << 20  # stored bytes of a sparse selection read at the source, estimated high


class QueryIn(BaseModel):
    dataset: str = Field(min_length=1, max_length=200)
    where: str | None = Field(None, max_length=10_000,
                              description="Selection over tags and objects; all events when absent.")
    columns: list[str] | None = Field(None, max_length=1000, description="Collections, fields or tags.")
    limit: int | None = Field(None, ge=0, le=MAX_ROWS, description=f"At most this many events (≤ {MAX_ROWS:,}).")
    version: int | None = Field(None, ge=0, description="Snapshot version (default: the current one).")


def ipc_stream(fed: Any, q: QueryIn, version: int, *, max_rows: int | None = None,
               batch_rows: int | None = None) -> Iterator[bytes]:
    """The Arrow IPC stream answering ``q`` at ``version``, a record batch at a time.

    Bad input (unknown dataset or column, malformed expression, more than
    ``max_rows`` selected without a limit) raises before the first piece.
    """
    max_rows = MAX_ROWS if max_rows is None else max_rows
    sel = fed.dataset(q.dataset, version).select(q.where)
    sel.projection(q.columns)  # unknown columns: refused now, not mid-answer
    if q.limit is None and (n := len(sel)) > max_rows:
        raise TooLarge(f"the query selects {n:,} events; one answer holds at most {max_rows:,}: "
                       "give a limit, or read the selection itself")
    step, rows = _steps(sel, q.columns) if batch_rows is None else (batch_rows, batch_rows)
    return _pieces(sel, q.columns, q.limit, step, rows)


def _steps(sel: Any, columns: list[str] | None) -> tuple[int, int]:
    """Events read at a time (a cluster of the containers read, at least) and events per record batch
    (about ``BATCH_BYTES``), from the catalog's sizes of the containers read in the first databases."""
    chosen = set(sel.projection(columns).columns)
    events = stored = cluster = 0
    for db in sel.databases()[:16]:
        events += db.n_events
        for c in db.containers:
            if c.name in chosen:
                stored += c.size
                cluster = max(cluster, max(c.cluster_entries, default=0))
    if not events or not stored:
        return BATCH_ROWS, BATCH_ROWS
    rows = max(MIN_BATCH_ROWS, min(BATCH_ROWS, BATCH_BYTES * events // (stored * EXPANSION)))
    # a step within a cluster would decode the whole cluster for a part of it, again and again
    return min(BATCH_ROWS, max(rows, cluster)), rows


def _pieces(sel: Any, columns: list[str] | None, limit: int | None, step: int, batch_rows: int) -> Iterator[bytes]:
    sink = io.BytesIO()

    def drain() -> bytes:
        data = sink.getvalue()
        sink.seek(0)
        sink.truncate()
        return data

    writer: pa.ipc.RecordBatchStreamWriter | None = None
    schema: pa.Schema | None = None
    left = limit
    for chunk in sel.iterate(columns, step_size=step):
        if left is not None:
            chunk = chunk[:left]
            left -= len(chunk)
        table = ak.to_arrow_table(ak.Array(chunk, behavior={}), extensionarray=False)
        del chunk
        if writer is None:
            schema = table.schema
            writer = pa.ipc.new_stream(sink, schema)
        elif not table.schema.equals(schema):
            table = table.cast(schema)
        for at in range(0, table.num_rows, batch_rows):  # one record batch, then the client takes it
            writer.write_table(table.slice(at, batch_rows))
            if at + batch_rows < table.num_rows:
                yield drain()
        del table
        yield drain()
        if left == 0:
            break  # the first chunk gave the types; nothing more is read
    if writer is None:  # nothing selected: an empty stream, typed when the projection allows
        try:
            schema = ak.to_arrow_table(ak.Array(sel.read(columns)[:0], behavior={}), extensionarray=False).schema
        except (ValueError, TypeError, pa.ArrowException):
            schema = pa.schema([])
        writer = pa.ipc.new_stream(sink, schema)
    writer.close()
    yield drain()


def _kept(pieces: Iterator[bytes], cache: QueryCache, key: Hashable, sent: Any) -> Iterator[bytes]:
    """``pieces`` as they go out; the whole answer into the cache when it is small enough to keep."""
    kept: list[bytes] | None = []
    size = 0
    for piece in pieces:
        size += len(piece)
        if kept is not None:
            kept = kept if size <= cache.largest else None
            if kept is not None:
                kept.append(piece)
        sent(len(piece))
        yield piece
    if kept is not None:
        cache.put(key, b"".join(kept))


@router.post("/query", summary="Select and project at the source; answer an Arrow IPC stream",
             response_class=Response, responses={200: {"content": {ARROW_STREAM: {}}},
                                                 413: {"description": f"more than {MAX_ROWS:,} events, no limit"},
                                                 429: {"description": "the token receives its most answers "
                                                       "(query_streams_per_token)"}})
def query(request: Request, body: QueryIn) -> Response:
    who = need(request, "read", body.dataset)
    st = state(request)
    fed = st.federation
    version = body.version if body.version is not None else fed.version
    if version > fed.version:
        raise DataError(f"version {version} is in the future (the federation is at {fed.version})")
    key = (body.dataset, version, body.where or "", tuple(body.columns or ()), body.limit)
    headers = {"x-giod-version": str(version), "x-giod-max-rows": str(MAX_ROWS)}
    data = st.cache.get(key)
    st.metrics.add("query_cache_hits" if data is not None else "query_cache_misses")
    if data is not None:
        st.metrics.add("bytes_sent", len(data))
        return Response(data, media_type=ARROW_STREAM, headers=headers | {"x-giod-cache": "hit"})
    slots = st.streams.query
    holder = slots.take(who, request.client and (request.client.host, request.client.port))
    try:
        pieces = ipc_stream(fed, body, version)
        first = next(pieces)  # errors of the first batch are still answered with their status
    except BaseException:
        slots.give_back(holder)
        raise
    return PacedStream(_kept(chain([first], pieces), st.cache, key, lambda n: st.metrics.add("bytes_sent", n)),
                       send_timeout=st.streams.send_timeout, release=lambda: slots.give_back(holder),
                       media_type=ARROW_STREAM, headers=headers | {"x-giod-cache": "miss"})


class SelectIn(BaseModel):
    dataset: str = Field(min_length=1, max_length=200)
    where: str = Field(min_length=1, max_length=10_000, description="Selection over tags and objects.")
    version: int = Field(ge=0, description="Snapshot version.")
    columns: list[str] | None = Field(None, max_length=1000,
                                      description="With read: collections, fields or tags (all when absent).")
    read: bool = Field(False, description="Also the selected events' stored columns, one table per container.")


def _estimate(sel: Any, columns: list[str] | None) -> int:
    """Bytes in memory of the stored columns of the selected events, from the catalog's sizes (errs high)."""
    chosen = set(sel.projection(columns).columns)
    total = 0.0
    for db, local in sel.plan():
        share = 1.0 if local is None else len(local) / max(db.n_events, 1)
        total += share * sum(c.size for c in db.containers if c.name in chosen)
    return int(total * EXPANSION)


@router.post("/select", summary="Plan a selection where the data are (and read a sparse one): one request for "
             "every database", response_class=Response, responses={200: {"content": {framed.MEDIA_TYPE: {}}},
                                                                   413: {"description": "more runs or bytes than "
                                                                         "one answer holds"}})
def select_at_source(request: Request, body: SelectIn) -> Response:
    """Runs ``[start, stop)`` of the selected entries at ``version`` and, with ``read``, the stored columns
    of those events, as named Arrow IPC streams (``giod.catalog.framed``)."""
    who = need(request, "read", body.dataset)
    st = state(request)
    fed = st.federation
    if body.version > fed.version:
        raise DataError(f"version {body.version} is in the future (the federation is at {fed.version})")
    slots = st.streams.query
    holder = slots.take(who, request.client and (request.client.host, request.client.port))
    try:
        sel = fed.dataset(body.dataset, body.version).select(body.where)
        runs = sel.runs()
        if len(runs) > MAX_RUNS:
            raise TooLarge(f"the selection is {len(runs):,} runs of entries; one answer holds at most "
                           f"{MAX_RUNS:,}: the client plans it")
        tables: list[tuple[str, pa.Table]] = [("", framed.runs_table(runs))]
        if body.read:
            if (size := _estimate(sel, body.columns)) > MAX_SELECTED_BYTES:
                raise TooLarge(f"the selected events hold about {size:,} bytes; one answer holds at most "
                               f"{MAX_SELECTED_BYTES:,}: the client reads the files")
            tables += sel.stored(body.columns).items()
        data = framed.encode(tables)
    finally:
        slots.give_back(holder)
    st.metrics.add("bytes_sent", len(data))
    return Response(data, media_type=framed.MEDIA_TYPE, headers={"x-giod-version": str(body.version)})
