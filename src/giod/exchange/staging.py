"""The nearline files a copy reads, asked for in one bulk request before it reads the first.

A copy goes through the source's databases in commit order (its cursor moves
after each), so it cannot take them in the order tape delivers them; but it
knows every file it will read before it starts. :func:`staged` asks each
nearline site of the source for all of them at once (``giod.tier``: planned
by cartridge and position over the drives), so each cartridge is mounted
once, and the copy then meets every file staged or on its way, never alone
on tape. The pins end when the copy does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from giod import config
from giod.catalog.records import ContainerRecord, DatabaseRecord
from giod.errors import GiodError
from giod.read import tagindex
from giod.tier.staging import StagePlan, may_stage, stage_containers

__all__ = ["copy_reads", "staged"]


def copy_reads(todo: Sequence[tuple[int, DatabaseRecord, list[ContainerRecord]]], *, skim_reads: set[str] | None,
               chosen: Callable[[str], bool], landed: Callable[[DatabaseRecord], bool]) -> list[ContainerRecord]:
    """The source containers a copy of ``todo`` reads: a later pass's containers of a database copied
    before, the chosen containers of a database to copy, and for a skim (``skim_reads``: the containers
    its selection reads) those too; nothing of a database that has landed already."""
    out: list[ContainerRecord] = []
    for _version, db, added in todo:
        if added:
            out += added if landed(db) else []
        elif not landed(db):
            extra = set() if skim_reads is None else skim_reads | {tagindex.TAG_INDEX}
            out += [c for c in db.containers if chosen(c.name) or c.name in extra]
    return out


@contextlib.contextmanager
def staged(src: Any, containers: Sequence[ContainerRecord]) -> Iterator[StagePlan | None]:
    """While a copy reads ``containers`` from federation ``src``: one stage request per nearline site
    for those read from tape (None when there are none, or ``tape_bulk_staging`` is off), released after."""
    store = src.store
    if not containers or not may_stage(store) or not config.load(store.root)["tape_bulk_staging"]:
        yield None
        return
    plan = stage_containers(store, containers)
    try:
        yield plan
    finally:
        with contextlib.suppress(GiodError):  # a pin left over ends with its lifetime
            plan.release()
