"""The options and helpers the ``giod bench`` commands share, declared once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from giod.errors import ConfigError
from giod_bench.report import Outcome, publish

DEFAULT_OUTPUT = "benchmarks/results"


def _options(default_events: int, quick_events: int) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options every benchmark shares (declared once)."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(
            [
                click.option(
                    "--events",
                    type=click.IntRange(min=1),
                    default=None,
                    help=f"Events [default: {default_events:,}; {quick_events:,} with --quick].",
                ),
                click.option(
                    "--repeat",
                    type=click.IntRange(min=1),
                    default=None,
                    help="Timed repeats; medians are quoted [default: 3; 1 with --quick].",
                ),
                _quick,
                _output,
                _workdir,
            ]
        ):
            fn = option(fn)
        return fn

    return decorate


_quick = click.option("--quick", is_flag=True, help="Tiny sizes: a smoke test of the whole benchmark.")
_output = click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False),
    default=DEFAULT_OUTPUT,
    show_default=True,
    help="Directory for bench-<name>.json and .png.",
)
_workdir = click.option(
    "--workdir",
    type=click.Path(file_okay=False),
    default=None,
    help="Directory (on the disk to measure) for the benchmark's temporary data "
    "[default: the system's temporary directory].",
)


def _sizes(events: int | None, repeat: int | None, quick: bool, default: int, small: int) -> tuple[int, int]:
    return events or (small if quick else default), repeat or (1 if quick else 3)


def _workdir_path(workdir: str | None) -> str | None:
    if workdir is not None:
        Path(workdir).mkdir(parents=True, exist_ok=True)
    return workdir


def _publish(outcome: Outcome, output: str, plot: Callable[[Outcome, Path], None]) -> None:
    json_path, png_path = publish(outcome, output, plot)
    click.echo(f"wrote {json_path} and {png_path}")


def numbers(text: str, option: str, kind: type = float, minimum: float = 0) -> tuple[Any, ...]:
    """The comma-separated numbers of an option (ConfigError unless all are >= ``minimum``)."""
    try:
        values = tuple(kind(p) for p in text.split(",") if p.strip())
    except ValueError:
        values = ()
    if not values or any(v < minimum for v in values):
        raise ConfigError(f"{option} wants comma-separated numbers of at least {minimum:g}, got {text!r}")
    return values
