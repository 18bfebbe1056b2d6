"""``giod sql``: one SQL query over a dataset's tags and collections, with DuckDB (giod.interchange.sql).

The command is made by :func:`sql_command` from the CLI's federation option
and opener, which ``giod.cli`` passes down: this module imports nothing of
``giod.cli`` but its output rule, so no circle of files is added.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from giod.cli.output import OutputPath, writing
from giod.errors import ConfigError


def _cell(value: Any) -> str:
    return "NULL" if value is None else f"{value:.6g}" if isinstance(value, float) else str(value)


def _print(table: Any, limit: int) -> None:
    from rich.console import Console
    from rich.table import Table

    shown = Table(show_edge=False)
    for name in table.column_names:
        shown.add_column(name, overflow="fold")
    for row in table.slice(0, limit).to_pylist():
        shown.add_row(*[_cell(v) for v in row.values()])
    Console(soft_wrap=True).print(shown)


def sql_command(federation_option: Callable[[Any], Any], open_federation: Callable[[str], Any]) -> click.Command:
    """The ``giod sql`` command, opening its federation with ``open_federation`` (``-f`` and ``--token``)."""

    @click.command("sql")
    @click.argument("dataset")
    @click.argument("query")
    @click.option("--where", "expression", default=None, help="giod selection applied first (tags and objects).")
    @click.option("--version", "version", type=click.IntRange(min=0), default=None,
                  help="Federation version to read (default: the current one).")
    @click.option("--limit", default=20, show_default=True, type=click.IntRange(min=0), help="Rows to print.")
    @click.option("-o", "--output", type=OutputPath(), default=None, help="Write the result to this Parquet file.")
    @federation_option
    def command(dataset: str, query: str, expression: str | None, version: int | None, limit: int,
                output: str | None, federation: str) -> None:
        """Run an SQL query (DuckDB) over a dataset: table `tags` and one table per collection.

        Every table has the column `entry` (the event's entry) to join on; a
        collection's table has one row per object, with its `index` in the event.
        Needs pip install 'giod[sql]'.

        Example: giod sql ttbar "SELECT count(*) FROM Jet WHERE pt > 30" --where "nMuon >= 1"
        """
        from giod.interchange.sql import sql as run_sql

        if not query.strip():
            raise ConfigError("the SQL query is empty")
        fed = open_federation(federation)
        result = run_sql(fed.dataset(dataset, version).select(expression), query)
        if output is not None:
            import pyarrow.parquet as pq

            with writing(output):
                pq.write_table(result, output, compression="zstd")
            click.echo(f"wrote {result.num_rows:,} rows to {output}")
            return
        _print(result, limit)
        more = f", {limit:,} shown" if result.num_rows > limit else ""
        click.echo(f"{result.num_rows:,} rows{more}")

    return command
