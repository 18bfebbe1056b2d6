"""A client of the WLCG Tape REST API (v1): bulk stage, poll, release, archiveinfo.

It speaks to any endpoint of the API, ``giod serve`` in front of its nearline
sites included (``giod.server.routes.tape``): ``TapeRestClient.discover(URL)``
finds the endpoint through ``/.well-known/wlcg-tape-rest-api``. Errors are
``GiodError`` s: a 4xx answer is the request's fault (ConfigError, NotFound,
AuthError), a 5xx or no answer a StorageError.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import urllib3

from giod.errors import AuthError, ConfigError, Forbidden, NotFound, StorageError

__all__ = ["TapeRestClient"]


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
        for e in found.get("endpoints", []):
            if e.get("version") == "v1" and isinstance(e.get("uri"), str):
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
            r = self._http.request(method, url, body=data, headers=headers)
        except urllib3.exceptions.HTTPError as exc:
            raise StorageError(f"Tape REST endpoint {self.endpoint} does not answer: {exc}") from exc
        try:
            answer = json.loads(r.data or b"null")
        except ValueError as exc:
            raise StorageError(f"{method} {url}: not JSON ({r.status})") from exc
        if r.status < 400:
            return answer
        text = r.data[:200].decode(errors="replace")
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
        return str(self._call("POST", f"{self.endpoint}/stage", {"files": files})["requestId"])

    def poll(self, request_id: str) -> dict[str, Any]:
        """The request's state: ``files`` (each ``path``, ``onDisk``, ``state``), ``estimatedSeconds``."""
        return dict(self._call("GET", f"{self.endpoint}/stage/{request_id}"))

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
        return int(self._call("POST", f"{self.endpoint}/release/{request_id}", {"paths": list(paths)})["released"])

    def cancel(self, request_id: str, paths: Sequence[str]) -> int:
        return int(self._call("POST", f"{self.endpoint}/stage/{request_id}/cancel",
                              {"paths": list(paths)})["released"])

    def delete(self, request_id: str) -> int:
        """Forget the request, ending every pin it holds."""
        return int(self._call("DELETE", f"{self.endpoint}/stage/{request_id}")["released"])

    def archiveinfo(self, paths: Sequence[str]) -> list[dict[str, Any]]:
        """Each path's ``locality`` (``TAPE``, ``DISK_AND_TAPE``) or ``error``."""
        return list(self._call("POST", f"{self.endpoint}/archiveinfo", {"paths": list(paths)}))
