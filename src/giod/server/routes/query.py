"""Server-side selection and projection: only the events and columns asked cross the link.

The answer is an Arrow IPC stream; its headers give the federation version it
was computed at and whether the shared cache answered it. A query at one
version always has the same answer, so the cache is exact for every user.
"""

from __future__ import annotations

import io
from typing import Any

import awkward as ak
import pyarrow as pa
from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

from giod.errors import DataError
from giod.federation import MAX_QUERY_LIMIT
from giod.server.state import need, state

router = APIRouter(prefix="/api/v1", tags=["query"])

ARROW_STREAM = "application/vnd.apache.arrow.stream"


class QueryIn(BaseModel):
    dataset: str = Field(min_length=1, max_length=200)
    where: str | None = Field(None, max_length=10_000, description="Tag expression; all events when absent.")
    columns: list[str] | None = Field(None, max_length=1000, description="Collections, fields or tags.")
    limit: int | None = Field(None, ge=0, le=MAX_QUERY_LIMIT, description="At most this many events.")
    version: int | None = Field(None, ge=0, description="Snapshot version (default: the current one).")


def run_query(fed: Any, q: QueryIn, version: int) -> bytes:
    """The Arrow IPC stream answering ``q`` at ``version``."""
    sel = fed.dataset(q.dataset, version).select(q.where)
    sink = io.BytesIO()
    writer: pa.ipc.RecordBatchStreamWriter | None = None
    left = q.limit
    schema: pa.Schema | None = None
    for chunk in sel.iterate(q.columns):
        if left is not None:
            if left <= 0:
                break
            chunk = chunk[:left]
            left -= len(chunk)
        table = ak.to_arrow_table(ak.Array(chunk, behavior={}), extensionarray=False)
        if writer is None:
            schema = table.schema
            writer = pa.ipc.new_stream(sink, schema)
        elif not table.schema.equals(schema):
            table = table.cast(schema)
        writer.write_table(table)
    if writer is None:  # nothing selected: an empty stream, typed when the projection allows
        try:
            schema = ak.to_arrow_table(ak.Array(sel.read(q.columns)[:0], behavior={}), extensionarray=False).schema
        except (ValueError, TypeError, pa.ArrowException):
            schema = pa.schema([])
        writer = pa.ipc.new_stream(sink, schema)
    writer.close()
    return sink.getvalue()


@router.post("/query", summary="Select and project at the source; answer an Arrow IPC stream",
             response_class=Response, responses={200: {"content": {ARROW_STREAM: {}}}})
def query(request: Request, body: QueryIn) -> Response:
    need(request, "read", body.dataset)
    st = state(request)
    fed = st.federation
    version = body.version if body.version is not None else fed.version
    if version > fed.version:
        raise DataError(f"version {version} is in the future (the federation is at {fed.version})")
    key = (body.dataset, version, body.where or "", tuple(body.columns or ()), body.limit)
    data = st.cache.get(key)
    hit = data is not None
    st.metrics.add("query_cache_hits" if hit else "query_cache_misses")
    if data is None:
        data = run_query(fed, body, version)
        st.cache.put(key, data)
    st.metrics.add("bytes_sent", len(data))
    return Response(data, media_type=ARROW_STREAM,
                    headers={"x-giod-version": str(version), "x-giod-cache": "hit" if hit else "miss"})
