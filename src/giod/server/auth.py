"""Who may do what: bearer tokens checked against the catalog, per scope and dataset.

Every route states the scope it needs (read / write / admin) and, where the
action touches one dataset, which one; :meth:`Gate.check` answers 401 for a
missing or refused token and 403 for a valid token that does not cover the
action. A token restricted to one dataset sees nothing of any other: a
dataset it may not see is answered as one that does not exist (404, the
message of an unknown name), so that its existence does not leak. Without a
token, reads pass only when the administrator started the server with
``--anonymous-read``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from giod.catalog.records import TokenRecord
from giod.errors import AuthError, Forbidden, NotFound

__all__ = ["Gate", "Caller", "unknown_dataset"]

CACHE_SECONDS = 2.0  # a revoked token stops working within this time


@dataclass(frozen=True)
class Caller:
    token: TokenRecord | None  # None: anonymous

    @property
    def name(self) -> str:
        return "anonymous" if self.token is None else f"token {self.token.id}"

    @property
    def restricted(self) -> str | None:
        """The one dataset the caller's token covers; None for an unrestricted token or anonymous reads."""
        return None if self.token is None else self.token.dataset

    def sees(self, dataset: str) -> bool:
        """Whether the caller may know that ``dataset`` exists (anything of it, its name included)."""
        return self.restricted is None or self.restricted == dataset


def unknown_dataset(name: str) -> NotFound:
    """The answer for a dataset that does not exist, or that the caller may not see: one and the same."""
    return NotFound(f"no dataset named {name!r}")


class Gate:
    """Checks the ``Authorization`` header of each request against the catalog's tokens."""

    def __init__(self, catalog: object, *, anonymous_read: bool = False):
        self.catalog = catalog
        self.anonymous_read = anonymous_read
        # verified secrets for a short time, so that a client's thousands of range
        # requests do not each cost a catalog query
        self._cache: dict[str, tuple[float, TokenRecord]] = {}
        self._lock = threading.Lock()

    def caller(self, authorization: str | None) -> Caller:
        if not authorization:
            return Caller(None)
        scheme, _, secret = authorization.partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            raise AuthError("the Authorization header must be 'Bearer <token>'")
        secret = secret.strip()
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(secret)
        if hit is not None and now - hit[0] < CACHE_SECONDS:
            return Caller(hit[1])
        record = self.catalog.verify_token(secret)  # type: ignore[attr-defined]
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[secret] = (now, record)
        return Caller(record)

    def check(self, authorization: str | None, scope: str, dataset: str | None = None, *,
              any_dataset: bool = False) -> Caller:
        """The caller, if allowed ``scope`` on ``dataset`` (``any_dataset``: on at least one).

        NotFound, as for an unknown name, when ``dataset`` is one the caller may not see.
        """
        who = self.caller(authorization)
        if who.token is None:
            if scope == "read" and self.anonymous_read:
                return who
            raise AuthError(f"{scope} access needs a token (Authorization: Bearer …)")
        t = who.token
        if dataset is not None and not who.sees(dataset):
            raise unknown_dataset(dataset)
        allowed = t.allows(scope, t.dataset if any_dataset and t.dataset is not None else dataset)
        if not allowed:
            where = f" on dataset {dataset!r}" if dataset else ""
            raise Forbidden(f"{who.name} (scope {t.scope}"
                            f"{', dataset ' + repr(t.dataset) if t.dataset else ''}) may not {scope}{where}")
        return who
