"""A client of the WLCG Tape REST API (v1): bulk stage, poll, release, archiveinfo.

It speaks to any endpoint of the API, ``giod serve`` in front of its nearline
sites included (``giod.server.routes.tape``): ``TapeRestClient.discover(URL)``
finds the endpoint through ``/.well-known/wlcg-tape-rest-api``. Errors are
``GiodError`` s: a 4xx answer is the request's fault (ConfigError, NotFound,
AuthError), a 5xx or no answer a StorageError, and so is an answer that is
not what the API says (the endpoint is another site's: its answers are
checked before they are used, and read up to :data:`MAX_ANSWER` bytes).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import urllib3

from giod.errors import AuthError, ConfigError, Forbidden, NotFound, StorageError

__all__ = ["MAX_ANSWER", "TapeRestClient"]

MAX_ANSWER = 64 << 20  # bytes of one answer (a poll of 100,000 files is ~10 MB)
_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # goes into the next requests' paths


def _malformed(method: str, url: str, what: str) -> StorageError:
    return StorageError(f"{method} {url}: the Tape REST endpoint answered {what}")


def _origin(url: str) -> str:
    """``scheme://host:port`` of ``url`` (empty when it is not an http(s) URL)."""
    try:
        u = urllib3.util.parse_url(url)
    except urllib3.exceptions.LocationParseError:
        return ""
    if u.scheme not in ("http", "https") or not u.host:
        return ""
    return f"{u.scheme}://{u.host.lower()}:{u.port or (443 if u.scheme == 'https' else 80)}"


def _count(answer: Any, method: str, url: str) -> int:
    n = answer.get("released") if isinstance(answer, dict) else None
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise _malformed(method, url, "no count of released files")
    return n


class TapeRestClient:
    """The Tape REST endpoint at ``endpoint`` (``http://host:port/api/v1/tape``), with a bearer ``token``."""

    def __init__(self, endpoint: str, token: str | None = None, *, timeout: float = 60.0, verify: bool | str = True):
        self.endpoint = endpoint.rstrip("/")
        self.token = token
        kw: dict[str, Any] = {}
        if verify is False:
            kw["cert_reqs"] = "CERT_NONE"
        elif isinstance(verify, str):
            kw["ca_certs"] = verify
        self._http = urllib3.PoolManager(timeout=urllib3.Timeout(total=timeout), retries=False, **kw)

    @classmethod
    def discover(cls, server: str, token: str | None = None) -> TapeRestClient:
        """The v1 endpoint a server announces at ``/.well-known/wlcg-tape-rest-api``."""
        probe = cls(server, token)
        found = probe._call("GET", server.rstrip("/") + "/.well-known/wlcg-tape-rest-api")
        endpoints = found.get("endpoints") if isinstance(found, dict) else None
        for e in endpoints if isinstance(endpoints, list) else []:
            if isinstance(e, dict) and e.get("version") == "v1" and isinstance(e.get("uri"), str):
                if _origin(e["uri"]) != _origin(server):  # the token is never sent where the server points
                    raise StorageError(f"{server} announces its Tape REST endpoint at another server "
                                       f"({_origin(e['uri']) or e['uri'][:80]!r}): not followed with the token")
                return cls(e["uri"], token)
        raise StorageError(f"{server} announces no v1 Tape REST endpoint")

    def get(self, url: str) -> Any:
        """The JSON answer of ``GET url`` (the discovery document, for one)."""
        return self._call("GET", url)

    def _call(self, method: str, url: str, body: Any = None) -> Any:
        headers = {"accept": "application/json"}
        if self.token:
            headers["authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["content-type"] = "application/json"
        try:
            r = self._http.request(method, url, body=data, headers=headers, preload_content=False)
            try:
                raw = r.read(MAX_ANSWER + 1)
            finally:
                r.release_conn()
        except urllib3.exceptions.HTTPError as exc:
            raise StorageError(f"Tape REST endpoint {self.endpoint} does not answer: {exc}") from exc
        if len(raw) > MAX_ANSWER:
            raise _malformed(method, url, f"more than {MAX_ANSWER} bytes")
        try:
            answer = json.loads(raw or b"null")
        except (ValueError, RecursionError) as exc:
            raise StorageError(f"{method} {url}: not JSON ({r.status})") from exc
        if r.status < 400:
            return answer
        text = raw[:200].decode(errors="replace")
        why = str(answer.get("message", text)) if isinstance(answer, dict) else text
        if r.status == 401:
            raise AuthError(f"{method} {url}: {why}")
        if r.status == 403:
            raise Forbidden(f"{method} {url}: {why}")
        if r.status == 404:
            raise NotFound(f"{method} {url}: {why}")
        if r.status < 500:
            raise ConfigError(f"{method} {url}: {why}")
        raise StorageError(f"{method} {url}: {r.status} {why}")

    def stage(self, paths: Sequence[str], *, lifetime_s: int | None = None) -> str:
        """One bulk request for ``paths`` (``/<site>/<file>``); its id."""
        files = [{"path": p, **({"diskLifetime": int(lifetime_s)} if lifetime_s is not None else {})} for p in paths]
        url = f"{self.endpoint}/stage"
        answer = self._call("POST", url, {"files": files})
        rid = answer.get("requestId") if isinstance(answer, dict) else None
        if not isinstance(rid, str) or not _REQUEST_ID.fullmatch(rid):
            raise _malformed("POST", url, "no request id (letters, digits, '.', '_', '-')")
        return rid

    def poll(self, request_id: str) -> dict[str, Any]:
        """The request's state: ``files`` (each ``path``, ``onDisk``, ``state``), ``estimatedSeconds``
        (a finite number of seconds, 0 when the endpoint gives none)."""
        url = f"{self.endpoint}/stage/{request_id}"
        answer = self._call("GET", url)
        files = answer.get("files", []) if isinstance(answer, dict) else None
        if not isinstance(files, list) or not all(isinstance(f, dict) for f in files):
            raise _malformed("GET", url, "no list of files")
        for f in files:
            if not isinstance(f.get("onDisk", False), bool) or not isinstance(f.get("state", ""), str):
                raise _malformed("GET", url, "a file whose onDisk is not true or false, or whose state is not text")
        eta = answer.get("estimatedSeconds") or 0.0
        if not isinstance(eta, (int, float)) or isinstance(eta, bool) or not math.isfinite(eta) or eta < 0:
            raise _malformed("GET", url, "an estimate that is not a number of seconds")
        return {**answer, "files": files, "estimatedSeconds": float(eta)}

    def wait(self, request_id: str, *, interval: float = 1.0,
             progress: Callable[[int, int, float], None] | None = None) -> dict[str, Any]:
        """Poll until every file is on disk (or failed); never gives up while the endpoint answers."""
        while True:
            state = self.poll(request_id)
            files = state.get("files", [])
            done = sum(bool(f.get("onDisk")) for f in files)
            failed = [f for f in files if f.get("state") == "FAILED"]
            if progress is not None:
                progress(done, len(files), float(state.get("estimatedSeconds") or 0.0))
            if done + len(failed) == len(files):
                return state
            time.sleep(interval)

    def release(self, request_id: str, paths: Sequence[str]) -> int:
        """End the pins of ``paths`` in the request; how many ended."""
        url = f"{self.endpoint}/release/{request_id}"
        return _count(self._call("POST", url, {"paths": list(paths)}), "POST", url)

    def cancel(self, request_id: str, paths: Sequence[str]) -> int:
        url = f"{self.endpoint}/stage/{request_id}/cancel"
        return _count(self._call("POST", url, {"paths": list(paths)}), "POST", url)

    def delete(self, request_id: str) -> int:
        """Forget the request, ending every pin it holds."""
        url = f"{self.endpoint}/stage/{request_id}"
        return _count(self._call("DELETE", url), "DELETE", url)

    def archiveinfo(self, paths: Sequence[str]) -> list[dict[str, Any]]:
        """Each path's ``locality`` (``TAPE``, ``DISK_AND_TAPE``) or ``error``."""
        url = f"{self.endpoint}/archiveinfo"
        answer = self._call("POST", url, {"paths": list(paths)})
        if not isinstance(answer, list) or not all(isinstance(a, dict) for a in answer):
            raise _malformed("POST", url, "no list of files")
        return answer
