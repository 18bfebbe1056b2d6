"""The WLCG Tape REST API (v1) in front of the served federation's nearline sites.

``GET /.well-known/wlcg-tape-rest-api`` says where the endpoint is;
``POST /api/v1/tape/stage`` takes a bulk request (``{"files": [{"path": …,
"diskLifetime": …}]}``, 201 and its id), ``GET /api/v1/tape/stage/{id}``
polls it (every file ``onDisk`` or not, and its state), ``POST
/api/v1/tape/stage/{id}/cancel`` and ``POST /api/v1/tape/release/{id}`` end
pins, ``DELETE /api/v1/tape/stage/{id}`` forgets the request, and ``POST
/api/v1/tape/archiveinfo`` tells where files are (``locality``: ``TAPE``,
``DISK_AND_TAPE``). A path is ``/<site>/<file path on the site>``, the file
path starting with its dataset, and the caller needs read access to that
dataset. A request's files may span several nearline sites: its id stands
for one request at each.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

from giod.errors import AuthError, ConfigError, GiodError, NotFound
from giod.names import check_path
from giod.server.state import need, state

__all__ = ["metrics_text", "router", "well_known"]

router = APIRouter(prefix="/api/v1/tape", tags=["tape"])
well_known = APIRouter(tags=["tape"])

_ID = r"^[A-Za-z0-9_.-]{1,128}$"


class StageFile(BaseModel):
    path: str = Field(min_length=2, max_length=4096)
    diskLifetime: str | int | None = None
    targetedMetadata: dict[str, Any] | None = None


class StageIn(BaseModel):
    files: list[StageFile] = Field(min_length=1, max_length=100_000)


class PathsIn(BaseModel):
    paths: list[str] = Field(min_length=1, max_length=100_000)


_ISO = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def lifetime(value: str | int | None) -> float | None:
    """Seconds of a ``diskLifetime`` (ISO 8601 ``P1DT2H``, or seconds); None when not given."""
    if value is None:
        return None
    if isinstance(value, int):
        if value < 0:
            raise ConfigError(f"diskLifetime {value}: zero seconds or more")
        return float(value)
    m = _ISO.match(value)
    if m is None or value in ("P", "PT"):
        raise ConfigError(f"diskLifetime {value!r} is not an ISO 8601 duration (P1D, PT12H, …)")
    d, h, mi, s = (float(g) if g else 0.0 for g in m.groups())
    return d * 86400 + h * 3600 + mi * 60 + s


def _token_holder(request: Request) -> None:
    """AuthError for an anonymous caller: staging mounts tapes and fills the disk buffer, which
    anonymous readers (``--anonymous-read``) may not do; they read what is on disk."""
    if need(request, "read").token is None:
        raise AuthError("staging, releasing and asking where files are on tape need a token (Authorization: Bearer …)")


def _split(request: Request, path: str) -> tuple[Any, str]:
    """The nearline site and the file path of an API path; the caller must read its dataset."""
    from giod.storage.tape import NearlineSite

    parts = path.lstrip("/").split("/", 1)
    if len(parts) != 2:
        raise ConfigError(f"path {path!r}: expected /<site>/<dataset>/…")
    name, rel = parts
    try:
        check_path(rel)
    except GiodError as exc:  # a path out of the site is the request's fault: 400, not 503
        raise ConfigError(f"path {path!r}: {exc}") from exc
    need(request, "read", rel.split("/", 1)[0])
    fed = state(request).federation
    site = fed.store.site(name)  # NotFound for an unknown site
    if not isinstance(site, NearlineSite):
        raise ConfigError(f"site {name} is not nearline: nothing to stage")
    return site, rel


def _group(request: Request, paths: list[str]) -> dict[str, tuple[Any, list[str]]]:
    out: dict[str, tuple[Any, list[str]]] = {}
    for p in paths:
        site, rel = _split(request, p)
        out.setdefault(site.name, (site, []))[1].append(rel)
    return out


def _sites_of(request: Request, rid: str) -> list[Any]:
    from giod.storage.tape import NearlineSite

    fed = state(request).federation
    found = []
    for rec in fed.store.sites():
        if rec.url.startswith("tape://"):
            site = fed.store.site(rec.name)
            if isinstance(site, NearlineSite) and rid in site.library.requests():
                found.append(site)
    if not found:
        raise NotFound(f"no stage request {rid}")
    return found


@well_known.get("/.well-known/wlcg-tape-rest-api", summary="Where the WLCG Tape REST API of this server is")
def discovery(request: Request) -> dict[str, Any]:
    need(request, "read")
    base = str(request.base_url).rstrip("/")
    # the nearline sites by name: a client reads every site as /files/<site> and cannot tell them otherwise
    nearline = [s.name for s in state(request).federation.store.sites() if s.url.startswith("tape://")]
    return {"sitename": "giod", "description": "giod nearline sites (simulated tape libraries)",
            "endpoints": [{"uri": f"{base}/api/v1/tape", "version": "v1",
                           "metadata": {"giod": {"nearline": nearline}}}]}


@router.post("/stage", status_code=201, summary="A bulk stage request; 201 with its id")
def stage(request: Request, response: Response, body: StageIn) -> dict[str, Any]:
    _token_holder(request)
    rid = uuid.uuid4().hex
    by_site: dict[str, tuple[Any, list[tuple[str, float | None]]]] = {}
    for f in body.files:
        site, rel = _split(request, f.path)
        by_site.setdefault(site.name, (site, []))[1].append((rel, lifetime(f.diskLifetime)))
    for site, files in by_site.values():
        # one request per site; the longest lifetime asked for any of its files pins them all
        pins = [t for _p, t in files if t is not None]
        site.stage([p for p, _t in files], pin_s=max(pins) if pins else None, request=rid)
    response.headers["location"] = f"/api/v1/tape/stage/{rid}"
    return {"requestId": rid}


def _file_state(site_name: str, f: Any) -> dict[str, Any]:
    state_of = {"staged": "COMPLETED", "staging": "STARTED", "tape": "SUBMITTED"}[f.state]
    return {"path": f"/{site_name}/{f.path}", "onDisk": f.on_disk, "state": state_of}


@router.get("/stage/{rid}", summary="A stage request's progress: every file on disk or not")
def poll(request: Request, rid: str) -> dict[str, Any]:
    need(request, "read")
    if not re.match(_ID, rid):
        raise NotFound(f"no stage request {rid}")
    files: list[dict[str, Any]] = []
    created, eta = None, 0.0
    for site in _sites_of(request, rid):
        r = site.library.request(rid)
        for p in {f.path.split("/", 1)[0] for f in r.files}:
            need(request, "read", p)
        created = r.created if created is None else min(created, r.created)
        eta = max(eta, r.eta_s)
        files += [_file_state(site.name, f) for f in r.files]
        files += [{"path": f"/{site.name}/{p}", "onDisk": False, "state": "FAILED",
                   "error": "the file is no longer on this site"} for p in r.missing]
    done = all(f["onDisk"] for f in files)
    return {"id": rid, "createdAt": created, "startedAt": created, **({"completedAt": created} if done else {}),
            "files": files, "estimatedSeconds": eta}


@router.post("/stage/{rid}/cancel", summary="Cancel files of a stage request (their pins end)")
def cancel(request: Request, rid: str, body: PathsIn) -> dict[str, Any]:
    return release(request, rid, body)


@router.post("/release/{rid}", summary="End the pins of files of a stage request")
def release(request: Request, rid: str, body: PathsIn) -> dict[str, Any]:
    _token_holder(request)
    ended = 0
    for site, rels in _group(request, body.paths).values():
        try:
            ended += site.library.release(rid, rels)
        except NotFound:
            continue
    return {"released": ended}


@router.delete("/stage/{rid}", summary="Forget a stage request (every pin it holds ends)")
def delete(request: Request, rid: str) -> dict[str, Any]:
    _token_holder(request)
    ended = 0
    for site in _sites_of(request, rid):
        r = site.library.request(rid)
        for p in {f.path.split("/", 1)[0] for f in r.files}:
            need(request, "read", p)
        ended += site.library.release(rid)
    return {"released": ended}


@router.post("/archiveinfo", summary="Where files are: on tape, on disk too")
def archiveinfo(request: Request, body: PathsIn) -> list[dict[str, Any]]:
    _token_holder(request)
    out: list[dict[str, Any]] = []
    for name, (site, rels) in _group(request, body.paths).items():
        states = site.states(rels)
        for rel in rels:
            f = states.get(rel)
            if f is None:
                out.append({"path": f"/{name}/{rel}", "error": "no such file on this site"})
            else:
                out.append({"path": f"/{name}/{rel}", "locality": "DISK_AND_TAPE" if f.on_disk else "TAPE"})
    return out


def metrics_text(fed: Any) -> str:
    """The nearline sites' gauges and counters for ``/metrics``: files by state and queued for tape, mounts,
    bytes staged and written."""
    from giod.storage.tape import NearlineSite

    out: list[str] = []
    for rec in fed.store.sites():
        if not rec.url.startswith("tape://"):
            continue
        site = fed.store.site(rec.name)
        if not isinstance(site, NearlineSite):
            continue
        c = site.library.counters()
        label = f'site="{rec.name}"'
        out += [f'giod_tape_files{{{label},state="{s}"}} {int(c["files_" + s])}' for s in ("tape", "staging", "staged")]
        out += [f"giod_tape_mounts_total{{{label}}} {int(c['mounts'])}",
                f"giod_tape_staged_bytes_total{{{label}}} {int(c['staged_bytes'])}",
                f"giod_tape_buffer_bytes{{{label}}} {int(c['buffer_used'])}",
                f"giod_tape_requests{{{label}}} {len(site.library.requests())}",
                f"giod_tape_queued_files{{{label}}} {int(c['files_queued'])}",
                f"giod_tape_written_bytes_total{{{label}}} {int(c['written_bytes'])}"]
    if not out:
        return ""
    head = ["# TYPE giod_tape_files gauge", "# TYPE giod_tape_mounts_total counter",
            "# TYPE giod_tape_staged_bytes_total counter", "# TYPE giod_tape_buffer_bytes gauge",
            "# TYPE giod_tape_requests gauge", "# TYPE giod_tape_queued_files gauge",
            "# TYPE giod_tape_written_bytes_total counter"]
    return "\n".join(head + out) + "\n"
