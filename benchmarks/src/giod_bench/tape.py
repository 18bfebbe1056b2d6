"""Tape benchmark: a job over a dataset on tape, planned bulk staging against one file at a time.

A dataset of ``--databases`` databases (synthetic events, four containers
each) is written to disk, then moved by ``giod.tier`` to a nearline site: a
simulated tape library with ``--drives`` drives and LTO-9 figures (30 s
mount, 25 s unmount, 3 s + up to 100 s locate, 400 MB/s), whose write pool
spreads consecutive files over ``--cartridges`` cartridges, as a library
writing many streams at once does. Two jobs run over it, all files on tape
and the drives empty before each:

- ``select``: a selection of 0.1 % of the events (``ht`` above its 99.9th
  percentile), its tags and jets read;
- ``map``: ``giod.distributed.map_selection`` over every database, counting jets.

Each job runs twice: as giod plans it (``tape_bulk_staging``: every file in
one request, ordered by cartridge and position, the partitions on disk read
first) and as a job that asks for one file at a time in its own order
(GIOD's behaviour on HPSS). Quoted beside each: the mounts, the tape time the
job took on the library's clock, and the physical limit of the files it
needed, as the issue defines it (each needed cartridge mounted once, plus the
bytes at the drive rate, spread over the drives), and also with the unmounts
a drive cannot avoid between two cartridges. A read that waits longer than
``--timeout`` (tape seconds) would have timed out in a client with that
timeout; giod's waits have none and are counted all the same. The results of
every run are compared with the same job on disk.

The library's clock runs at time scale 0: waiting jumps it to the moment
the file is on disk, so the tape times are exact and the run takes minutes
of real time, not hours.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import awkward as ak
import click
import numpy as np

import giod
from giod.errors import ConfigError

__all__ = ["command", "run"]

DEFAULT_DATABASES = 1000
QUICK_DATABASES = 60


def _events(n: int, seed: int) -> ak.Array:
    from giod.testing import synthetic

    return synthetic.events(n, seed=seed, hits=4, cells=4, tracks=3, jets=3)


def _count_jets(events: ak.Array) -> int:
    return int(ak.sum(ak.num(events.jets)))


class _Waits:
    """Tape seconds each read of the site waited, measured around the site's ``open``."""

    def __init__(self, site: Any):
        self.site = site
        self.waits: list[float] = []
        inner = site.open

        def open_(path: str) -> Any:
            t0 = site.library.now()
            fh = inner(path)
            self.waits.append(site.library.now() - t0)
            return fh

        site.open = open_


def _limit(lib: Any, paths: list[str], drives: int) -> tuple[float, float, int]:
    """The physical limit of staging ``paths``: (the issue's formula, the one with unmounts, cartridges).

    The issue's: each cartridge mounted once, the bytes at the drive rate, all spread evenly over the
    drives. With unmounts: a drive also unloads a cartridge before it loads the next, and cartridges
    are whole, so some drive mounts ceil(cartridges / drives) of them.
    """
    states = lib.files(paths)
    carts = {f.cartridge for f in states.values()}
    size = sum(f.size for f in states.values())
    s = lib.settings
    used = min(drives, len(carts))
    if not used:
        return 0.0, 0.0, 0
    plain = (len(carts) * s.mount_s + size / s.rate) / used
    spread = (len(carts) * s.mount_s + max(0, len(carts) - used) * s.unmount_s + size / s.rate) / used
    most = -(-len(carts) // used)
    whole = most * s.mount_s + (most - 1) * s.unmount_s
    return plain, max(spread, whole), len(carts)


def _migration(lib: Any, before: dict[str, float], tape_s: float, drives: int, real: float) -> dict[str, Any]:
    """The row of the move to tape: the files written from the library's queue, a mount per cartridge."""
    after = lib.counters()
    plain, full, carts = _limit(lib, lib.paths(), drives)
    return {"job": "move to tape", "mode": "queued, flushed", "files": int(after["written_files"] - before[
        "written_files"]), "cartridges": carts, "mounts": int(after["mounts"] - before["mounts"]), "tape_s": tape_s,
        "limit_s": plain, "limit_unmounts_s": full, "ratio": tape_s / plain if plain else None,
        "ratio_unmounts": tape_s / full if full else None, "reads": None, "longest_wait_s": None, "timeouts": None,
        "identical": None, "real_s": real}


def run(databases: int, per_database: int, drives: int, cartridges: int, timeout: float, workdir: str | None,
        say: Callable[[str], None]) -> list[dict[str, Any]]:
    """Write, move to tape, run both jobs both ways; one row per (job, mode)."""
    from giod.storage.tape import NearlineSite
    from giod.tier import move_to_nearline

    if workdir is not None:
        Path(workdir).mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="giod-bench-tape-", dir=workdir))
    rows: list[dict[str, Any]] = []
    saved = os.environ.get("GIOD_TAPE_BULK_STAGING")
    try:
        fed = giod.open(root / "fed", create=True)
        from giod.testing import synthetic

        ds = fed.create_dataset("runs", synthetic.schema())
        t0 = time.perf_counter()
        events = _events(databases * per_database, seed=29)
        with ds.writer(database_events=per_database, cluster_events=per_database) as w:
            w.append(events)
        say(f"wrote {databases} databases in {time.perf_counter() - t0:.0f} s")
        # a window in the middle: every database's tag range holds it, so no statistics prune and the
        # tags of every database must be read to find the 0.1 % (the hard case for tape)
        lo, hi = (float(q) for q in np.quantile(ak.to_numpy(events["ht"]), [0.5, 0.501]))
        expression = f"ht >= {lo!r} and ht < {hi!r}"
        disk_sel = ds.select(expression).read(["ht", "jets"])
        from giod import distributed

        disk_map = distributed.map_selection(ds.select(None), _count_jets, columns=["jets"], scheduler="sync")
        fed.add_site("vault", f"tape://{root / 'vault'}?time_scale=0&drives={drives}&write_pool={cartridges}",
                     distance=10)
        site = fed.store.site("vault")
        assert isinstance(site, NearlineSite)
        lib = site.library
        before = lib.counters()
        t0 = time.perf_counter()
        moved = move_to_nearline(fed.store, "runs", "vault", streams=2)
        real = time.perf_counter() - t0
        rows.append(_migration(lib, before, moved.tape_s, drives, real))
        say(f"moved to tape in {real:.0f} s: {rows[-1]['mounts']} mounts, {moved.tape_s:,.0f} s of tape time "
            f"({rows[-1]['ratio']:.2f}x the limit)")

        def job(kind: str, fresh: giod.Federation) -> Any:
            if kind == "select":
                return fresh.dataset("runs").select(expression).read(["ht", "jets"])
            sel = fresh.dataset("runs").select(None)
            return distributed.map_selection(sel, _count_jets, columns=["jets"], scheduler="sync")

        for kind, expected in (("select", disk_sel), ("map", disk_map)):
            for mode in ("planned", "one at a time"):
                for path in lib.paths():
                    lib.evict(path)
                for rid in lib.requests():
                    lib.release(rid)
                lib.unload()
                os.environ["GIOD_TAPE_BULK_STAGING"] = "true" if mode == "planned" else "false"
                # each run a job of its own: nothing a run before kept in the process (the merged tag
                # index of a store, footers) spares it a read from tape
                fresh = giod.open(root / "fed")
                waits = _Waits(fresh.store.site("vault"))
                before = lib.counters()
                t0 = time.perf_counter()
                try:
                    result = job(kind, fresh)
                finally:
                    fresh.close()
                real = time.perf_counter() - t0
                after = lib.counters()
                # what the job asked for: on disk now, or still coming for a database it turned out not to need
                staged_now = [p for p, f in lib.files().items() if f.state != "tape"]
                plain, full, carts = _limit(lib, staged_now, drives)
                same = (ak.to_list(result) == ak.to_list(expected)) if kind == "select" else result == expected
                tape_s = after["now"] - before["now"]
                rows.append({
                    "job": kind, "mode": mode, "files": int(after["staged_files"] - before["staged_files"]),
                    "cartridges": carts, "mounts": int(after["mounts"] - before["mounts"]),
                    "tape_s": tape_s, "limit_s": plain, "limit_unmounts_s": full,
                    "ratio": tape_s / plain if plain else None, "ratio_unmounts": tape_s / full if full else None,
                    "reads": len(waits.waits), "longest_wait_s": max(waits.waits, default=0.0),
                    "timeouts": sum(w > timeout for w in waits.waits), "identical": bool(same), "real_s": real,
                })
                r = rows[-1]
                say(f"{kind} {mode}: {r['mounts']} mounts, {tape_s:,.0f} s of tape time "
                    f"({r['ratio']:.2f}x the limit), {real:.1f} s real")
        fed.close()
    finally:
        if saved is None:
            os.environ.pop("GIOD_TAPE_BULK_STAGING", None)
        else:
            os.environ["GIOD_TAPE_BULK_STAGING"] = saved
        shutil.rmtree(root, ignore_errors=True)
    return rows


def _print(rows: list[dict[str, Any]], params: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"giod bench tape: {params['databases']} databases on {params['cartridges']} cartridges, "
                    f"{params['drives']} drives (tape seconds on the library's clock)")
    cols = [("job", "{}"), ("mode", "{}"), ("files", "{:,}"), ("cartridges", "{}"), ("mounts", "{:,}"),
            ("tape_s", "{:,.0f}"), ("limit_s", "{:,.0f}"), ("ratio", "{:.2f}x"),
            ("limit_unmounts_s", "{:,.0f}"), ("ratio_unmounts", "{:.2f}x"), ("reads", "{:,}"),
            ("longest_wait_s", "{:,.0f}"),
            ("timeouts", "{}"), ("identical", "{}"), ("real_s", "{:.1f}")]
    for name, _ in cols:
        t.add_column(name.replace("_", " "), justify="left" if name in ("job", "mode") else "right")
    for r in rows:
        t.add_row(*["–" if r.get(k) is None else fmt.format(r[k]) for k, fmt in cols])
    Console(width=200).print(t)
    for kind in ("select", "map"):
        p = next(r for r in rows if r["job"] == kind and r["mode"] == "planned")
        o = next(r for r in rows if r["job"] == kind and r["mode"] != "planned")
        print(f"{kind}: {o['mounts'] / max(p['mounts'], 1):.1f}x fewer mounts, "
              f"{o['tape_s'] / max(p['tape_s'], 1e-9):.1f}x less tape time planned than one at a time")


@click.command("tape")
@click.option("--databases", type=click.IntRange(min=1), default=None,
              help=f"Databases of the dataset [default: {DEFAULT_DATABASES:,}; {QUICK_DATABASES} with --quick].")
@click.option("--events", "per_database", type=click.IntRange(min=10), default=50, show_default=True,
              help="Events per database.")
@click.option("--drives", type=click.IntRange(1, 16), default=3, show_default=True)
@click.option("--cartridges", type=click.IntRange(1, 1000), default=24, show_default=True,
              help="Cartridges the library's write pool spreads the files over.")
@click.option("--timeout", type=float, default=600.0, show_default=True,
              help="Tape seconds past which a waiting read counts as a client's timeout.")
@click.option("--quick", is_flag=True, help="A small dataset: a smoke test of the whole benchmark.")
@click.option("-o", "--output", type=click.Path(file_okay=False), default="benchmarks/results", show_default=True,
              help="Directory for bench-tape.json.")
@click.option("--workdir", type=click.Path(file_okay=False), default=None, help="Directory for temporary data.")
def command(databases: int | None, per_database: int, drives: int, cartridges: int, timeout: float, quick: bool,
            output: str, workdir: str | None) -> None:
    """A 0.1 % selection and a full map over a dataset on tape: planned bulk staging vs one file at a time.

    Example: giod bench tape --quick
    """
    import json

    n = databases or (QUICK_DATABASES if quick else DEFAULT_DATABASES)
    if cartridges > 4 * n:
        raise ConfigError(f"--cartridges {cartridges}: more than the {4 * n} files of {n} databases")
    params = {"databases": n, "events_per_database": per_database, "drives": drives, "cartridges": cartridges,
              "timeout_s": timeout}
    rows = run(n, per_database, drives, cartridges, timeout, workdir, lambda m: click.echo(m, err=True))
    _print(rows, params)
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench-tape.json").write_text(json.dumps({"benchmark": "tape", "parameters": params, "rows": rows},
                                                    indent=2) + "\n")
    click.echo(f"wrote {out / 'bench-tape.json'}")
