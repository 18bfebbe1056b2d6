"""Structure-aware fuzzing of container files: every read path, under an address-space limit, never a signal.

A small synthetic dataset is written once; each case copies it, changes one
container as :class:`Mutation` says (list offsets, relation values, field
node lengths and null counts, buffer spans, compressed length prefixes, the
batch's length, bytes of its metadata or of the footer; of a Parquet
container: bytes and integers of a page's data, its levels, the sizes and
counts in its header, bytes of the footer), makes every checksum agree again
(block checksums, page CRCs, the catalog's; ``giod_bench.crafted``) and hands
the copy to a child
process. The child, limited to :data:`LIMIT` bytes of address space, reads it
through every path — read, iterate, tag and object selections, single
events, relation navigation, the Phoenix export of an event, export to
Parquet and ``giod copy`` to another federation; now and then, through a server
on loopback, a query and the giod client's own reads — and answers one line per
case: each path's outcome is ``ok`` (checked as valid data) or the name of a
``GiodError``; anything else, or a child that dies, is a crash. One child
serves many cases. ``giod bench fuzz --cases N`` and the tests
(``tests/storage/test_fuzz_containers.py``, with hypothesis) both run this.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import click
import numpy as np
import pyarrow as pa

from giod_bench import crafted

__all__ = ["BASES", "CONTAINERS", "KINDS", "LIMIT", "PARQUET_KINDS", "Child", "Mutation", "apply", "bad", "base",
           "command", "random_mutation", "run"]

#: bytes of address space a reading child may use
LIMIT = 3 << 30
EVENTS, CLUSTER = 60, 20
CONTAINERS = ("reco", "raw.tracker", "raw.calo", "tag")
KINDS = ("offset", "relation", "node", "span", "prefix", "length", "meta", "footer")
#: the changes of a Parquet container: a byte of a page's data, its repetition and definition levels (the
#: start of a data page: the levels' length and run headers), an int32 of its data, a size or count in its
#: header, a byte of the footer; each page's CRC made to agree
PARQUET_KINDS = ("page", "levels", "pageint", "header", "pfooter")
#: the integers of a page header a change may set: sizes, and value, null and row counts of each kind of page
_HEADER_FIELDS = ((2,), (3,), (5, 1), (7, 1), (8, 1), (8, 2), (8, 3), (8, 5), (8, 6))
#: values an attacker likes: off by one, negative, past the end, huge
VALUES = (-1, -2, 0, 1, 2, 3, 7, 64, 1000, 3000, 100_000_000, (1 << 31) - 1, -(1 << 31), 1 << 40)


#: the datasets cases start from: Arrow containers uncompressed and compressed, Parquet containers (pages
#: uncompressed, so that a change of their data is a change of the values read)
BASES: dict[str, dict[str, Any]] = {"plain": {}, "packed": {"compressed": True},
                                    "parquet": {"container_format": "parquet"}}


@dataclass(frozen=True)
class Mutation:
    """One change of one container: ``kind`` at ``batch``, the ``which``-th candidate, ``at``, to ``value``.

    ``which`` and ``at`` are taken modulo what exists, so any numbers make a case.
    """

    kind: str
    container: str
    batch: int
    which: int
    at: int
    value: int


def base(root: Path, compressed: bool = False, container_format: str = "arrow") -> Path:
    """The dataset every case starts from: ``EVENTS`` synthetic events in clusters of ``CLUSTER``, in
    containers of ``container_format``."""
    import giod
    from giod.storage.container import WriteOptions
    from giod.testing import synthetic

    fed = giod.open(root, create=True)
    ds = fed.create_dataset("qcd", synthetic.schema(), container_format=container_format)
    options = WriteOptions(compression="zstd", min_savings=0.0) if compressed else WriteOptions(compression="none")
    with ds.writer(database_events=EVENTS, cluster_events=CLUSTER, options=options) as w:
        w.append(synthetic.events(EVENTS, seed=5))
        # a second database, untouched by the cases: a remote client gathers dense reads of two or more
        w.append(synthetic.events(EVENTS, seed=6, first_event=EVENTS))
    fed.close()
    return root


def _relation_buffers(schema: Any, batch: crafted.Batch) -> list[int]:
    """The values buffers of relation members (int32 index columns, one-to-one or the items of many)."""
    out = []
    for node in crafted.nodes(schema, batch):
        if node.type.equals(pa.int32()) and node.name in ("leading", "") and node.buffers:
            out.append(node.buffers[1])
    return out


def _change(data: bytearray, schema: Any, m: Mutation) -> None:
    found = crafted.batches(data)
    if not found:
        return
    b = found[m.batch % len(found)]
    msg = b.msg
    if m.kind in ("offset", "relation"):
        if m.kind == "offset":
            cands = [n.buffers[1] for n in crafted.nodes(schema, b)
                     if len(n.buffers) > 1 and n.children and msg.buffers[n.buffers[1], 1] >= 4]
        else:
            cands = [x for x in _relation_buffers(schema, b) if msg.buffers[x, 1] >= 4]
        if not cands or msg.codec is not None:
            return
        view = crafted.buffer_of(data, b, cands[m.which % len(cands)]).view("<i4")
        view[m.at % len(view)] = np.int32(np.int64(m.value).astype(np.int32))
    elif m.kind in ("node", "span", "length", "meta"):
        meta = bytearray(data[b.offset:b.offset + b.meta])
        if m.kind == "meta":
            at = 8 + m.at % max(1, len(meta) - 8)
            meta[at] = m.value & 0xFF
        else:
            if m.kind == "length":
                old = np.asarray([msg.length], "<i8").tobytes()
                new = np.asarray([m.value], "<i8").tobytes()
            else:
                table = msg.nodes if m.kind == "node" else msg.buffers
                if not len(table):
                    return
                old = table.astype("<i8").tobytes()
                changed = table.astype("<i8").copy()
                changed.reshape(-1)[m.which % changed.size] = m.value
                new = changed.tobytes()
            at = meta.find(old)
            if at < 0:
                return
            meta[at:at + len(old)] = new
        data[b.offset:b.offset + b.meta] = meta
    elif m.kind == "prefix":
        present = np.flatnonzero(msg.buffers[:, 1] >= 8)
        if msg.codec is None or not len(present):
            return
        raw = crafted.buffer_of(data, b, int(present[m.which % len(present)]))
        raw[:8] = np.frombuffer(np.asarray([m.value], "<i8").tobytes(), dtype=np.uint8)
    elif m.kind == "footer":
        n = int.from_bytes(bytes(data[-10:-6]), "little")
        if 0 < n < len(data) - 10:
            data[len(data) - 10 - n + m.at % n] = m.value & 0xFF


def _change_parquet(data: bytearray, m: Mutation) -> None:
    pages = crafted.parquet_pages(data)
    if m.kind == "pfooter":
        start, n = crafted.parquet_footer(data)
        if n > 0:
            data[start + m.at % n] = m.value & 0xFF
        return
    if not pages:
        return
    page = pages[m.which % len(pages)]
    if m.kind == "header":
        fields = [f for f in _HEADER_FIELDS if page.header.get(f[0]) is not None
                  and (len(f) == 1 or page.header.value(f[0]).get(f[1]) is not None)]
        if not fields:
            return
        f = fields[m.at % len(fields)]
        value = int(np.int64(m.value).astype(np.int32))
        holder = page.header if len(f) == 1 else page.header.value(f[0])
        holder.put(f[-1], holder[f[-1]][0], value)
        crafted.reseal_page(data, page)  # a header that no longer fits is left as it was
        return
    body = np.frombuffer(memoryview(data)[page.body:page.body + max(0, page.length)], dtype=np.uint8)
    if not len(body):
        return
    if m.kind == "page":
        body[m.at % len(body)] = m.value & 0xFF
    elif m.kind == "levels":
        body[m.at % min(len(body), 16)] = m.value & 0xFF
    elif len(body) >= 4:  # pageint
        at = m.at % (len(body) // 4) * 4
        body[at:at + 4] = np.frombuffer(np.asarray([m.value], "<i8").astype("<i4").tobytes(), dtype=np.uint8)
    crafted.reseal_page(data, page)


def apply(pristine: Path, root: Path, m: Mutation) -> None:
    """A copy of ``pristine`` at ``root`` with ``m`` applied and every checksum made consistent."""
    import giod

    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(pristine, root)
    fed = giod.open(root)
    ds = fed.dataset("qcd")
    rec = ds.databases()[0].container(m.container)
    assert rec is not None
    path = Path(crafted.local_file(fed, rec))
    schema = ds.schema.arrow_schema(m.container)
    fed.close()
    data = bytearray(path.read_bytes())
    if rec.format == "parquet":
        before = crafted.Sealed(rec.checksum, rec.size, tuple(rec.cluster_entries), ())
        if m.kind in PARQUET_KINDS:
            _change_parquet(data, m)
        sealed = crafted.seal_parquet(data, before)
    else:
        before = crafted.seal(data)
        if m.kind in KINDS:
            _change(data, schema, m)
        crafted.reseal(data)
        sealed = crafted.seal(data, before)
    path.write_bytes(data)
    crafted.recatalog(f"sqlite:///{root / 'catalog.sqlite'}", rec.path, sealed)


def random_mutation(rng: np.random.Generator, parquet: bool = False) -> Mutation:
    return Mutation(str(rng.choice(PARQUET_KINDS if parquet else KINDS)), str(rng.choice(CONTAINERS)),
                    int(rng.integers(0, 8)), int(rng.integers(0, 1 << 16)), int(rng.integers(0, 1 << 20)),
                    int(rng.choice(VALUES)))


# ------------------------------------------------------------------ the child


class Child:
    """A reading child under an address-space limit; :meth:`run` sends it one case."""

    def __init__(self, limit: int = LIMIT):
        self.limit = limit
        self._start()

    def _start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "giod_bench.fuzz", str(self.limit)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, root: Path, query: bool = False) -> dict[str, str]:
        """Outcome of every path on the federation at ``root`` (and of a server's query, if ``query``);
        ``{"crash": ...}`` when the child died."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps({"root": str(root), "query": query}) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            code = self.proc.wait()
            self._start()
            return {"crash": f"the reading child died with exit status {code}"}
        out: dict[str, str] = json.loads(line)
        return out

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def bad(outcome: dict[str, str]) -> dict[str, str]:
    """The paths of an outcome that are neither valid data nor a GiodError."""
    return {k: v for k, v in outcome.items() if not (v == "ok" or v.startswith("GiodError:"))}


def _query(root: Path) -> None:
    """``POST /api/v1/query`` on a real server on loopback (in this child): a 4xx, or a valid answer."""
    import http.client

    import pyarrow.ipc as ipc

    import giod
    from giod.server.app import ServerThread, create_app

    with giod.open(root) as fed:
        token = fed.catalog.create_token("admin", note="fuzz")[1]
    with ServerThread(create_app(str(root))) as url:
        conn = http.client.HTTPConnection("127.0.0.1", int(url.rsplit(":", 1)[1]), timeout=120)
        body = json.dumps({"dataset": "qcd", "where": "count(jets.pt > 0) >= 1", "columns": ["event", "jets.pt"]})
        conn.request("POST", "/api/v1/query", body=body.encode(),
                     headers={"content-type": "application/json", "authorization": f"Bearer {token}"})
        r = conn.getresponse()
        data = r.read()
        conn.close()
    if 400 <= r.status < 500:
        raise giod.GiodError(f"HTTP {r.status}: {data[:200]!r}")
    if r.status != 200:
        raise AssertionError(f"HTTP {r.status}: {data[:200]!r}")
    ipc.open_stream(data).read_all().validate(full=True)


def _remote(root: Path, valid: Any) -> None:
    """The giod client reading the dataset from a real server on loopback (in this child), as another site's
    reader would: a dense read of every database (gathered: each buffer received where its joined column
    holds it), a selection, single events. The server sends the stored bytes as they are: the client checks
    them."""
    import awkward as ak

    import giod
    from giod.server.app import ServerThread, create_app

    with giod.open(root) as fed:
        token = fed.catalog.create_token("read", "qcd", note="fuzz")[1]
    with ServerThread(create_app(str(root))) as url, giod.open(url, token=token) as remote:
        ds = remote.dataset("qcd")
        ds.databases()  # the open times the round trip; a loaded machine's may pass the gather's bound
        remote.site("local").endpoint.round_trip = 0.0  # type: ignore[attr-defined]  # the gather is checked
        for columns in (["hits"], ["jets", "tracks", "hits"]):
            valid(ds.read(columns))
        valid(ds.select("njets >= 2").read(["jets", "hits"]))
        for k in (0, 5, 2 * EVENTS - 1):
            ak.to_list(ds.event(k))


def _paths(root: Path, query: bool = False) -> dict[str, str]:
    import tempfile

    import awkward as ak

    import giod
    from giod.display.phoenix import phoenix_event
    from giod.exchange.copy import copy_dataset
    from giod.interchange.export import write_parquet

    out: dict[str, str] = {}

    def valid(arr: Any) -> None:
        problem = ak.validity_error(arr)
        if problem:
            raise AssertionError(f"invalid data returned: {problem}")

    fed = giod.open(root)
    ds = fed.dataset("qcd")
    scratch = Path(tempfile.mkdtemp(prefix="giod-fuzz-"))

    def navigate() -> None:
        a = ds.read(["jets", "tracks", "hits"])
        valid(a)
        ak.to_list(a.jets.tracks.pt)
        ak.to_list(a.tracks.hits.x)
        ak.to_list(a.jets.leading.pt)

    def iterate() -> None:
        for a in ds.iterate(step_size=7):  # steps across batch boundaries
            valid(a)

    def copy() -> None:
        dst = giod.open(scratch / "dst", create=True)
        try:
            copy_dataset(fed, dst, "qcd")
            valid(dst.dataset("qcd").read())
        finally:
            dst.close()

    checks = {
        "read": lambda: valid(ds.read()),
        "iterate": iterate,
        "select-tag": lambda: valid(ds.select("njets >= 2").read(["jets", "hits"])),
        "select-objects": lambda: valid(ds.select("count(jets.pt > 0) >= 1").read(["jets"])),
        "event": lambda: [ak.to_list(ds.event(k)) for k in (0, 5, 27, EVENTS - 1)],
        "navigate": navigate,
        "display": lambda: json.dumps(phoenix_event(ds, 5)),
        "export": lambda: write_parquet(scratch / "x.parquet", ds.iterate(step_size=25), ds.schema),
        "copy": copy,
    }
    if query:  # a server: slower to start, so not every case
        checks["query"] = lambda: _query(root)
        checks["remote"] = lambda: _remote(root, valid)
    try:
        for name, check in checks.items():
            try:
                check()
                out[name] = "ok"
            except giod.GiodError as exc:
                out[name] = f"GiodError: {type(exc).__name__}: {str(exc)[:300]}"
            except Exception as exc:  # noqa: BLE001 - what the fuzzer looks for
                out[name] = f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        fed.close()
        shutil.rmtree(scratch, ignore_errors=True)
    return out


def _child(limit: int) -> None:
    import resource

    import awkward  # noqa: F401 - imported before the limit: only reading is limited

    import giod.display.phoenix
    import giod.exchange.copy
    import giod.interchange.export  # noqa: F401

    logging.disable(logging.WARNING)  # failed reads are reported here, not logged
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    for line in sys.stdin:
        case = json.loads(line)
        print(json.dumps(_paths(Path(case["root"]), bool(case.get("query")))), flush=True)


def run(cases: int, seed: int, workdir: Path) -> dict[str, Any]:
    """``cases`` random mutations (a third each on uncompressed and compressed Arrow and on Parquet
    containers): counts of outcomes, and the failures."""
    rng = np.random.default_rng(seed)
    bases = {name: base(workdir / name, **kw) for name, kw in BASES.items()}
    child = Child()
    failures: list[dict[str, Any]] = []
    refused = 0
    try:
        for i in range(cases):
            name = list(BASES)[i % len(BASES)]
            m = random_mutation(rng, parquet=name == "parquet")
            apply(bases[name], workdir / "case", m)
            outcome = child.run(workdir / "case", query=i % 25 == 0)  # a server is slow to start: now and then
            refused += any(v.startswith("GiodError:") for v in outcome.values())
            if bad(outcome):
                failures.append({"mutation": asdict(m), "base": name, "outcome": bad(outcome)})
    finally:
        child.close()
    return {"cases": cases, "seed": seed, "refused": refused, "failures": failures}


if __name__ == "__main__":
    _child(int(sys.argv[1]) if len(sys.argv) > 1 else LIMIT)


@click.command("fuzz")
@click.option("--cases", type=click.IntRange(min=1), default=200, show_default=True,
              help="Mutated containers to read through every path.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random mutations.")
@click.option("-o", "--output", type=click.Path(file_okay=False), default=None,
              help="Directory for bench-fuzz.json [default: benchmarks/results].")
@click.option("--workdir", type=click.Path(file_okay=False), default=None,
              help="Directory for the federations of the cases [default: the system's temporary directory].")
def command(cases: int, seed: int, output: str | None, workdir: str | None) -> None:
    """Structure-aware fuzzing: mutated containers, checksums recomputed, read through every path.

    Every outcome must be valid data or a GiodError; a crash, a signal or another exception fails (exit 1).

    Example: giod bench fuzz --cases 1000 --seed 7
    """
    import tempfile

    from giod_bench.options import DEFAULT_OUTPUT

    with tempfile.TemporaryDirectory(prefix="giod-fuzz-", dir=workdir) as tmp:
        result = run(cases, seed, Path(tmp))
    out = Path(output or DEFAULT_OUTPUT)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench-fuzz.json").write_text(json.dumps(result, indent=1))
    click.echo(f"fuzz: {cases} cases (seed {seed}), {result['refused']} refused with a GiodError, "
               f"{len(result['failures'])} failures; wrote {out / 'bench-fuzz.json'}")
    for f in result["failures"][:20]:
        click.echo(f"  {json.dumps(f)[:400]}")
    if result["failures"]:
        raise SystemExit(1)
