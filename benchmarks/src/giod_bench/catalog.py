"""Catalog benchmark: registrations per second as the catalog grows, and per durability mode.

Each registration is what a writer commits for one database: 4 containers
(raw.tracker, raw.calo, reco, tag) of 10 clusters each, 8 tag statistics,
program parameters, one replica. ``run`` adds a fresh dataset to the catalog
at ``url`` (so it can run against a catalog in use) and, after every
``step`` registrations, also times listing the whole dataset (three queries)
and listing the 1 % of its databases whose tag statistics overlap a
selection's range (``mjj >= 500``), pruned in SQL as a selection does.

``durability`` puts the durable default (SQLite ``synchronous=FULL``: every
commit waits for the WAL to reach the disk) beside ``NORMAL`` (no sync per
commit), in interleaved rounds, so that the fsync-bound rate and the
CPU-bound rate show side by side; on PostgreSQL the pair is
``synchronous_commit`` on and off. From a shell::

    python -m giod_bench.catalog --databases 1000 --rounds 3 [--postgres URL]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from giod.catalog import Catalog, ContainerSpec, DatabaseCommit

__all__ = ["durability", "main", "run"]

_CONTAINERS = ("raw.tracker", "raw.calo", "reco", "tag")
_TAGS = ("njets", "ht", "lead_jet_pt", "mjj", "met", "nmuons", "nelectrons", "ntracks")
_EVENTS = 10_000
_CLUSTERS = (1_000,) * 10
_SITE = "bench"
_PRUNE = {"mjj": (500.0, float("inf"))}  # a selection's tag range: 1 % of the databases overlap it


def _commit(dataset: str, schema_id: int, i: int) -> DatabaseCommit:
    containers = tuple(
        ContainerSpec(
            name,
            f"{dataset}/db{i:07d}/{name}.parquet",
            f"crc32c:{(i * 31 + k) & 0xFFFFFFFF:08x}",
            40_000_000 + 1_000 * k + i % 997,
            _CLUSTERS,
            schema_id,
        )
        for k, name in enumerate(_CONTAINERS)
    )
    tags = {
        name: (float(k + i % 7), float(100 * (k + 1) + i % 101)) for k, name in enumerate(_TAGS)
    }
    return DatabaseCommit(
        dataset=dataset,
        n_events=_EVENTS,
        site=_SITE,
        containers=containers,
        tag_stats=tags,
        writer=f"bench:{i % 8}",
        program="giod_bench.catalog",
        program_version="1",
        parameters={"seed": i, "generator": "synthetic", "pileup": 40},
    )


def run(
    url: str,
    n_databases: int = 100_000,
    step: int = 5_000,
    progress: Callable[[int, int], None] | None = None,
    writers: int = 1,
) -> list[dict[str, float]]:
    """Register ``n_databases`` databases; one result per ``step``.

    Each result holds ``databases`` (registered so far), ``seconds`` (for this
    step), ``rate`` (registrations/s in this step) and ``list_seconds`` (time
    to list every database of the dataset afterwards), ``prune_seconds`` and
    ``kept`` (the pruned listing: its time and length). ``progress(done,
    total)`` is called after every step. ``writers`` threads commit
    concurrently (1: one after the other, each waiting for its own fsync).
    """
    results: list[dict[str, float]] = []
    with Catalog.open(url) as catalog:
        tag = uuid.uuid4().hex[:8]
        schema_id = catalog.add_schema("bench", "collections: {}\n", "sha256:giod-bench-catalog")
        dataset = catalog.create_dataset(f"bench_{tag}", schema_id).name
        if _SITE not in {s.name for s in catalog.sites()}:
            catalog.add_site(_SITE, "file:///bench", 0)
        done = 0
        while done < n_databases:
            count = min(step, n_databases - done)
            start = time.perf_counter()
            if writers == 1:
                for i in range(done, done + count):
                    catalog.commit_database(_commit(dataset, schema_id, i))
            else:  # concurrent writers of one process: their commits share transactions
                with ThreadPoolExecutor(writers) as pool:
                    list(pool.map(lambda i: catalog.commit_database(_commit(dataset, schema_id, i)),
                                  range(done, done + count)))
            seconds = time.perf_counter() - start
            done += count
            start = time.perf_counter()
            catalog.databases(dataset)
            listed = time.perf_counter() - start
            start = time.perf_counter()
            kept = catalog.databases(dataset, overlapping=_PRUNE)
            pruned = time.perf_counter() - start
            results.append(
                {
                    "databases": done,
                    "seconds": seconds,
                    "rate": count / seconds,
                    "list_seconds": listed,
                    "prune_seconds": pruned,
                    "kept": len(kept),
                }
            )
            if progress is not None:
                progress(done, n_databases)
    return results


def _with_option(url: str, option: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{option}"


def durability(
    directory: str | Path,
    n_databases: int = 1_000,
    rounds: int = 3,
    postgres: str | None = None,
) -> dict[str, list[float]]:
    """Registrations/s per durability mode, ``rounds`` interleaved rounds of ``n_databases``.

    SQLite runs on a fresh file in ``directory`` each round. ``postgres``, a
    URL of a scratch database, adds both ``synchronous_commit`` settings
    (each round a fresh dataset in the same catalog). Returns
    ``{mode: [rate of each round]}``; interleaving spreads the load of a
    busy machine over every mode alike.
    """
    def sqlite(mode: str) -> Callable[[int], str]:
        return lambda i: f"sqlite:///{Path(directory) / f'c{i}_{mode}.db'}?synchronous={mode}"

    modes: dict[str, Callable[[int], str]] = {
        f"SQLite synchronous={mode}": sqlite(mode) for mode in ("FULL", "NORMAL")
    }
    if postgres is not None:
        off = _with_option(postgres, "options=-csynchronous_commit%3Doff")
        modes["PostgreSQL synchronous_commit=on"] = lambda _: postgres
        modes["PostgreSQL synchronous_commit=off"] = lambda _: off
    rates: dict[str, list[float]] = {mode: [] for mode in modes}
    for i in range(rounds):
        for mode, url in modes.items():
            rates[mode].append(run(url(i), n_databases, n_databases)[0]["rate"])
    return rates


def main(argv: Sequence[str] | None = None) -> None:
    """Print the registration rate of each durability mode (median of interleaved rounds)."""
    parser = argparse.ArgumentParser(prog="python -m giod_bench.catalog", description=main.__doc__)
    parser.add_argument("--databases", type=int, default=1_000, help="registrations per round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per mode")
    parser.add_argument("--postgres", default=None, help="URL of a scratch PostgreSQL database")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="giod-bench-catalog-") as tmp:
        rates = durability(tmp, args.databases, args.rounds, args.postgres)
    for mode, values in rates.items():
        shown = ", ".join(f"{r:,.0f}" for r in values)
        print(f"{mode:36s} median {statistics.median(values):7,.0f}/s   rounds: {shown}")


if __name__ == "__main__":
    main()
