"""The web pages and the event API: federation browser, event display, scenes and Phoenix JSON.

The pages (``/``, ``/display``) and their scripts are static files: they hold
no data and need no token. Everything they show comes from the JSON API,
which checks the caller's token like every other route: the pages ask for a
token once and send it as a Bearer header.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import threading
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import numpy as np
from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import FileResponse
from starlette.staticfiles import StaticFiles

from giod.errors import DataError, MissingDependency, NotFound
from giod.server.cache import EntriesCache
from giod.server.state import need, state

__all__ = ["STATIC", "router", "static_files"]

router = APIRouter(tags=["display"])

STATIC = Path(str(resources.files("giod.server").joinpath("static")))
GZIP_FROM = 32 << 10  # answers smaller than this go out as they are


def static_files() -> StaticFiles:
    """The pages' scripts and style sheet, served under ``/static``."""
    return StaticFiles(directory=STATIC)


def _send(request: Request, body: bytes, media_type: str, *, headers: dict[str, str] | None = None) -> Response:
    """``body``, gzipped when large and the client takes gzip (a scene of 50,000 cells is MBs of JSON)."""
    headers = dict(headers or {})
    if len(body) >= GZIP_FROM and "gzip" in request.headers.get("accept-encoding", ""):
        body = gzip.compress(body, compresslevel=4)
        headers["content-encoding"] = "gzip"
        headers["vary"] = "accept-encoding"
    state(request).metrics.add("bytes_sent", len(body))
    return Response(body, media_type=media_type, headers=headers)


def _json(request: Request, payload: Any, **kw: Any) -> Response:
    text = json.dumps(payload, separators=(",", ":"), allow_nan=False).encode()
    return _send(request, text, "application/json", **kw)


# ------------------------------------------------------------------ pages


@router.get("/", include_in_schema=False)
def browser_page() -> FileResponse:
    return FileResponse(STATIC / "index.html", media_type="text/html")


@router.get("/display", include_in_schema=False)
def display_page() -> FileResponse:
    return FileResponse(STATIC / "display.html", media_type="text/html")


_plotly: dict[str, Any] = {}
_plotly_lock = threading.Lock()
#: V8's compile hint (Chrome 136 and later): compile every function of the script while it streams in,
#: on a background thread, instead of one by one on the page's main thread as plotly.js's top level
#: calls them. plotly.js is 4.8 MB of code, nearly all of it run while it loads: lazily, that is over a
#: second of parsing on the main thread; eagerly, the main thread is free to fetch and build the event.
COMPILE_HINT = b"//# allFunctionsCalledOnLoad\n"


def _plotly_bundle() -> dict[str, Any]:
    with _plotly_lock:
        if not _plotly:
            try:
                source = resources.files("plotly").joinpath("package_data", "plotly.min.js")
                raw = COMPILE_HINT + source.read_bytes()
            except (ModuleNotFoundError, FileNotFoundError) as exc:
                raise MissingDependency("the event display draws with plotly.js from the 'plotly' Python "
                                        "package, which is not installed: pip install 'giod[display]'") from exc
            _plotly["raw"] = raw
            _plotly["gzip"] = gzip.compress(raw, compresslevel=6, mtime=0)
            _plotly["etag"] = '"' + hashlib.sha256(raw).hexdigest()[:32] + '"'
    return _plotly


@router.get("/vendor/plotly.min.js", include_in_schema=False)
def plotly_js(request: Request) -> Response:
    """plotly.js as shipped inside the installed ``plotly`` Python package (no npm build), with a compile hint."""
    bundle = _plotly_bundle()
    # a week's caching, then a revalidation that costs a 304 while the installed plotly is unchanged
    headers = {"cache-control": "public, max-age=604800", "etag": bundle["etag"], "vary": "accept-encoding"}
    if bundle["etag"] in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    if "gzip" in request.headers.get("accept-encoding", ""):
        return Response(bundle["gzip"], media_type="text/javascript", headers={**headers, "content-encoding": "gzip"})
    return Response(bundle["raw"], media_type="text/javascript", headers=headers)


# ------------------------------------------------------------------- data


def _dataset(request: Request, name: str, version: int | None) -> Any:
    fed = state(request).federation
    if version is not None and version > fed.version:
        raise DataError(f"version {version} is in the future (the federation is at {fed.version})")
    return fed.dataset(name, version).pinned()


@router.get("/api/v1/models/{dataset}", summary="A dataset's data model as JSON: collections, fields, relations, tags")
def model(request: Request, dataset: str, version: int | None = Query(None, ge=0)) -> Response:
    need(request, "read", dataset)
    ds = _dataset(request, dataset, version)
    schema = ds.schema
    from giod.display import find_roles

    roles = {name: role for role, name in find_roles(schema).items()}
    collections = []
    for name, cdef in schema.collections.items():
        tdef = schema.collection_type(name)
        collections.append({
            "name": name, "type": tdef.name, "container": cdef.container, "doc": cdef.doc or tdef.description,
            "role": roles.get(name),
            "fields": [{"name": f.name, "dtype": f.dtype, "shape": list(f.shape), "doc": f.doc}
                       for f in tdef.fields.values()],
            "relations": [{"name": r.name, "target": r.target, "many": r.many, "doc": r.doc}
                          for r in tdef.relations.values()],
        })
    return _json(request, {
        "dataset": ds.name, "version": ds.version, "schema_id": ds.schema_id, "name": schema.name,
        "description": schema.description, "collections": collections,
        "containers": {c: list(names) for c, names in schema.containers.items()},
        "tags": [{"name": t.name, "dtype": t.dtype, "doc": t.doc} for t in schema.tags.values()],
    })


def _entries(request: Request, ds: Any, where: str | None) -> np.ndarray:
    """Entries of ``ds`` passing ``where``, kept for the next click on "next"."""
    st = state(request)
    cache: EntriesCache | None = st.extra.get("display_entries")
    if cache is None:
        cache = st.extra.setdefault("display_entries", EntriesCache())
    key = (ds.name, ds.version, where or "")
    hit = cache.get(key)
    if hit is not None:
        return np.asarray(hit)
    entries = np.asarray(ds.select(where or None).entries())
    cache.put(key, entries)
    return entries


@router.get("/api/v1/events/{dataset}/next", summary="The next (or previous) event passing a tag expression")
def next_event(request: Request, dataset: str,
               after: int = Query(-1, ge=-1, description="Start after this entry (-1: from the first)."),
               where: str | None = Query(None, max_length=10_000, description="Tag expression; all events if absent."),
               direction: Literal["next", "prev"] = Query("next"),
               version: int | None = Query(None, ge=0)) -> Response:
    need(request, "read", dataset)
    ds = _dataset(request, dataset, version)
    entries = _entries(request, ds, where)
    if direction == "next":
        i = int(np.searchsorted(entries, after, side="right"))
        found = i < len(entries)
    else:
        i = int(np.searchsorted(entries, after, side="left")) - 1
        found = i >= 0
    if not found:
        what = f"passing {where!r}" if where else "in the dataset"
        side = "after" if direction == "next" else "before"
        raise NotFound(f"no event {what} {side} entry {after} ({len(entries):,} pass in all)")
    return _json(request, {"dataset": ds.name, "version": ds.version, "where": where, "entry": int(entries[i]),
                           "position": i, "passing": len(entries)})


@router.get("/api/v1/events/{dataset}/lookup", summary="The entry of a run and event number")
def lookup(request: Request, dataset: str, run: int = Query(..., ge=0), event: int = Query(..., ge=0),
           version: int | None = Query(None, ge=0)) -> Response:
    need(request, "read", dataset)
    from giod.display.content import EVENT_TAGS, RUN_TAGS

    ds = _dataset(request, dataset, version)
    tags = ds.schema.tags
    run_tag = next((t for t in RUN_TAGS if t in tags), None)
    event_tag = next((t for t in EVENT_TAGS if t in tags), None)
    if run_tag is None or event_tag is None:
        raise DataError(f"dataset {ds.name} has no run and event tags to look events up by "
                        f"(it needs tags named {RUN_TAGS[0]!r} and {EVENT_TAGS[0]!r})")
    entries = _entries(request, ds, f"{run_tag} == {run} and {event_tag} == {event}")
    if not len(entries):
        raise NotFound(f"dataset {ds.name} has no event with run {run} and event {event}")
    return _json(request, {"dataset": ds.name, "version": ds.version, "run": run, "event": event,
                           "entry": int(entries[0]), "matches": len(entries)})


@router.get("/api/v1/events/{dataset}/{entry}", summary="One event: the display's scene or Phoenix event data")
def event(request: Request, dataset: str, entry: int,
          fmt: Literal["scene", "phoenix"] = Query("scene", alias="format",
                                                   description="scene: what /display draws; phoenix: HSF Phoenix"),
          version: int | None = Query(None, ge=0)) -> Response:
    need(request, "read", dataset)
    from giod.display import load_event, phoenix_of, scene_of

    ds = _dataset(request, dataset, version)
    content = load_event(ds, entry)
    if fmt == "phoenix":
        name = f"{ds.name}-{entry}.phoenix.json"
        return _json(request, phoenix_of(content), headers={"content-disposition": f'inline; filename="{name}"'})
    scene = scene_of(content)
    scene["entries"] = int(ds.summary()["n_events"])
    return _json(request, scene)


@router.get("/api/v1/events/{dataset}/{entry}/{rest:path}", include_in_schema=False)
def not_an_entry(request: Request, dataset: str, entry: str, rest: str) -> Response:
    """An object id (``db42/tracks/1234#7``) or any other path where an entry number belongs: 400, not 404."""
    need(request, "read", dataset)
    raise DataError(f"malformed entry {f'{entry}/{rest}'[:80]!r}: expected an entry number such as 1234 "
                    "(the object db42/tracks/1234#7 is in the event of entry 1234)")
