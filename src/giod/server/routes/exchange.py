"""Exchange cursors of the served federation, for a ``giod copy`` whose destination is this server."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path, Request
from pydantic import BaseModel, Field

from giod.names import check_name
from giod.server.state import need, state

router = APIRouter(prefix="/api/v1", tags=["exchange"])

CursorKey = Path(pattern=r"^x[0-9a-f]{16}$", description="The exchange's key (giod.exchange.copy)")


class CursorIn(BaseModel):
    source: str = Field(min_length=1, max_length=4096)
    dataset: str = Field(description="The destination dataset the exchange copies into")
    version: int = Field(ge=0, lt=2**63)


@router.get("/exchange-cursors/{key}", summary="The source version an exchange has copied up to (null: none yet)")
def get_cursor(request: Request, key: str = CursorKey) -> dict[str, Any]:
    need(request, "read")
    return {"version": state(request).federation.catalog.exchange_cursor(key)}


@router.put("/exchange-cursors/{key}", summary="Move an exchange's cursor forward (never back)")
def advance_cursor(request: Request, body: CursorIn, key: str = CursorKey) -> dict[str, Any]:
    check_name(body.dataset, "dataset")
    need(request, "write", body.dataset)
    catalog = state(request).federation.catalog
    return {"version": catalog.advance_exchange_cursor(key, body.source, body.dataset, body.version)}
