"""Tables the command line prints (rich), shared by the commands and ``giod demo``; it imports no command."""

from __future__ import annotations

from typing import Any


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"


def _table(title: str, header: list[str], rows: list[list[Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title)
    for h in header:
        t.add_column(h)
    for r in rows:
        t.add_row(*[str(x) for x in r])
    Console().print(t)


def print_cutflow(cutflow: Any, title: str) -> None:
    """A cut-flow table: each cut, the events it keeps, and their share of the row before and of the first."""
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title)
    t.add_column("cut")
    for name in ("events kept", "of the row before", "of all"):
        t.add_column(name, justify="right")
    for row in cutflow.table():
        t.add_row(*row)
    Console().print(t)
