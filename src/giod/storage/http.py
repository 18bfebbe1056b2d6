"""HTTP to a giod server: one endpoint per server, its token, its bounds, typed errors.

An :class:`Endpoint` holds the connection pool (urllib3, thread-safe), the
bearer token and the bounds the server published (:class:`Limits`); a failed
request becomes the ``GiodError`` the server named, so no HTTP library error
reaches a user. The remote catalog and the remote sites of one server share
its endpoint.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO
from urllib.parse import urlsplit

from giod import config, errors
from giod.config import TOKEN_ENV, site_token_env
from giod.errors import AuthError, ConfigError, GiodError, NotFound, Staging, StorageError, TooLarge

__all__ = ["STAGING_HEADER", "TOKEN_ENV", "Endpoint", "Limits", "connect", "endpoint_for", "error_from",
           "site_token_env"]

SMALL_ANSWER = 64 << 10  # an answer this short arrives in about a round trip (``round_trip``)
#: landed(i, start, stop): bytes [start, stop) of the i-th view of a scatter read have landed (``receive_into``)
Landed = Callable[[int, int, int], None]
#: the least a scatter read tells ``landed`` at a time: small enough to be in the cache still, large enough
#: that the calls cost nothing beside the bytes
LANDED_BYTES = 256 << 10
RETRIES = 3  # tries of an idempotent request that failed on the way (urllib3 retries it RETRIES - 1 times)
#: A 503 with this header (and ``Retry-After``) says a file is being staged from tape: the seconds until it
#: should be on disk. A GET or HEAD is sent again then, as long as the server answers so, for at most the
#: ``staging_wait_seconds`` setting (a day: a server that says "staging" for ever cannot hold a client for
#: ever); the server holds nothing for it meanwhile.
STAGING_HEADER = "x-giod-staging"
STAGING_RETRY_MAX_S = 30.0  # the longest a client waits before it asks again
STAGING_RETRY_MIN_S = 0.05

log = logging.getLogger("giod.http")
_RETRY: Any = None


def _retry_class() -> Any:
    """urllib3's Retry that leaves a 503 with ``Retry-After`` (a staging file) to :meth:`Endpoint._send`."""
    global _RETRY
    if _RETRY is None:
        import urllib3

        class StagingAware(urllib3.Retry):
            def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
                if status_code == 503 and has_retry_after:
                    return False
                return bool(super().is_retry(method, status_code, has_retry_after))

        _RETRY = StagingAware
    return _RETRY


@dataclass(frozen=True)
class Limits:
    """What a server accepts; it publishes them and the client stays inside."""

    max_ranges: int = 64  # ranges in one multi-range request
    max_request_bytes: int = 64 << 20  # bytes answered by one request
    max_upload_bytes: int = 16 << 30  # one uploaded file

    @classmethod
    def from_headers(cls, headers: Any) -> Limits:
        """The limits a server published (headers, or its federation answer's); each one that is not a
        positive integer keeps its default."""
        d = cls()
        return cls(
            _limit(headers.get("x-giod-max-ranges"), d.max_ranges),
            _limit(headers.get("x-giod-max-request-bytes"), d.max_request_bytes),
            _limit(headers.get("x-giod-max-upload-bytes"), d.max_upload_bytes),
        )


def _limit(value: Any, default: int) -> int:
    if value is None:
        return default
    try:
        n = int(value)
    except (TypeError, ValueError, OverflowError):  # text, a list, infinity: a server's answer is untrusted
        return default
    return n if 1 <= n < 1 << 63 else default


#: Said when a server asks for a token and none was sent.
HOW_TO_AUTHENTICATE = ("set GIOD_TOKEN (GIOD_TOKEN_<SITE> for a registered site), pass giod --token TOKEN, "
                       "or giod.open(url, token=...)")


def error_from(status: int, body: bytes, what: str) -> GiodError:
    """The typed error a server answer stands for (the server names the class)."""
    kind, message = "", body.decode("utf-8", "replace")[:500]
    try:
        doc = json.loads(body)
        kind, message = str(doc.get("error", "")), str(doc.get("message", message))
    except (ValueError, AttributeError):
        pass
    cls = getattr(errors, kind, None)
    if isinstance(cls, type) and issubclass(cls, GiodError):
        return cls(message)
    if status == 401:
        return AuthError(f"{what}: {message or 'authentication required'}")
    if status == 403:
        return getattr(errors, "Forbidden", AuthError)(f"{what}: {message or 'forbidden'}")
    if status == 404:
        return NotFound(f"{what}: not found")
    if status == 413:
        return TooLarge(f"{what}: the server refused the request ({status}): {message}")
    if status == 416:
        return StorageError(f"{what}: the server refused the request ({status}): {message}")
    return StorageError(f"{what}: server answered {status}: {message}")


class Endpoint:
    """One giod server: base URL, token, TLS settings and a pool of connections."""

    def __init__(self, base: str, token: str | None = None, *, verify: bool | str = True, streams: int = 16,
                 timeout: float = 60.0, staging_wait: float | None = None):
        import urllib3

        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"{base!r} is not a giod server URL (http://host:port)")
        self.base = f"{parts.scheme}://{parts.netloc}"
        self.verify = verify  # kept for a worker that reaches the same server
        self.token = token if token is not None else config.token()
        self.streams = streams
        # from the environment only: a remote federation has no settings file of its own on this side
        self.staging_wait = (float(config.load()["staging_wait_seconds"]) if staging_wait is None
                             else staging_wait)
        kw: dict[str, Any] = {}
        if parts.scheme == "https":
            if verify is False:
                kw["cert_reqs"] = "CERT_NONE"
            elif isinstance(verify, str):
                kw["ca_certs"] = verify
        # connections beyond the streams are for catalog calls made while prefetching
        self._http = urllib3.PoolManager(num_pools=4, maxsize=streams + 4, block=False, retries=False,
                                         timeout=urllib3.Timeout(connect=10.0, read=timeout), **kw)
        self.limits = Limits()
        self.requests = 0
        self.received = 0
        #: the shortest time a small answer took beyond the server's own (seconds; None before any, or from a
        #: server that does not tell its time): the network's round trip
        self.round_trip: float | None = None
        self.warming: list[threading.Thread] = []  # the threads of warm(), for whoever must wait for them
        self._lock = threading.Lock()

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        h = {"user-agent": "giod-client"}
        if self.token:
            h["authorization"] = f"Bearer {self.token}"
        if extra:
            h.update(extra)
        return h

    def request(self, method: str, path: str, *, body: bytes | BinaryIO | None = None,
                headers: dict[str, str] | None = None, ok: tuple[int, ...] = (200,),
                idempotent: bool | None = None, what: str | None = None) -> Any:
        """One request, its answer read whole; retried on connection failures and 5xx if idempotent
        (GET and HEAD unless said otherwise)."""
        return self._send(method, path, body, headers, ok, idempotent, what, preload=True)

    def stream(self, method: str, path: str, *, body: bytes | None = None, headers: dict[str, str] | None = None,
               ok: tuple[int, ...] = (200,), idempotent: bool | None = None, what: str | None = None) -> Any:
        """A request whose answer is read as it arrives: ``readinto``/``read``, then ``release_conn``.

        GET, HEAD and requests said ``idempotent`` are retried like :meth:`request`
        until an answer arrives; a body cut short later raises from the reads (urllib3's errors).
        """
        return self._send(method, path, body, headers, ok, idempotent, what, preload=False)

    def _send(self, method: str, path: str, body: bytes | BinaryIO | None, headers: dict[str, str] | None,
              ok: tuple[int, ...], idempotent: bool | None, what: str | None, *, preload: bool) -> Any:
        import urllib3

        what = what or f"{method} {path}"
        retries: urllib3.Retry | bool = False  # sent once: a second copy might land twice
        if idempotent if idempotent is not None else method in ("GET", "HEAD"):
            # connection failures, answers cut short and 5xx, with a short exponential back-off; the
            # last 5xx is returned (not raised) so that the server's own error reaches the caller
            retries = _retry_class()(total=RETRIES - 1, allowed_methods=None, status_forcelist=range(500, 600),
                                     backoff_factor=0.05, raise_on_status=False, respect_retry_after_header=False)
        waited = 0.0
        while True:
            began = time.perf_counter()
            try:
                r = self._http.request(method, self.base + path, body=body, headers=self.headers(headers),
                                       preload_content=preload, redirect=False, retries=retries)
            except urllib3.exceptions.HTTPError as exc:
                reason = exc.reason if isinstance(exc, urllib3.exceptions.MaxRetryError) else exc
                raise StorageError(f"{what}: {self.base} unreachable: {reason}") from exc
            pause = _staging(r) if method in ("GET", "HEAD") else None
            if pause is None:
                break
            if not preload:
                r.drain_conn()
                r.release_conn()
            if waited + pause > self.staging_wait:
                raise Staging(f"{what}: {self.base} was still staging the file from tape after {waited:,.0f} s "
                              f"(GIOD_STAGING_WAIT_SECONDS={self.staging_wait:g}); the staging goes on there: "
                              "read again later", pause)
            if not waited:
                log.info("%s: the server stages the file from tape; asked again every few seconds", what)
            waited += pause
            time.sleep(pause)  # the server's library delivers on its own clock
        took = time.perf_counter() - began
        with self._lock:
            self.requests += 1
            if preload:
                self.received += len(r.data)
                rtt = _network_time(r, took) if len(r.data) <= SMALL_ANSWER else None
                if rtt is not None and (self.round_trip is None or rtt < self.round_trip):
                    self.round_trip = rtt
        if r.status in ok:
            return r
        data = r.data if preload else r.read()
        if not preload:
            r.release_conn()
        raise self.error(r.status, data, what)

    def receive(self, path: str, size: int, *, headers: dict[str, str] | None = None, what: str | None = None
                ) -> tuple[int, bytes | memoryview]:
        """A GET whose 206 answer of ``size`` bytes is received straight into a buffer of its own, and the
        answer's status.

        The socket writes into an Arrow buffer (``recv_into``; the memory pool's pages are mapped already, where
        a fresh ``bytes`` of many megabytes costs a page fault per 4 KB), with no intermediate ``bytes`` and
        no join; it is returned as a read-only view. Any other answer (a 200 with the whole file) comes whole
        as bytes. A body cut short is asked for again, like a connection failure, up to ``RETRIES`` tries.
        """
        import pyarrow as pa

        got: list[memoryview] = []

        def into() -> list[memoryview]:
            got[:] = [memoryview(pa.allocate_buffer(size, memory_pool=receive_pool()))]
            return got

        status, data = self._receive(path, size, into, headers, what, whole_ok=True)
        return status, data if data is not None else got[0].toreadonly()

    def receive_into(self, path: str, views: list[memoryview], *, headers: dict[str, str] | None = None,
                     what: str | None = None, landed: Landed | None = None) -> None:
        """A GET whose 206 answer is written, in order, into ``views`` (writable, as long together as the
        answer must be): a scatter read, the bytes landing where they are used. Any other answer is a
        StorageError; a body cut short is asked for again, up to ``RETRIES`` tries.

        ``landed(i, start, stop)``, if given, is told in this thread, in order, each stretch of ``views[i]``
        as it lands (at least :data:`LANDED_BYTES` at a time, or the view's end): what it reads there is
        still in the processor's cache. A retry tells again from the first view's start."""
        self._receive(path, sum(len(v) for v in views), lambda: views, headers, what, whole_ok=False,
                      landed=landed)

    def _receive(self, path: str, size: int, into: Any, headers: dict[str, str] | None, what: str | None,
                 *, whole_ok: bool, landed: Landed | None = None) -> tuple[int, bytes | None]:
        import http.client

        import urllib3

        what = what or f"GET {path}"
        failure: BaseException | None = None
        for _ in range(RETRIES):
            r = self.stream("GET", path, headers=headers, ok=(206, 200), what=what)
            done = False
            try:
                if r.status != 206 or r.headers.get("content-length") != str(size):
                    data: bytes = r.read()
                    done = True
                    with self._lock:
                        self.received += len(data)
                    if not whole_ok:
                        raise StorageError(f"{what}: the server answered {r.status} with "
                                           f"{r.headers.get('content-length')} bytes, not the {size} asked")
                    return r.status, data
                got = 0
                try:
                    for i, view in enumerate(into()):  # the socket writes into each view in turn: no copy
                        at = told = 0
                        while at < len(view):
                            n = r._fp.readinto(view[at:])
                            if not n:
                                break
                            at += n
                            if landed is not None and (at - told >= LANDED_BYTES or at == len(view)):
                                landed(i, told, at)
                                told = at
                        got += at
                        if at < len(view):
                            break
                finally:
                    with self._lock:
                        self.received += got
                if got == size:
                    done = True
                    return r.status, None
                failure = StorageError(f"{what}: {got} of {size} bytes received (the answer was cut short)")
            except (OSError, http.client.HTTPException, urllib3.exceptions.HTTPError) as exc:
                failure = exc
            finally:
                if not done:
                    r.close()  # a connection with part of an answer unread is never used again
                r.release_conn()
            log.debug("%s: %s; asked again", what, failure)
        raise StorageError(f"{what}: the answer was cut short {RETRIES} times: {failure}") from failure

    def error(self, status: int, body: bytes, what: str) -> GiodError:
        """:func:`error_from`, and for a 401 to a request that carried no token, how to give one."""
        exc = error_from(status, body, what)
        if status == 401 and not self.token and isinstance(exc, AuthError):
            return type(exc)(f"{exc}; none was given: {HOW_TO_AUTHENTICATE}")
        return exc

    def warm(self) -> None:
        """Open the data connections in the background, while the first request goes its own way.

        Far away a fresh connection costs a round trip (two with TLS); opening it
        ahead takes that off the first reads. No request is sent on it: the server
        does no work for a connection until it is used.
        """
        import urllib3

        pool = self._http.connection_from_url(self.base)
        # taken out of the pool together, so that each thread opens a connection of its own (one put back
        # early would be taken again by the next thread: a few connections, opened in turn)
        taken = [pool._get_conn() for _ in range(self.streams)]

        def one(conn: Any) -> None:
            try:
                if not conn.is_connected:
                    conn.connect()
            except (OSError, urllib3.exceptions.HTTPError):
                conn.close()  # only a head start: the reads open their connections themselves
            finally:
                pool._put_conn(conn)

        def start(threads: list[threading.Thread]) -> None:
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        # one thread started here, which starts the others: a thread's start waits until it runs (~1 ms each
        # on a busy machine), a wait the open would pay once per connection
        each = [threading.Thread(target=one, args=(c,), daemon=True, name="giod-warm") for c in taken]
        self.warming = [threading.Thread(target=start, args=(each,), daemon=True, name="giod-warm")]
        self.warming[0].start()

    def json(self, method: str, path: str, payload: Any = None, **kw: Any) -> Any:
        body = None if payload is None else json.dumps(payload).encode()
        headers = {"content-type": "application/json"} if body is not None else None
        r = self.request(method, path, body=body, headers=headers, **kw)
        try:
            return json.loads(r.data)
        except ValueError as exc:
            raise StorageError(f"{method} {path}: the server sent malformed JSON") from exc

    def close(self) -> None:
        self._http.clear()


def _network_time(r: Any, took: float) -> float | None:
    """The seconds of ``took`` (a request's time on this side) the server did not spend (``x-giod-took``)."""
    told = r.headers.get("x-giod-took")
    try:
        server = float(told) if told is not None else None
    except ValueError:
        return None
    if server is None or not 0 <= server <= took:  # NaN fails both
        return None
    return took - server


def _staging(r: Any) -> float | None:
    """The seconds to wait before asking again when ``r`` says its file is being staged; else None."""
    if r.status != 503:
        return None
    told = r.headers.get(STAGING_HEADER)
    if told is None:
        return None
    try:
        wait = float(told)
    except ValueError:
        wait = STAGING_RETRY_MAX_S
    if not wait == wait:  # NaN
        wait = STAGING_RETRY_MAX_S
    return min(max(wait, STAGING_RETRY_MIN_S), STAGING_RETRY_MAX_S)


_RECEIVE_POOL: Any = None


def receive_pool() -> Any:
    """The Arrow memory pool that received answers are written into: jemalloc where pyarrow has it.

    Measured on loopback (docs/decisions.md): jemalloc hands out pages already mapped, and gives back
    freed ones without a system call on the reader's thread; Arrow's default pool elsewhere.
    """
    global _RECEIVE_POOL
    if _RECEIVE_POOL is None:
        import pyarrow as pa

        try:
            _RECEIVE_POOL = pa.jemalloc_memory_pool()
        except NotImplementedError:  # a pyarrow built without jemalloc
            _RECEIVE_POOL = pa.default_memory_pool()
    return _RECEIVE_POOL


_ENDPOINTS: dict[str, Endpoint] = {}
_ENDPOINTS_LOCK = threading.Lock()


def connect(base: str, token: str | None = None, *, verify: bool | str = True) -> Endpoint:
    """The endpoint for the server at ``base`` (replaced when a different token is given)."""
    parts = urlsplit(base)
    key = f"{parts.scheme}://{parts.netloc}"
    with _ENDPOINTS_LOCK:
        ep = _ENDPOINTS.get(key)
        wanted = token if token is not None else config.token()
        if ep is None or ep.token != wanted:
            ep = _ENDPOINTS[key] = Endpoint(key, wanted, verify=verify)
        return ep


def endpoint_for(url: str) -> Endpoint:
    parts = urlsplit(url)
    key = f"{parts.scheme}://{parts.netloc}"
    with _ENDPOINTS_LOCK:
        ep = _ENDPOINTS.get(key)
    return ep if ep is not None else connect(key)
