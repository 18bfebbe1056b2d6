"""What every route of one server shares: the federation, the gate, counters, caches, the upload quota."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request

from giod import config
from giod.federation import Federation
from giod.server.auth import Caller, Gate
from giod.server.cache import ETagCache, QueryCache
from giod.server.metrics import Metrics
from giod.server.quota import UploadQuota
from giod.server.streams import StreamSlots
from giod.storage.http import Limits

__all__ = ["ServerState", "StreamBounds", "state", "need"]


@dataclass
class StreamBounds:
    """What long answers may hold: streams per token and in all, a feed's lifetime, the send timeout."""

    feed: StreamSlots
    query: StreamSlots
    feed_seconds: float
    send_timeout: float

    @classmethod
    def of(cls, conf: Mapping[str, Any]) -> StreamBounds:
        """The bounds that the settings ``conf`` (``giod.config.load``) give."""
        return cls(StreamSlots("feed", int(conf["feed_streams_per_token"]), int(conf["feed_streams"])),
                   StreamSlots("query", int(conf["query_streams_per_token"]), int(conf["query_streams"])),
                   float(conf["feed_max_seconds"]), float(conf["send_timeout_seconds"]))


@dataclass
class ServerState:
    federation: Federation
    gate: Gate
    limits: Limits = field(default_factory=Limits)
    metrics: Metrics = field(default_factory=Metrics)
    cache: QueryCache = field(default_factory=QueryCache)
    etags: ETagCache = field(default_factory=ETagCache)
    quota: UploadQuota = field(default_factory=lambda: UploadQuota(config.BY_NAME["upload_quota_bytes"].default))
    streams: StreamBounds = field(default_factory=lambda: StreamBounds.of(config.load(None, environ={})))
    extra: dict[str, Any] = field(default_factory=dict)


def state(request: Request) -> ServerState:
    return request.app.state.giod  # type: ignore[no-any-return]


def need(request: Request, scope: str, dataset: str | None = None, *, any_dataset: bool = False) -> Caller:
    """The caller, if its token allows ``scope`` on ``dataset``; AuthError/Forbidden otherwise."""
    return state(request).gate.check(request.headers.get("authorization"), scope, dataset,
                                     any_dataset=any_dataset)
