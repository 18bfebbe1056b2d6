"""``giod bench``: benchmarks (being written)."""

import click


@click.group()
def bench() -> None:
    """Benchmarks beside their peers and physical limits."""
