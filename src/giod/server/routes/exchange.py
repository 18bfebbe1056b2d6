"""Exchange cursors of the served federation, for a ``giod copy`` whose destination is this server.

A cursor belongs to the destination dataset it copies into
(``giod.catalog.exchanges``): every route names that dataset and needs write
access to it, reading included, since a cursor steers what that dataset's
copies skip. A token that may not see the dataset gets 404, as for one that
does not exist. A cursor moves forward only; when its source is this very
federation it moves no further than the federation's current version (of any
other source the server cannot know the version, and a token that may write
the dataset could spoil its data anyway). ``DELETE`` forgets a spoiled
cursor: the next run lists the source whole and lands nothing twice.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, Field

from giod.errors import DataError
from giod.names import check_name
from giod.server.state import need, state

router = APIRouter(prefix="/api/v1", tags=["exchange"])

CursorKey = Path(pattern=r"^x[0-9a-f]{16}$", description="The exchange's key (giod.exchange.copy)")
Dataset = Query(min_length=1, max_length=200, description="The destination dataset the exchange copies into")


class CursorIn(BaseModel):
    source: str = Field(min_length=1, max_length=4096)
    dataset: str = Field(min_length=1, max_length=200,
                         description="The destination dataset the exchange copies into")
    version: int = Field(ge=0, lt=2**63)


def _own_names(fed: Any) -> set[str]:
    """How a copy names this federation as its source (``giod.exchange.copy.federation_name``)."""
    from giod.exchange.copy import federation_name

    return {federation_name(fed)}


@router.get("/exchange-cursors/{key}", summary="The source version an exchange into a dataset has copied up to "
            "(null: none yet)")
def get_cursor(request: Request, key: str = CursorKey, dataset: str = Dataset) -> dict[str, Any]:
    need(request, "write", dataset)
    return {"version": state(request).federation.catalog.exchange_cursor(key, dataset)}


@router.put("/exchange-cursors/{key}", summary="Move an exchange's cursor forward (never back)")
def advance_cursor(request: Request, body: CursorIn, key: str = CursorKey) -> dict[str, Any]:
    check_name(body.dataset, "dataset")
    need(request, "write", body.dataset)
    fed = state(request).federation
    if body.source in _own_names(fed) and body.version > (now := fed.catalog.version()):
        raise DataError(f"version {body.version} of source {body.source} is in the future "
                        f"(that federation, this one, is at {now})")
    return {"version": fed.catalog.advance_exchange_cursor(key, body.source, body.dataset, body.version)}


@router.delete("/exchange-cursors/{key}", summary="Forget an exchange's cursor (its next run lists the source whole)")
def forget_cursor(request: Request, key: str = CursorKey, dataset: str = Dataset) -> dict[str, Any]:
    need(request, "write", dataset)
    return {"forgotten": state(request).federation.catalog.forget_exchange_cursor(key, dataset)}
