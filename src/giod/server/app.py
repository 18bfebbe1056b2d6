"""The giod server: one ASGI app serving a federation over HTTP.

``create_app(target)`` opens the federation (a directory or a catalog URL)
and mounts the catalog API, the file byte ranges, the server-side query,
``/metrics`` and ``/healthz``. Errors are typed: the body names the
``GiodError`` class and the client raises the same class.
"""

from __future__ import annotations

import contextlib
import math
import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.concurrency import run_in_threadpool

import giod
from giod import config
from giod.errors import (
    AuthError,
    ConfigError,
    ConflictError,
    DataError,
    Forbidden,
    GiodError,
    IntegrityError,
    MissingDependency,
    NotFound,
    QuotaExceeded,
    Staging,
    StorageError,
    TooLarge,
)
from giod.federation import Federation
from giod.server.auth import Gate
from giod.server.bounds import RequestBounds
from giod.server.cache import QueryCache
from giod.server.quota import UploadQuota
from giod.server.routes import catalog as catalog_routes
from giod.server.routes import display as display_routes
from giod.server.routes import exchange as exchange_routes
from giod.server.routes import feed as feed_routes
from giod.server.routes import files as file_routes
from giod.server.routes import query as query_routes
from giod.server.routes import tape as tape_routes
from giod.server.state import ServerState, StreamBounds, need
from giod.server.streams import connection_protocol
from giod.storage.http import STAGING_HEADER, STAGING_RETRY_MAX_S, Limits

__all__ = ["create_app", "status_of"]


def status_of(exc: GiodError) -> int:
    """The HTTP status a giod error is answered with."""
    if isinstance(exc, Forbidden):
        return 403
    if isinstance(exc, AuthError):
        return 401
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, ConflictError):
        return 409
    if isinstance(exc, IntegrityError):
        return 422  # what the client sent (or asked for) failed its checksum
    if isinstance(exc, MissingDependency):
        return 501
    if isinstance(exc, QuotaExceeded):
        return 429  # the request is fine; the token must commit what it holds first
    if isinstance(exc, TooLarge):
        return 413
    if isinstance(exc, StorageError):
        return 503
    return 400


# the one route that only reads yet takes a body (its query): an anonymous reader may send it
_READING_POSTS = frozenset({"/api/v1/query"})


def _error(exc: GiodError, message: str | None = None) -> JSONResponse:
    status = status_of(exc)
    headers = {"www-authenticate": "Bearer"} if status == 401 else None
    if isinstance(exc, Staging):  # ask again then: whole seconds (RFC 9110), the estimate itself for giod clients
        wait = min(max(exc.retry_after_s, 0.0), STAGING_RETRY_MAX_S)
        headers = {"retry-after": str(max(1, math.ceil(wait))), STAGING_HEADER: f"{wait:.3f}"}
    return JSONResponse({"error": type(exc).__name__, "message": str(exc) if message is None else message},
                        status_code=status, headers=headers)


NAMES_SECONDS = 2.0  # a dataset created is kept out of a restricted token's error messages within this time
_HINT = re.compile(r"; did you mean .*$")


def _names(st: ServerState) -> frozenset[str]:
    """Every dataset name of the catalog, re-read at most every ``NAMES_SECONDS``."""
    now = time.monotonic()
    held = st.extra.get("all_names")
    if held is None or now - held[0] > NAMES_SECONDS:
        held = (now, frozenset(st.federation.catalog.dataset_names()))
        st.extra["all_names"] = held
    return held[1]


def _message_for(st: ServerState, request: Request, exc: GiodError) -> str:
    """The message of ``exc`` as the caller may read it: no name of a dataset a restricted token may not see.

    The routes answer a hidden dataset as an unknown one; this is the net under
    messages from deeper down: close matches ("did you mean") are drawn from every
    dataset, and a conflict may name the dataset that holds what it conflicts with.
    """
    try:
        who = st.gate.caller(request.headers.get("authorization"))
    except GiodError:
        return str(exc)
    mine = who.restricted
    if mine is None:
        return str(exc)
    message = _HINT.sub("", str(exc)) if isinstance(exc, NotFound) else str(exc)
    body = request.scope.get("giod.body", b"").decode(errors="replace")
    asked = " ".join((request.url.path, request.url.query, body))
    for name in _names(st) - {mine}:
        word = re.compile(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])")
        if word.search(message) and not word.search(asked):  # a name the client gave itself is no leak
            message = f"{type(exc).__name__}: the details concern what {who.name} may not see"
            break
    return message


def _authenticate(st: ServerState, request: Request) -> None:
    """AuthError unless the request carries a valid token, or is a read an anonymous-read server allows."""
    who = st.gate.caller(request.headers.get("authorization"))
    if who.token is not None:
        return
    reading = request.method in ("GET", "HEAD") or request.scope["path"] in _READING_POSTS
    if not (st.gate.anonymous_read and reading):
        raise AuthError("this request needs a token (Authorization: Bearer …)")


#: seconds the server took to start its answer (the client takes them off its clock: ``Endpoint.round_trip``)
TOOK_HEADER = b"x-giod-took"


class _Measure:
    """ASGI middleware: each request's route, status and time into the metrics.

    Plain ASGI, not a ``BaseHTTPMiddleware``: that one carries a streamed
    answer through a queue of its own, where the pace of the client is lost.
    """

    def __init__(self, app: Any, *, metrics: Any):
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status = 500

        async def sent(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                # the server's own time: what a client's clock shows beyond it is the network's round trip
                took = f"{time.perf_counter() - t0:.6f}".encode()
                message = {**message, "headers": [*message.get("headers", []), (TOOK_HEADER, took)]}
            await send(message)

        try:
            await self.app(scope, receive, sent)
        finally:
            name = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.observe(name, scope["method"], status, time.perf_counter() - t0)


def create_app(target: str | Federation, *, anonymous_read: bool = False, limits: Limits | None = None,
               cache_bytes: int = 256 << 20, upload_quota: int | None = None,
               settings: dict[str, Any] | None = None) -> FastAPI:
    """The ASGI app serving the federation at ``target``.

    ``upload_quota``: bytes one token may hold in uploads not yet committed
    (default: the ``upload_quota_bytes`` setting of the federation, ``giod.config``).
    ``settings``: values of ``giod.config`` settings over the federation's own
    (the streams a token may hold, the send timeout, ...).
    """
    fed = target if isinstance(target, Federation) else Federation.open(target, create=False)
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        feed_routes.close_watch(app.state.giod)  # its thread would watch the catalog after the server is gone
        app.state.giod.federation.store.close()  # the last reads of what it served, not written yet

    app = FastAPI(title="giod", version=giod.__version__,
                  description="A federated object store for particle-physics event data.",
                  docs_url="/docs", redoc_url=None, lifespan=lifespan)
    conf = config.load(fed.root, **(settings or {}))
    if upload_quota is None:
        upload_quota = int(conf["upload_quota_bytes"])
    st = ServerState(fed, Gate(fed.catalog, anonymous_read=anonymous_read), limits or Limits(),
                     cache=QueryCache(cache_bytes), quota=UploadQuota(upload_quota),
                     streams=StreamBounds.of(conf))
    app.state.giod = st

    @app.exception_handler(GiodError)
    async def giod_error(request: Request, exc: GiodError) -> JSONResponse:
        return _error(exc, await run_in_threadpool(_message_for, st, request, exc))

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        # who asks is settled before what was asked: a client without a valid token learns nothing
        # of a route's parameters (401), whatever it sent
        try:
            await run_in_threadpool(_authenticate, st, request)
        except GiodError as refused:  # AuthError, or a catalog that cannot check the token
            return _error(refused)
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        # bad input like any other: 400 with the DataError the client raises
        return _error(DataError(f"{where}: {first.get('msg', 'invalid request')}"))

    app.add_middleware(_Measure, metrics=st.metrics)

    @app.head("/healthz", include_in_schema=False)
    async def alive() -> Response:
        # liveness alone: no catalog statement and no worker thread, so that a client may ask it per
        # connection it opens, and a probe costs the server next to nothing
        return Response(status_code=200)

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, Any]:
        return {"ok": True, "version": fed.version}

    @app.get("/metrics", response_class=PlainTextResponse, summary="Prometheus metrics")
    def metrics(request: Request) -> str:
        need(request, "read")
        return st.metrics.render() + tape_routes.metrics_text(fed)

    app.add_middleware(RequestBounds)
    # the file routes first: a range request, the most frequent by far, is matched against them before the
    # catalog's many routes (which took 180 µs to refuse a /files path, several times the route's own work)
    app.include_router(file_routes.router)
    app.include_router(catalog_routes.router)
    app.include_router(query_routes.router)
    app.include_router(display_routes.router)
    app.include_router(feed_routes.router)
    app.include_router(exchange_routes.router)
    app.include_router(tape_routes.router)
    app.include_router(tape_routes.well_known)
    app.mount("/static", display_routes.static_files(), name="static")
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """The spec, saying what the server answers: a malformed request is 400 with the error body (not 422)."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    spec = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    schemas["Error"] = {"title": "Error", "type": "object", "required": ["error", "message"], "properties": {
        "error": {"type": "string", "description": "the GiodError class the client raises"},
        "message": {"type": "string"}}}
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    for item in spec.get("paths", {}).values():
        for op in item.values():
            answers = op.setdefault("responses", {})
            answers.pop("422", None)
            answers.setdefault("400", {"description": "bad input", **error})
            answers.setdefault("401", {"description": "no token, or a refused one", **error})
    app.openapi_schema = spec
    return spec


def serve(target: str, *, host: str = "127.0.0.1", port: int = 8470, anonymous_read: bool = False,
          certfile: str | None = None, keyfile: str | None = None, log_level: str = "warning",
          ready: Callable[[int], None] | None = None) -> None:
    """Run the server until interrupted (``port=0`` picks a free port, reported to ``ready``)."""
    import socket

    import uvicorn

    from giod.server.allocator import arrow_on_malloc, keep_freed_memory

    keep_freed_memory()  # this process is the server: its buffers come and go with every request
    arrow_on_malloc()
    app = create_app(target, anonymous_read=anonymous_read)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:  # a port in use, an address not of this host, a port below 1024
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.set_inheritable(True)
    # h11, not httptools: only h11 bounds a request head that arrives in pieces (httptools buffers any size)
    config = uvicorn.Config(app, log_level=log_level, ssl_certfile=certfile, ssl_keyfile=keyfile,
                            http=connection_protocol(),
                            timeout_keep_alive=30, limit_concurrency=1024, h11_max_incomplete_event_size=16 << 10,
                            server_header=False, timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    if ready is not None:
        ready(sock.getsockname()[1])
    server.run(sockets=[sock])


class ServerThread:
    """A real server on a loopback port, run in a thread of this process (tests, benchmarks).

    ``with ServerThread(app) as url: giod.open(url, token=…)``; with ``zerocopy=False`` file bodies are read
    and written as under TLS, not sent by ``sendfile``.
    """

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0, zerocopy: bool = True):
        import socket

        import uvicorn

        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self._sock.listen(2048)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        config = uvicorn.Config(app, log_level="warning", timeout_keep_alive=30, limit_concurrency=1024,
                                http=connection_protocol(zerocopy),
                                h11_max_incomplete_event_size=16 << 10, server_header=False)
        self.server = uvicorn.Server(config)
        self._thread: Any = None

    def __enter__(self) -> str:
        import threading

        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True,
                                        name="giod-server")
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the giod server thread did not start")
            time.sleep(0.005)  # polling a flag the server sets; no other signal exists
        return self.url

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._sock.close()
