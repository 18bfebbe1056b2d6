"""A simulated tape library: cartridges, drives, a disk buffer, stage requests, pins and eviction.

Every file of a nearline site has its bytes on "tape" (``tape/<path>`` below
the site's directory, standing for its place on a cartridge) and a row in the
library's own state (``library.sqlite``): its cartridge, its byte position on
it, and whether it is only on tape, being staged (and when it will be ready)
or staged into the disk buffer (``buffer/<path>``), where readers find it.

Time is simulated. A stage request is planned when it is made: its files are
grouped by cartridge and sorted by position, each cartridge goes to the drive
that finishes it first (the drive that holds it already, else the one free
soonest), and every file gets the simulated time at which it will be on disk
(mount, unmount of the cartridge that was there, locate, bytes ÷ rate). The
drives' state, the files' ready times and the clock are persisted, so several
processes share one library and a killed one loses nothing. A file becomes
readable when the clock passes its ready time: whoever looks next copies it
into the buffer (temporary name, fsync, rename) and records it staged.

Writes cost drive time the same way. A file archived is placed at once (its
cartridge of the write pool, its position) and queued; :meth:`TapeLibrary.flush`
(and any stage request, before its own files) plans the queue as a read is
planned — by cartridge, in position order, a mount, the locate to where the
cartridge was filled up to, the bytes at the drive rate — and a queued file is
kept in the buffer until its write is over, as a disk buffer in front of
tape keeps files until they are migrated.

Every change of state is one SQLite transaction, and files move only by
atomic renames, so a kill at any point leaves either the old or the new state
and at worst a file that :meth:`TapeLibrary.recover` finishes or removes: a
staged copy whose row says "tape" (eviction cut short), a row "staging" whose
copy already landed (staging cut short), a tape file with no row (archive cut
short). The tape copy is never removed except by :meth:`TapeLibrary.remove`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from giod.errors import NotFound, StorageError
from giod.storage.kind import check_relpath
from giod.storage.pending import TMP_MARK, fsync_path, is_temporary
from giod.storage.tape.settings import LibrarySettings

__all__ = ["FileState", "RequestState", "TapeLibrary", "cartridge_label"]

STATES = ("tape", "staging", "staged")
READ_PIN_S = 60.0  # a file staged for a waiting reader stays this long after it arrived, for the reader to open it
_COUNTERS = ("mounts", "unmounts", "locates", "staged_files", "staged_bytes", "archived_files", "archived_bytes",
             "evictions", "busy_s", "written_files", "written_bytes", "write_s")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value REAL NOT NULL);
CREATE TABLE IF NOT EXISTS cartridges (id INTEGER PRIMARY KEY, used INTEGER NOT NULL, full INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY, size INTEGER NOT NULL, cartridge INTEGER NOT NULL, position INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('tape', 'staging', 'staged')),
    ready REAL NOT NULL, accessed REAL NOT NULL);
CREATE INDEX IF NOT EXISTS files_place ON files (cartridge, position);
CREATE TABLE IF NOT EXISTS drives (id INTEGER PRIMARY KEY, cartridge INTEGER, head INTEGER NOT NULL,
    free REAL NOT NULL);
CREATE TABLE IF NOT EXISTS requests (id TEXT PRIMARY KEY, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS request_files (request TEXT NOT NULL, path TEXT NOT NULL, until REAL NOT NULL,
    PRIMARY KEY (request, path));
CREATE INDEX IF NOT EXISTS request_files_path ON request_files (path);
CREATE TABLE IF NOT EXISTS writes (path TEXT PRIMARY KEY, queued REAL NOT NULL, done REAL);
"""


def cartridge_label(number: int) -> str:
    """The volume label of cartridge ``number`` (LTO-9 media carry an ``L9`` suffix)."""
    return f"GI{number:04d}L9"


@dataclass(frozen=True)
class FileState:
    """Where a file of the library is, and when it is (or will be) on disk."""

    path: str
    size: int
    cartridge: str
    position: int
    state: str  # tape | staging | staged
    ready: float  # simulated time the staged copy arrived or will arrive
    pinned_until: float | None  # simulated time the last pin ends (None: not pinned)

    @property
    def on_disk(self) -> bool:
        return self.state == "staged"


@dataclass(frozen=True)
class RequestState:
    """A stage request: its files' states, and the simulated seconds until the last is on disk."""

    id: str
    created: float
    files: tuple[FileState, ...]
    missing: tuple[str, ...]  # paths of the request the library no longer holds
    eta_s: float

    @property
    def done(self) -> bool:
        return all(f.on_disk for f in self.files)


class TapeLibrary:
    """The library of one nearline site at ``root`` (its state, tape copies and disk buffer)."""

    def __init__(self, root: str | os.PathLike[str], settings: LibrarySettings | None = None):
        self.root = Path(root)
        self.settings = settings or LibrarySettings()
        self.tape = self.root / "tape"
        self.buffer = self.root / "buffer"
        self._db = self.root / "library.sqlite"
        self._ready = False
        for d in (self.tape, self.buffer):
            d.mkdir(parents=True, exist_ok=True)
        with self._tx() as conn:
            have = conn.execute("SELECT count(*) FROM drives").fetchone()[0]
            for n in range(have, self.settings.drives):
                conn.execute("INSERT INTO drives (id, cartridge, head, free) VALUES (?, NULL, 0, 0)", (n,))
            scale = self._meta(conn, "time_scale", None)
            if scale != self.settings.time_scale:  # re-anchor the clock where it stands
                now = self._now(conn)
                self._set(conn, "offset", now)
                self._set(conn, "anchor", time.time())
                self._set(conn, "time_scale", self.settings.time_scale)

    # ------------------------------------------------------------ state

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._db, timeout=60.0, isolation_level=None)
        if not self._ready:  # once per instance: the tables and WAL mode persist in the file
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)
            self._ready = True
        conn.execute("PRAGMA synchronous=NORMAL")  # WAL: a killed process loses no commit
        return conn

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        try:
            conn = self._connect()
        except sqlite3.Error as exc:
            raise StorageError(f"tape library at {self.root}: cannot open its state: {exc}") from exc
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StorageError(f"tape library at {self.root}: {exc}") from exc
        finally:
            conn.close()

    @staticmethod
    def _meta(conn: sqlite3.Connection, key: str, default: float | None = 0.0) -> float | None:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else float(row[0])

    @staticmethod
    def _set(conn: sqlite3.Connection, key: str, value: float) -> None:
        conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = ?",
                     (key, value, value))

    def _bump(self, conn: sqlite3.Connection, key: str, by: float) -> None:
        self._set(conn, key, (self._meta(conn, key) or 0.0) + by)

    # ------------------------------------------------------------ the clock

    def _now(self, conn: sqlite3.Connection) -> float:
        offset = self._meta(conn, "offset") or 0.0
        scale = self._meta(conn, "time_scale", None)
        if not scale:
            return offset
        return offset + max(0.0, time.time() - (self._meta(conn, "anchor") or time.time())) / scale

    def now(self) -> float:
        """The library's simulated clock, in seconds."""
        with self._tx() as conn:
            return self._now(conn)

    def advance(self, until: float, *, step: Callable[[float], None] | None = None) -> None:
        """Let simulated time reach ``until``: sleep it (scaled), or jump to it when the scale is 0.

        ``step(now)`` is called at least every real second while sleeping.
        """
        while True:
            with self._tx() as conn:
                now = self._now(conn)
                if now >= until:
                    return
                if not self.settings.time_scale:
                    self._set(conn, "offset", until)
                    return
            time.sleep(min(1.0, (until - now) * self.settings.time_scale))
            if step is not None:
                step(self.now())

    # ------------------------------------------------------------ archive (files written to the site)

    def archive(self, path: str) -> FileState:
        """Queue the published buffer file ``path`` for tape and record where it will go.

        The file stays in the buffer as a staged copy, kept until its write is
        over (then evicted like any other); :meth:`flush` writes the queue,
        one mount per cartridge. Written again under the same path, it goes to
        tape again.
        """
        path = check_relpath(path)
        src = self.buffer / path
        try:
            size = src.stat().st_size
        except FileNotFoundError as exc:
            raise NotFound(f"file {path} is not in the buffer of tape library {self.root}") from exc
        _copy(src, self.tape / path)
        return self._record(path, size, in_buffer=True)

    def _record(self, path: str, size: int, *, in_buffer: bool) -> FileState:
        with self._tx() as conn:
            now = self._now(conn)
            cartridge, position = self._place(conn, size)
            conn.execute(
                "INSERT INTO files (path, size, cartridge, position, state, ready, accessed) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (path) DO UPDATE SET size = excluded.size, cartridge = excluded.cartridge, "
                "position = excluded.position, state = excluded.state, ready = excluded.ready",
                (path, size, cartridge, position, "staged" if in_buffer else "tape", now, now))
            if in_buffer:  # its drive time is spent when the queue is flushed
                conn.execute("INSERT INTO writes (path, queued, done) VALUES (?, ?, NULL) "
                             "ON CONFLICT (path) DO UPDATE SET queued = excluded.queued, done = NULL", (path, now))
            self._bump(conn, "archived_files", 1)
            self._bump(conn, "archived_bytes", size)
            return self._state(conn, path, now)

    def flush(self, *, wait: bool = True) -> float:
        """Write the queued files to tape: by cartridge, in position order, over the drives (a mount per
        cartridge, the locate to where it was filled up to, the bytes at the drive rate, as a read costs).

        Returns the simulated time the last queued write ends; ``wait``: let the clock reach it, so that
        every file archived so far is on tape when this returns.
        """
        with self._tx() as conn:
            now = self._now(conn)
            self._plan_writes(conn, now)
            last = conn.execute("SELECT max(done) FROM writes").fetchone()[0]
        last = now if last is None else max(now, float(last))
        if wait:
            self.advance(last)
            self.refresh()
        return last

    def _plan_writes(self, conn: sqlite3.Connection, now: float) -> None:
        rows = conn.execute("SELECT f.path, f.size, f.cartridge, f.position, f.state FROM files f "
                            "JOIN writes w ON w.path = f.path WHERE w.done IS NULL").fetchall()
        if rows:
            done = self._schedule(conn, rows, now, writing=True)
            conn.executemany("UPDATE writes SET done = ? WHERE path = ?", [(t, p) for p, t in done])

    def queued(self) -> dict[str, float | None]:
        """The files not on tape yet: path -> when its write ends (None: not planned, waiting for a flush)."""
        self.refresh()
        with self._tx() as conn:
            return {r[0]: None if r[1] is None else float(r[1]) for r in conn.execute("SELECT path, done FROM writes")}

    def _place(self, conn: sqlite3.Connection, size: int) -> tuple[int, int]:
        """The cartridge and position of a new file: round the ``write_pool`` open cartridges."""
        cap = self.settings.capacity
        if size > cap:
            raise StorageError(f"a file of {size} bytes does not fit on a cartridge of {cap} bytes")
        pool = conn.execute("SELECT id, used FROM cartridges WHERE full = 0 ORDER BY id").fetchall()
        top = conn.execute("SELECT coalesce(max(id), 0) FROM cartridges").fetchone()[0]
        while len(pool) < self.settings.write_pool:
            top += 1
            conn.execute("INSERT INTO cartridges (id, used, full) VALUES (?, 0, 0)", (top,))
            pool.append((top, 0))
        turn = int(self._meta(conn, "next_write") or 0)
        self._set(conn, "next_write", turn + 1)
        cid, used = pool[turn % len(pool)]
        if used + size > cap:  # this one is full: a fresh one takes its place in the pool
            conn.execute("UPDATE cartridges SET full = 1 WHERE id = ?", (cid,))
            cid, used = top + 1, 0
            conn.execute("INSERT INTO cartridges (id, used, full) VALUES (?, 0, 0)", (cid,))
        conn.execute("UPDATE cartridges SET used = ? WHERE id = ?", (used + size, cid))
        return int(cid), int(used)

    # ------------------------------------------------------------ looking

    def _state(self, conn: sqlite3.Connection, path: str, now: float) -> FileState:
        row = conn.execute("SELECT path, size, cartridge, position, state, ready FROM files WHERE path = ?",
                           (path,)).fetchone()
        if row is None:
            raise NotFound(f"file {path} is not in tape library {self.root}")
        pin = conn.execute("SELECT max(until) FROM request_files WHERE path = ? AND until > ?",
                           (path, now)).fetchone()[0]
        return FileState(row[0], int(row[1]), cartridge_label(int(row[2])), int(row[3]), row[4], float(row[5]),
                         None if pin is None else float(pin))

    def files(self, paths: Iterable[str] | None = None) -> dict[str, FileState]:
        """The state of ``paths`` (default: every file) after :meth:`refresh`; unknown paths are left out."""
        self.refresh()
        with self._tx() as conn:
            now = self._now(conn)
            wanted = list(paths) if paths is not None else [
                r[0] for r in conn.execute("SELECT path FROM files ORDER BY cartridge, position")]
            out = {}
            for p in wanted:
                with contextlib.suppress(NotFound):
                    out[p] = self._state(conn, p, now)
            return out

    def file(self, path: str) -> FileState:
        """The state of one file; NotFound when the library does not hold it."""
        found = self.files([path])
        if path not in found:
            raise NotFound(f"file {path} is not in tape library {self.root}")
        return found[path]

    def counters(self) -> dict[str, float]:
        """Mounts, unmounts, locates, files and bytes staged, archived and written, evictions, drive-busy
        seconds (``write_s`` of them writing), files per state and queued for tape."""
        with self._tx() as conn:
            out = {k: self._meta(conn, k) or 0.0 for k in _COUNTERS}
            out["now"] = self._now(conn)
            out["cartridges"] = conn.execute("SELECT count(*) FROM cartridges").fetchone()[0]
            for state in STATES:
                out[f"files_{state}"] = conn.execute("SELECT count(*) FROM files WHERE state = ?",
                                                     (state,)).fetchone()[0]
            out["files_queued"] = conn.execute("SELECT count(*) FROM writes").fetchone()[0]
            out["buffer_used"] = conn.execute(
                "SELECT coalesce(sum(size), 0) FROM files WHERE state = 'staged'").fetchone()[0]
            return out

    # ------------------------------------------------------------ staging

    def stage(self, paths: Sequence[str], *, pin_s: float | None = None, request: str | None = None) -> RequestState:
        """One bulk request: plan every file not on disk yet by cartridge and position, pin all of them.

        Unknown paths are NotFound (nothing is requested then). ``pin_s``:
        how long staged copies are kept for this request (default: the
        library's ``pin_s``); a pin ends earlier with :meth:`release`.
        """
        self.refresh()
        rid = request or uuid.uuid4().hex
        lifetime = self.settings.pin_s if pin_s is None else pin_s
        if lifetime < 0:
            raise StorageError(f"a pin lasts zero seconds or more, not {lifetime}")
        wanted = list(dict.fromkeys(check_relpath(p) for p in paths))
        with self._tx() as conn:
            now = self._now(conn)
            rows = {}
            for p in wanted:
                row = conn.execute("SELECT path, size, cartridge, position, state FROM files WHERE path = ?",
                                   (p,)).fetchone()
                if row is not None:
                    rows[p] = row
            unknown = [p for p in wanted if p not in rows]
            if unknown:
                raise NotFound(f"{len(unknown)} file(s) are not in tape library {self.root}: {', '.join(unknown[:5])}")
            self._plan_writes(conn, now)  # writes queued before this request have the drives first
            arrivals = self._schedule(conn, [rows[p] for p in wanted if rows[p][4] == "tape"], now)
            conn.executemany("UPDATE files SET state = 'staging', ready = ? WHERE path = ?",
                             [(t, p) for p, t in arrivals])
            conn.execute("INSERT OR IGNORE INTO requests (id, created) VALUES (?, ?)", (rid, now))
            # a pin counts from the file's arrival, so that a long staging does not eat it up
            ready = {p: max(now, conn.execute("SELECT ready FROM files WHERE path = ?", (p,)).fetchone()[0])
                     for p in wanted}
            conn.executemany(
                "INSERT INTO request_files (request, path, until) VALUES (?, ?, ?) "
                "ON CONFLICT (request, path) DO UPDATE SET until = max(until, excluded.until)",
                [(rid, p, ready[p] + lifetime) for p in wanted])
        return self.request(rid)

    def _schedule(self, conn: sqlite3.Connection, rows: list[tuple[str, int, int, int, str]], now: float, *,
                  writing: bool = False) -> list[tuple[str, float]]:
        """Give each cartridge of ``rows`` to a drive, in position order: each file's path and the time
        its read (or write) ends. The drives' state and the counters are updated."""
        s = self.settings
        by_cart: dict[int, list[tuple[str, int, int]]] = {}
        for path, size, cart, pos, _state in rows:
            by_cart.setdefault(int(cart), []).append((path, int(size), int(pos)))
        drives = {int(d[0]): [d[1], int(d[2]), float(d[3])] for d in conn.execute(
            "SELECT id, cartridge, head, free FROM drives WHERE id < ?", (s.drives,))}
        # longest work first, so that the drives finish together (and mounted cartridges are reused)
        work = sorted(by_cart.items(), key=lambda kv: -sum(size for _, size, _ in kv[1]))
        out: list[tuple[str, float]] = []
        for cart, files in work:
            files.sort(key=lambda f: f[2])
            holder = next((d for d, v in drives.items() if v[0] == cart), None)
            choices = [holder] if holder is not None else list(drives)
            best: tuple[float, int, list[tuple[str, float]], dict[str, float]] | None = None
            for d in choices:
                loaded, head, free = drives[d]
                t = max(now, free)
                counts = {"mounts": 0.0, "unmounts": 0.0, "locates": 0.0}
                if loaded != cart:
                    if loaded is not None:
                        t += s.unmount_s
                        counts["unmounts"] += 1
                    t += s.mount_s
                    counts["mounts"] += 1
                    head = 0
                ready = []
                for path, size, pos in files:
                    seconds, located = s.move(head, pos)
                    t += seconds
                    counts["locates"] += located
                    t += size / s.rate
                    head = pos + size
                    ready.append((path, t))
                key = (t, free)
                if best is None or key < (best[0], drives[best[1]][2]):
                    best = (t, d, ready, counts | {"head": float(head)})
            assert best is not None
            finish, d, ready, counts = best
            start = max(now, drives[d][2])
            drives[d] = [cart, int(counts.pop("head")), finish]
            conn.execute("UPDATE drives SET cartridge = ?, head = ?, free = ? WHERE id = ?",
                         (cart, drives[d][1], finish, d))
            out += ready
            for counter, value in counts.items():
                self._bump(conn, counter, value)
            self._bump(conn, "busy_s", finish - start)
            if writing:
                self._bump(conn, "write_s", finish - start)
                self._bump(conn, "written_files", len(files))
                self._bump(conn, "written_bytes", sum(size for _, size, _ in files))
        return out

    def request(self, rid: str) -> RequestState:
        """A stage request's state (NotFound for an unknown id)."""
        self.refresh()
        with self._tx() as conn:
            now = self._now(conn)
            row = conn.execute("SELECT created FROM requests WHERE id = ?", (rid,)).fetchone()
            if row is None:
                raise NotFound(f"no stage request {rid} in tape library {self.root}")
            paths = [r[0] for r in conn.execute("SELECT path FROM request_files WHERE request = ? ORDER BY path",
                                                (rid,))]
            files, missing = [], []
            for p in paths:
                try:
                    files.append(self._state(conn, p, now))
                except NotFound:
                    missing.append(p)
            eta = max([f.ready - now for f in files if f.state == "staging"] + [0.0])
            return RequestState(rid, float(row[0]), tuple(files), tuple(missing), eta)

    def release(self, rid: str, paths: Sequence[str] | None = None) -> int:
        """End the pins of request ``rid`` (on ``paths``, or all); the number ended. NotFound for an unknown id."""
        with self._tx() as conn:
            if conn.execute("SELECT 1 FROM requests WHERE id = ?", (rid,)).fetchone() is None:
                raise NotFound(f"no stage request {rid} in tape library {self.root}")
            if paths is None:
                n = conn.execute("DELETE FROM request_files WHERE request = ?", (rid,)).rowcount
                conn.execute("DELETE FROM requests WHERE id = ?", (rid,))
            else:
                n = sum(conn.execute("DELETE FROM request_files WHERE request = ? AND path = ?", (rid, p)).rowcount
                        for p in paths)
        self.refresh()
        return int(n)

    def requests(self) -> list[str]:
        """The ids of the stage requests that still hold pins, oldest first."""
        with self._tx() as conn:
            return [r[0] for r in conn.execute("SELECT id FROM requests ORDER BY created, id")]

    def wait(self, paths: Sequence[str], *, progress: Callable[[int, int, float], None] | None = None) -> None:
        """Return when every file of ``paths`` is on disk, staging those on tape (one request) first.

        Never times out: ``progress(on_disk, total, eta_s)`` says how far it is.
        """
        states = self.files(paths)
        unknown = [p for p in paths if p not in states]
        if unknown:
            raise NotFound(f"file {unknown[0]} is not in tape library {self.root}")
        if any(f.state == "tape" for f in states.values()):
            self.stage([p for p, f in states.items() if f.state == "tape"], pin_s=READ_PIN_S)
        while True:
            states = self.files(paths)
            pending = [f for f in states.values() if not f.on_disk]
            if not pending:
                return
            if any(f.state == "tape" for f in pending):  # evicted meanwhile by someone else's need: again
                self.stage([f.path for f in pending if f.state == "tape"], pin_s=READ_PIN_S)
                continue
            now = self.now()
            if progress is not None:
                progress(len(states) - len(pending), len(states), max(f.ready for f in pending) - now)
            self.advance(min(f.ready for f in pending))

    def unload(self) -> None:
        """Empty every drive (as an operator does before a measurement): the next request mounts afresh."""
        with self._tx() as conn:
            now = self._now(conn)
            conn.execute("UPDATE drives SET cartridge = NULL, head = 0, free = max(free, ?)", (now,))

    def touch(self, path: str) -> None:
        """Note a read of ``path`` (eviction takes the least recently used first)."""
        with self._tx() as conn:
            conn.execute("UPDATE files SET accessed = ? WHERE path = ?", (self._now(conn), path))

    # ------------------------------------------------------------ arrival and eviction

    def refresh(self) -> None:
        """Copy every file whose staging is over into the buffer, then evict what the buffer cannot keep."""
        with self._tx() as conn:
            now = self._now(conn)
            conn.execute("DELETE FROM writes WHERE done <= ?", (now,))  # on tape now: evictable
            arrived = [r[0] for r in conn.execute(
                "SELECT path FROM files WHERE state = 'staging' AND ready <= ? ORDER BY ready", (now,))]
        for path in arrived:
            _copy(self.tape / path, self.buffer / path)
            with self._tx() as conn:
                n = conn.execute("UPDATE files SET state = 'staged', accessed = ? WHERE path = ? AND state = 'staging'",
                                 (now, path)).rowcount
                if n:
                    size = conn.execute("SELECT size FROM files WHERE path = ?", (path,)).fetchone()[0]
                    self._bump(conn, "staged_files", 1)
                    self._bump(conn, "staged_bytes", size)
        self._evict()

    def _evict(self) -> None:
        """Release the staged copies not read for ``unread_s`` (when set), then the least recently read
        while the buffer is over its size; never a pinned copy, nor one not written to tape yet."""
        unread = self.settings.unread_s
        with self._tx() as conn:
            now = self._now(conn)
            used = conn.execute("SELECT coalesce(sum(size), 0) FROM files WHERE state = 'staged'").fetchone()[0]
            if used <= self.settings.buffer_bytes and not unread:
                return
            victims = []
            for path, size, accessed in conn.execute(
                    "SELECT path, size, accessed FROM files f WHERE state = 'staged' AND NOT EXISTS "
                    "(SELECT 1 FROM request_files r WHERE r.path = f.path AND r.until > ?) AND NOT EXISTS "
                    "(SELECT 1 FROM writes w WHERE w.path = f.path) ORDER BY accessed, path",
                    (now,)).fetchall():
                idle = unread > 0 and accessed <= now - unread
                if used <= self.settings.buffer_bytes and not idle:
                    break  # by last read: every copy after this one was read more recently
                victims.append(path)
                used -= size
            # the row says "tape" before the copy goes: a kill in between leaves a copy recover() removes
            conn.executemany("UPDATE files SET state = 'tape' WHERE path = ?", [(p,) for p in victims])
            self._bump(conn, "evictions", len(victims))
        for path in victims:
            with contextlib.suppress(FileNotFoundError):
                (self.buffer / path).unlink()

    def evict(self, path: str) -> bool:
        """Drop the staged copy of ``path`` now, pinned or not (a file still queued for tape is written
        first: the queue is flushed and waited for); False when there was none."""
        with self._tx() as conn:
            queued = conn.execute("SELECT 1 FROM writes WHERE path = ?", (path,)).fetchone() is not None
        if queued:
            self.flush()
        with self._tx() as conn:
            n = conn.execute("UPDATE files SET state = 'tape' WHERE path = ? AND state = 'staged'", (path,)).rowcount
            if n:
                self._bump(conn, "evictions", 1)
        with contextlib.suppress(FileNotFoundError):
            (self.buffer / check_relpath(path)).unlink()
        return bool(n)

    # ------------------------------------------------------------ removal and recovery

    def remove(self, path: str) -> None:
        """Forget ``path`` and remove its tape and buffer copies (the row goes first)."""
        path = check_relpath(path)
        with self._tx() as conn:
            conn.execute("DELETE FROM files WHERE path = ?", (path,))
            conn.execute("DELETE FROM request_files WHERE path = ?", (path,))
            conn.execute("DELETE FROM writes WHERE path = ?", (path,))
        for base in (self.buffer, self.tape):
            with contextlib.suppress(FileNotFoundError):
                (base / path).unlink()
            _prune(base, base / path)

    def holds(self, path: str) -> bool:
        with self._tx() as conn:
            return conn.execute("SELECT 1 FROM files WHERE path = ?", (path,)).fetchone() is not None

    def paths(self) -> list[str]:
        """Every path the library holds, by cartridge and position."""
        with self._tx() as conn:
            return [r[0] for r in conn.execute("SELECT path FROM files ORDER BY cartridge, position")]

    def recover(self) -> dict[str, list[str]]:
        """Finish or undo what a killed process left; what was done, by kind.

        ``archived``: a tape copy (or a published buffer file) with no row is
        recorded; ``dropped``: a buffer copy whose row says tape is removed;
        a row "staging" past its time is finished by the refresh at the end
        (its copy is made again); ``temporary``: half-written
        copies are listed (``giod gc`` removes them past its grace period,
        since a writer may still be at work on one).
        """
        done: dict[str, list[str]] = {"archived": [], "dropped": [], "temporary": []}
        for base in (self.tape, self.buffer):
            done["temporary"] += [rel for rel in _walk(base) if is_temporary(rel)]
        with self._tx() as conn:
            rows = {r[0]: r[1] for r in conn.execute("SELECT path, state FROM files")}
        for rel in _walk(self.buffer):
            if not is_temporary(rel) and rel not in rows and not (self.tape / rel).exists():
                _copy(self.buffer / rel, self.tape / rel)  # published but never written to tape
        for rel in _walk(self.tape):
            if not is_temporary(rel) and rel not in rows:
                in_buffer = (self.buffer / rel).exists()
                self._record(rel, (self.tape / rel).stat().st_size, in_buffer=in_buffer)
                done["archived"].append(rel)
        for rel in _walk(self.buffer):
            if rows.get(rel) == "tape":
                with contextlib.suppress(FileNotFoundError):
                    (self.buffer / rel).unlink()
                done["dropped"].append(rel)
        with self._tx() as conn:  # a staged row whose copy is gone: back on tape only
            for path, state in conn.execute("SELECT path, state FROM files").fetchall():
                if state == "staged" and not (self.buffer / path).exists():
                    conn.execute("UPDATE files SET state = 'tape' WHERE path = ?", (path,))
                    done["dropped"].append(path)
        self.flush(wait=False)  # what was queued for tape is planned (a flush cut short is planned already)
        self.refresh()
        return done

    def walk(self) -> Iterator[tuple[str, int, float]]:
        """``(path, size, mtime)`` of every file the site holds: tape copies, and buffer files not on tape yet."""
        seen = set()
        for base in (self.tape, self.buffer):
            for rel in _walk(base):
                if rel in seen:
                    continue
                seen.add(rel)
                with contextlib.suppress(FileNotFoundError):
                    st = (base / rel).stat()
                    yield rel, st.st_size, st.st_mtime


def _walk(base: Path) -> Iterator[str]:
    if not base.exists():
        return
    for dirpath, _dirs, names in os.walk(base):
        for n in names:
            yield (Path(dirpath) / n).relative_to(base).as_posix()


def _prune(base: Path, path: Path) -> None:
    parent = path.parent
    while parent != base and parent.is_relative_to(base):
        try:
            parent.rmdir()
        except OSError:
            break
        parent = parent.parent


def _copy(src: Path, dst: Path) -> None:
    """Copy ``src`` to ``dst`` whole or not at all: a temporary name, fsync, rename, fsync of the folder."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.parent / f".{dst.name}{TMP_MARK}{uuid.uuid4().hex}"
    try:
        with open(src, "rb") as fi, open(tmp, "wb") as fo:
            shutil.copyfileobj(fi, fo, 8 << 20)
            fo.flush()
            os.fsync(fo.fileno())
        os.replace(tmp, dst)
        fsync_path(dst.parent)
    except FileNotFoundError as exc:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise NotFound(f"{src} is missing") from exc
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise StorageError(f"cannot copy {src} to {dst}: {exc}") from exc
