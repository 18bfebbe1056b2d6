"""Structure-aware fuzzing of container files: every read path, under an address-space limit, never a signal.

A small synthetic dataset is written once; each case copies it, changes one
container as :class:`Mutation` says (list offsets, relation values, field
node lengths and null counts, buffer spans, compressed length prefixes, the
batch's length, bytes of its metadata or of the footer), makes every
checksum agree again (``giod_bench.crafted``) and hands the copy to a child
process. The child, limited to :data:`LIMIT` bytes of address space, reads it
through every path — read, iterate, tag and object selections, single
events, relation navigation, the Phoenix export of an event, export to
Parquet and ``giod copy`` to another federation — and answers one line per
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

__all__ = ["CONTAINERS", "KINDS", "LIMIT", "Child", "Mutation", "apply", "bad", "base", "command", "random_mutation",
           "run"]

#: bytes of address space a reading child may use
LIMIT = 3 << 30
EVENTS, CLUSTER = 60, 20
CONTAINERS = ("reco", "raw.tracker", "raw.calo", "tag")
KINDS = ("offset", "relation", "node", "span", "prefix", "length", "meta", "footer")
#: values an attacker likes: off by one, negative, past the end, huge
VALUES = (-1, -2, 0, 1, 2, 3, 7, 64, 1000, 3000, 100_000_000, (1 << 31) - 1, -(1 << 31), 1 << 40)


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


def base(root: Path, compressed: bool = False) -> Path:
    """The dataset every case starts from: ``EVENTS`` synthetic events in clusters of ``CLUSTER``."""
    import giod
    from giod.storage.container import WriteOptions
    from giod.testing import synthetic

    fed = giod.open(root, create=True)
    ds = fed.create_dataset("qcd", synthetic.schema())
    options = WriteOptions(compression="zstd", min_savings=0.0) if compressed else WriteOptions(compression="none")
    with ds.writer(database_events=EVENTS, cluster_events=CLUSTER, options=options) as w:
        w.append(synthetic.events(EVENTS, seed=5))
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
    before = crafted.seal(data)
    _change(data, schema, m)
    crafted.reseal(data)
    path.write_bytes(data)
    crafted.recatalog(f"sqlite:///{root / 'catalog.sqlite'}", rec.path, crafted.seal(data, before))


def random_mutation(rng: np.random.Generator) -> Mutation:
    return Mutation(str(rng.choice(KINDS)), str(rng.choice(CONTAINERS)), int(rng.integers(0, 8)),
                    int(rng.integers(0, 1 << 16)), int(rng.integers(0, 1 << 20)), int(rng.choice(VALUES)))


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
    if query:
        checks["query"] = lambda: _query(root)
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
    """``cases`` random mutations (half on a compressed dataset): counts of outcomes, and the failures."""
    rng = np.random.default_rng(seed)
    plain, packed = base(workdir / "plain"), base(workdir / "packed", compressed=True)
    child = Child()
    failures: list[dict[str, Any]] = []
    refused = 0
    try:
        for i in range(cases):
            m = random_mutation(rng)
            apply(packed if i % 2 else plain, workdir / "case", m)
            outcome = child.run(workdir / "case", query=i % 25 == 0)  # a server is slow to start: now and then
            refused += any(v.startswith("GiodError:") for v in outcome.values())
            if bad(outcome):
                failures.append({"mutation": asdict(m), "compressed": bool(i % 2), "outcome": bad(outcome)})
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
