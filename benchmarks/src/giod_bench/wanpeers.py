"""The WAN benchmark's data and its peers: the dataset and ROOT file they read, the servers, the readers.

Each reader reads the one collection the benchmark measures (``giod bench
wan``, :mod:`giod_bench.wan`) and returns how long it took: AMS-style pages,
the giod client, pyarrow + fsspec HTTP, uproot + XRootD, the server-side
query, and the local reads that are the limits.
"""

from __future__ import annotations

import http.client
import re
import selectors
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from giod.errors import GiodError
from giod_bench.wanxrootd import GIOD_XROOTD

COLLECTION = "hits"
DATASET = "wan"
DATABASE_EVENTS = 20_000
PAGE = 32 * 1024  # the AMS page
AMS_SECONDS = 3.0  # the synchronous page reader stops after this long (or AMS_PAGES pages)
QUICK_AMS_SECONDS = 0.5
AMS_PAGES = 20_000

AMS = "AMS-style 32 KB pages"
GIOD = "giod client"
FSSPEC = "pyarrow + fsspec HTTP"
XROOTD = "uproot + XRootD"
QUERY = "giod server-side query"
CLIENT_ORDER = (AMS, GIOD, GIOD_XROOTD, FSSPEC, XROOTD, QUERY)


# ------------------------------------------------------------------ setup


@dataclass
class _Data:
    """What the clients read: the collection's container files, and the same collection as ROOT."""

    fed_path: Path
    site: str
    files: list[tuple[str, int]]  # (path in the site, size) of the collection's containers
    n_events: int
    root_file: Path
    site_root: Path  # where the site keeps the container files on this disk

    @property
    def nbytes(self) -> int:
        return sum(size for _, size in self.files)


def _hits_schema(schema: Any) -> Any:
    """A schema holding only the read collection (what the ROOT file carries)."""
    from giod.schema import Schema

    d = schema.to_dict()
    kind = d["collections"][COLLECTION]
    return Schema.from_dict({
        "schema_version": d["schema_version"], "name": f"{d['name']}_{COLLECTION}",
        "types": {kind: d["types"][kind]}, "collections": {COLLECTION: kind},
        "containers": {schema.container_of(COLLECTION): [COLLECTION]}, "tags": {},
    })  # fmt: skip


def _build(work: Path, events: int, advance: Callable[[int], None]) -> _Data:
    """The dataset (databases of DATABASE_EVENTS events at most) and the collection as one ROOT file."""
    import giod
    from giod.interchange.export import write_root
    from giod.testing import synthetic

    per_db = max(1, min(DATABASE_EVENTS, events // 4))
    fed = giod.open(work / "fed", create=True)
    try:
        schema = synthetic.schema()
        ds = fed.create_dataset(DATASET, schema)
        with ds.writer(database_events=per_db) as w:
            for i, start in enumerate(range(0, events, per_db)):
                w.append(synthetic.events(min(per_db, events - start), seed=100 + i, first_event=start))
                advance(1)
        ds = ds.pinned()
        container = schema.container_of(COLLECTION)
        files = []
        for db in ds.databases():
            rec = db.container(container)
            if rec is None:
                raise GiodError(f"database {db.id} has no container {container}")
            files.append((rec.path, rec.size))
        site = fed.sites()[0].name
        site_root = Path(fed.site(site).root)  # type: ignore[attr-defined]
        root_dir = work / "xrootd"
        root_dir.mkdir()
        # a root process runs xrootd as an unprivileged user: the export must be readable by others
        for d in (work, root_dir):
            d.chmod(0o755)
        root_file = root_dir / f"{COLLECTION}.root"
        write_root(root_file, ds.iterate([COLLECTION], step_size=per_db), _hits_schema(schema), embed_schema=False)
        root_file.chmod(0o644)
        advance(1)
    finally:
        fed.close()
    return _Data(work / "fed", site, files, events, root_file, site_root)


@contextmanager
def serve_federation(fed_path: Path) -> Iterator[tuple[str, int]]:
    """``giod serve`` on a free loopback port in a child process; yields its address."""
    argv = [sys.executable, "-c", "from giod.cli import main; main(prog_name='giod')",
            "serve", "-f", str(fed_path), "--port", "0"]  # fmt: skip
    child = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    assert child.stderr is not None
    said: deque[str] = deque(maxlen=20)
    try:
        match = None
        deadline = time.monotonic() + 60
        with selectors.DefaultSelector() as sel:
            sel.register(child.stderr, selectors.EVENT_READ)
            while match is None and time.monotonic() < deadline:
                if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                    break
                line = child.stderr.readline()
                if not line:
                    break
                said.append(line.strip())
                match = re.search(r"at http://([\d.]+):(\d+)", line)
        if match is None:
            raise GiodError("giod serve did not start: " + (" | ".join(list(said)[-5:]) or "no answer"))
        # drained, so that a chatty server never blocks on a full pipe
        threading.Thread(target=said.extend, args=(child.stderr,), daemon=True).start()
        yield match.group(1), int(match.group(2))
    finally:
        child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


@contextmanager
def _xrootd_server(directory: Path, notes: list[str]) -> Iterator[tuple[str, int] | None]:
    """An XRootD server exporting ``directory``; None, with a note saying why, when it cannot run here."""
    from giod_bench import xrootd

    reason = xrootd.missing()
    if reason is not None:
        notes.append(f"{XROOTD} left out: {reason}")
        yield None
        return
    server = xrootd.XRootDServer(directory)
    try:
        server.start()
    except GiodError as exc:
        notes.append(f"{XROOTD} left out: the XRootD server did not start ({exc})")
        yield None
        return
    try:
        yield server.address
    finally:
        server.stop()


# ---------------------------------------------------------------- clients


@dataclass
class _Read:
    """One timed read: seconds for the whole collection (extrapolated for AMS), and what else is known."""

    seconds: float
    open_s: float | None = None
    wire: int | None = None  # bytes that crossed the link, when known
    detail: dict[str, Any] | None = None


def _check_rows(got: int, want: int, who: str) -> None:
    if got != want:
        raise GiodError(f"{who} read {got} events, the dataset has {want}")


def _file_url(site: str, path: str) -> str:
    return f"/files/{quote(site)}/{quote(path)}"


def read_ams(address: tuple[str, int], token: str, data: _Data, budget_s: float, max_pages: int) -> _Read:
    """Synchronous 32 KB pages, one request at a time; the rate extrapolated to the whole collection."""
    conn = http.client.HTTPConnection(*address, timeout=120)
    auth = f"Bearer {token}"

    def page(path: str, start: int, stop: int) -> int:
        conn.request(
            "GET", _file_url(data.site, path), headers={"authorization": auth, "range": f"bytes={start}-{stop - 1}"}
        )
        r = conn.getresponse()
        body = r.read()
        if r.status != 206 or len(body) != stop - start:
            raise GiodError(f"page {path}@{start}: status {r.status}, {len(body)} bytes")
        return len(body)

    try:
        first_path, first_size = data.files[0]
        page(first_path, 0, min(PAGE, first_size))  # the connection is opened once, before timing
        pages = got = 0
        start = time.perf_counter()
        for path, size in data.files:
            for a in range(0, size, PAGE):
                got += page(path, a, min(a + PAGE, size))
                pages += 1
                if pages >= max_pages or time.perf_counter() - start >= budget_s:
                    break
            else:
                continue
            break
        elapsed = time.perf_counter() - start
    finally:
        conn.close()
    rate = got / elapsed
    return _Read(
        data.nbytes / rate,
        wire=got,
        detail={"pages": pages, "measured_s": elapsed, "ms_per_page": elapsed / pages * 1000},
    )


def read_giod(base: str, token: str, data: _Data) -> _Read:
    """giod's remote client: open, list, read the collection; seconds from the open to the last byte."""
    import giod

    start = time.perf_counter()
    fed = giod.open(base, token=token)
    try:
        ds = fed.dataset(DATASET).pinned()
        ds.databases()
        opened = time.perf_counter() - start
        events = ds.read([COLLECTION])
        seconds = time.perf_counter() - start
        _check_rows(len(events), data.n_events, "the giod client")
        site = fed.site(data.site)
        endpoint = site.endpoint  # type: ignore[attr-defined]
        detail = {"requests": endpoint.requests, **site.scheduler.stats}  # type: ignore[attr-defined]
        wire = endpoint.received
        site.scheduler.close()  # type: ignore[attr-defined]
        endpoint.close()
    finally:
        fed.close()
    return _Read(seconds, open_s=opened, wire=wire, detail=detail)


def _read_files(paths: list[str], filesystem: Any = None) -> Any:
    """The collection from container files as plain pyarrow reads them: Arrow IPC or Parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not all(p.endswith(".arrow") for p in paths):
        return pq.read_table(paths, filesystem=filesystem, columns=[COLLECTION])
    tables = []
    for p in paths:
        with (filesystem.open(p, "rb") if filesystem is not None else pa.memory_map(p)) as f:
            tables.append(pa.ipc.open_file(f).read_all().select([COLLECTION]))
    return pa.concat_tables(tables)


def read_fsspec(base: str, token: str, data: _Data) -> _Read:
    """pyarrow reading the same container files from the server through fsspec's HTTPFileSystem."""
    from fsspec.implementations.http import HTTPFileSystem

    start = time.perf_counter()
    fs = HTTPFileSystem(headers={"authorization": f"Bearer {token}"}, skip_instance_cache=True)
    urls = [base + _file_url(data.site, path) for path, _ in data.files]
    table = _read_files(urls, fs)
    seconds = time.perf_counter() - start
    _check_rows(table.num_rows, data.n_events, "pyarrow + fsspec")
    return _Read(seconds)


def read_xrootd(address: tuple[str, int], data: _Data) -> _Read:
    """uproot reading the collection's branches from the ROOT file over root:// (fsspec-xrootd)."""
    import uproot
    from uproot.source.fsspec import FSSpecSource

    start = time.perf_counter()
    url = f"root://{address[0]}:{address[1]}//{data.root_file.name}"
    with uproot.open(url, handler=FSSpecSource) as f:
        tree = f["Events"]
        arrays = tree.arrays()
        wire = int(tree.compressed_bytes)
    seconds = time.perf_counter() - start
    _check_rows(len(arrays), data.n_events, "uproot over XRootD")
    return _Read(seconds, wire=wire)


def read_query(base: str, token: str, data: _Data, limit: int) -> _Read:
    """The server reads the collection and streams it as Arrow IPC (``Dataset.query``)."""
    import giod

    start = time.perf_counter()
    fed = giod.open(base, token=token)
    try:
        endpoint = fed.catalog.endpoint  # type: ignore[attr-defined]
        before = endpoint.received
        events = fed.dataset(DATASET).query(None, [COLLECTION], limit=limit)
        seconds = time.perf_counter() - start
        _check_rows(len(events), data.n_events, "the server-side query")
        wire = endpoint.received - before
        endpoint.close()
    finally:
        fed.close()
    return _Read(seconds, wire=wire)


def read_local(data: _Data) -> float:
    """Seconds for giod to read the collection from the same files on the local disk."""
    import giod

    start = time.perf_counter()
    with giod.open(data.fed_path, create=False) as fed:
        events = fed.dataset(DATASET).read([COLLECTION])
    seconds = time.perf_counter() - start
    _check_rows(len(events), data.n_events, "the local read")
    return seconds


def read_local_pyarrow(data: _Data) -> float:
    """Seconds for pyarrow to read the collection's container files from the local disk."""
    start = time.perf_counter()
    table = _read_files([str(data.site_root / path) for path, _ in data.files])
    seconds = time.perf_counter() - start
    _check_rows(table.num_rows, data.n_events, "pyarrow from disk")
    return seconds


def read_local_uproot(data: _Data) -> float:
    """Seconds for uproot to read the collection from the ROOT file on the local disk."""
    import uproot

    start = time.perf_counter()
    with uproot.open(data.root_file) as f:
        arrays = f["Events"].arrays()
    seconds = time.perf_counter() - start
    _check_rows(len(arrays), data.n_events, "uproot from disk")
    return seconds


LOCAL_GIOD = "giod local read (same files, from disk)"
DIRECT_GIOD = "giod client, straight at the server (no proxy)"
LOCAL_READERS: dict[str, Callable[[_Data], float]] = {
    LOCAL_GIOD: read_local,
    "pyarrow, the same container files from disk": read_local_pyarrow,
    "uproot, the ROOT file from disk": read_local_uproot,
}
