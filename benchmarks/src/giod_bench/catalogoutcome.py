"""The catalog benchmark as ``giod bench catalog`` runs it: SQLite, and PostgreSQL when reachable.

:func:`giod_bench.catalog.run` measures one catalog; this module runs it on
SQLite and on a throwaway PostgreSQL database, and holds the table and plot.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from giod_bench.report import Bars, Column, Outcome, Table, figure, ratio, save

POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
#: registrations per second each catalog must sustain, flat as it grows (issue 25)
REGISTRATION_GOALS = {"SQLite": 500.0, "PostgreSQL": 2_000.0}


def catalog_outcome(
    n: int, step: int, postgres: str | None, workdir: str | None, writers: int = 8
) -> Outcome:
    """Run the catalog benchmark on SQLite (always) and PostgreSQL (when reachable).

    ``writers`` threads of one process commit at once (their commits share
    transactions: group commit); 1 commits one after the other.
    """
    from giod_bench import catalog

    results: dict[str, list[dict[str, float]]] = {}
    notes: list[str] = []
    with (
        Bars() as bars,
        tempfile.TemporaryDirectory(prefix="giod-bench-catalog-", dir=workdir) as tmp,
    ):
        with bars.task("SQLite", n) as advance:
            done = [0]

            def progress(d: int, total: int) -> None:
                advance(d - done[0])
                done[0] = d

            results["SQLite"] = catalog.run(
                f"sqlite:///{Path(tmp) / 'catalog.sqlite'}",
                n_databases=n,
                step=step,
                progress=progress,
                writers=writers,
            )
        if postgres is not None:
            with _throwaway_postgres(postgres, notes) as url:
                if url is not None:
                    with bars.task("PostgreSQL", n) as advance:
                        done = [0]
                        results["PostgreSQL"] = catalog.run(
                            url, n_databases=n, step=step, progress=progress, writers=writers
                        )
    rows = [
        {"backend": b, **r, "goal": REGISTRATION_GOALS[b], "met": "yes" if r["rate"] >= REGISTRATION_GOALS[b] else "no"}
        for b, rs in results.items()
        for r in rs
    ]
    for b, rs in results.items():
        slowest = min(r["rate"] for r in rs)
        notes.append(
            f"{b}: {rs[0]['rate']:,.0f}/s in the first step, {rs[-1]['rate']:,.0f}/s in the "
            f"last ({ratio(rs[-1]['rate'], rs[0]['rate']):.2f}× of the first) at "
            f"{rs[-1]['databases']:,.0f} databases; slowest step {slowest:,.0f}/s against the goal of "
            f"{REGISTRATION_GOALS[b]:,.0f}/s ({'met' if slowest >= REGISTRATION_GOALS[b] else 'missed'})"
        )
    notes.append(
        "each registration: one database with 4 containers of 10 clusters, 8 tag statistics, one "
        "replica, by one commit_database call; 'list s' lists every database of the dataset after the step, "
        "'prune s' the 1 % whose tag statistics overlap mjj >= 500 (pruned in SQL)"
    )
    notes.append(
        f"{writers} writer thread(s) of one process; concurrent commits share one transaction "
        "and one fsync (group commit), each with its own version"
    )
    return Outcome(
        name="catalog",
        parameters={
            "databases": n,
            "step": step,
            "writers": writers,
            "postgres": postgres is not None and "PostgreSQL" in results,
        },
        tables=[
            Table(
                "results",
                f"catalog: registrations per second up to {n:,} databases",
                CATALOG_COLUMNS,
                rows,
            )
        ],
        notes=notes,
    )


@contextmanager
def _throwaway_postgres(server: str, notes: list[str]) -> Iterator[str | None]:
    """URL of a fresh database on PostgreSQL ``server``, dropped afterwards; None if unreachable."""
    import psycopg
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    name = f"giod_bench_{uuid.uuid4().hex[:12]}"
    try:
        url = make_url(server)
        admin = psycopg.connect(
            url.set(drivername="postgresql").render_as_string(hide_password=False),
            autocommit=True,
            connect_timeout=3,
        )
    except (ArgumentError, psycopg.Error) as exc:
        notes.append(f"PostgreSQL left out: {server} is not reachable ({type(exc).__name__})")
        yield None
        return
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield url.set(database=name).render_as_string(hide_password=False)
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


CATALOG_COLUMNS = [
    Column("backend", "catalog"), Column("databases", "databases", "{:,.0f}"),
    Column("rate", "registrations/s", "{:,.0f}"), Column("goal", "goal /s", "{:,.0f}"), Column("met", "goal met"),
    Column("seconds", "step s", "{:.2f}"),
    Column("list_seconds", "list s", "{:.3f}"), Column("prune_seconds", "prune s", "{:.3f}"),
]  # fmt: skip


def plot_catalog(outcome: Outcome, path: Path) -> None:
    """Registration rate against catalog size, one line per backend."""
    rows = outcome.table("results").rows
    fig, (ax, ax2) = figure("giod catalog: registrations as the federation grows", ncols=2)
    for backend in dict.fromkeys(r["backend"] for r in rows):
        pts = [(r["databases"], r["rate"], r["list_seconds"]) for r in rows if r["backend"] == backend]
        x, rate, listed = zip(*pts, strict=True)
        ax.plot(x, rate, marker="o", label=backend)
        ax2.plot(x, listed, marker="o", label=backend)
    for backend, goal in REGISTRATION_GOALS.items():
        if any(r["backend"] == backend for r in rows):
            ax.axhline(goal, linestyle="--", color="grey", label=f"goal, {backend}: {goal:,.0f}/s")
    ax.set_xlabel("databases in the catalog")
    ax.set_ylabel("registrations per second")
    ax2.set_xlabel("databases in the catalog")
    ax2.set_ylabel("seconds to list the dataset")
    for a in (ax, ax2):
        a.grid(alpha=0.3)
        a.legend(fontsize="small")
    save(fig, path)
