"""The ``giod`` command line."""

import click


@click.group()
def main() -> None:
    """giod: a federated object store for particle-physics event data."""
