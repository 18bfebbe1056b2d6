"""What every route of one server shares: the federation, the gate, counters, caches, the upload quota."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fastapi import Request

from giod import config
from giod.federation import Federation
from giod.server.auth import Caller, Gate
from giod.server.cache import ETagCache, QueryCache
from giod.server.metrics import Metrics
from giod.server.quota import UploadQuota
from giod.storage.http import Limits

__all__ = ["ServerState", "state", "need"]


@dataclass
class ServerState:
    federation: Federation
    gate: Gate
    limits: Limits = field(default_factory=Limits)
    metrics: Metrics = field(default_factory=Metrics)
    cache: QueryCache = field(default_factory=QueryCache)
    etags: ETagCache = field(default_factory=ETagCache)
    quota: UploadQuota = field(default_factory=lambda: UploadQuota(config.BY_NAME["upload_quota_bytes"].default))
    extra: dict[str, Any] = field(default_factory=dict)


def state(request: Request) -> ServerState:
    return request.app.state.giod  # type: ignore[no-any-return]


def need(request: Request, scope: str, dataset: str | None = None, *, any_dataset: bool = False) -> Caller:
    """The caller, if its token allows ``scope`` on ``dataset``; AuthError/Forbidden otherwise."""
    return state(request).gate.check(request.headers.get("authorization"), scope, dataset,
                                     any_dataset=any_dataset)
