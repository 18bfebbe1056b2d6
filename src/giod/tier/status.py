"""Where a dataset's files are: on disk, or on a nearline site on tape, staging or staged (``giod show``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from giod.catalog.records import DatabaseRecord
from giod.storage.tape.site import SCHEME, NearlineSite
from giod.store.snapshot import Store

__all__ = ["TierCount", "tier_counts", "tier_summary"]


@dataclass
class TierCount:
    """Files and bytes in one state of one tier at one site; for staging, the last arrival; for pins, the last end."""

    files: int = 0
    bytes: int = 0
    last_s: float = 0.0  # simulated seconds from now: the last arrival (staging) or the last pin's end (staged)


def tier_counts(store: Store, databases: Sequence[DatabaseRecord]) -> dict[tuple[str, str], TierCount]:
    """``{(site, state): count}``: ``state`` is ``disk`` for a file with a good copy on disk, else the
    state at its nearest nearline site: ``tape``, ``staging``, ``staged`` or ``queued`` (in the buffer,
    not written to tape yet)."""
    sites = {s.id: s for s in store.sites()}
    out: dict[tuple[str, str], TierCount] = {}
    on_tape: dict[str, list[tuple[str, int]]] = {}
    for db in databases:
        for c in db.containers:
            held = [sites[i] for i in c.site_ids if i in sites]
            disk = [s for s in held if not s.url.startswith(f"{SCHEME}://")]
            if disk or not held:
                key = (disk[0].name if disk else "-", "disk" if disk else "no copy")
                n = out.setdefault(key, TierCount())
                n.files += 1
                n.bytes += c.size
                continue
            on_tape.setdefault(store.reads.order(held)[0].name, []).append((c.path, c.size))
    for name, files in on_tape.items():
        site = store.site(name)
        if not isinstance(site, NearlineSite):
            continue
        states = site.states([p for p, _ in files])
        queued = site.library.queued()
        now = site.library.now()
        for path, size in files:
            f = states.get(path)
            state = "missing" if f is None else "queued" if path in queued else f.state
            n = out.setdefault((name, state), TierCount())
            n.files += 1
            n.bytes += size
            if f is not None and f.state == "staging":
                n.last_s = max(n.last_s, f.ready - now)
            elif f is not None and f.pinned_until is not None:
                n.last_s = max(n.last_s, f.pinned_until - now)
    return out


def tier_summary(store: Store, databases: Sequence[DatabaseRecord]) -> list[str]:
    """One line per site and state: ``archive (nearline): 12 files on tape (1.2 GB)``."""
    lines = []
    for (site, state), n in sorted(tier_counts(store, databases).items()):
        size = f"{n.bytes / 1e6:,.1f} MB"
        if state == "disk":
            lines.append(f"{site} (disk): {n.files} files ({size})")
            continue
        extra = ""
        if state == "staging":
            extra = f", the last on disk in ~{n.last_s:.0f} s"
        elif state == "staged" and n.last_s > 0:
            extra = f", pinned for another {n.last_s:.0f} s at most"
        where = {"tape": "on tape only", "queued": "in the buffer, queued for tape"}.get(state, state)
        lines.append(f"{site} (nearline): {n.files} files {where} ({size}){extra}")
    return lines
