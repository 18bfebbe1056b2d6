"""What every benchmark shares: median-of-N timing, progress bars, tables, JSON and PNG.

A benchmark's ``run(...)`` measures and returns an :class:`Outcome` (plain
numbers in tables); :func:`publish` prints its tables with rich and writes
``bench-<name>.json`` and ``bench-<name>.png`` into the output directory.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from giod.errors import ConfigError, StorageError

MB = 1e6  # rates are quoted in decimal megabytes, as disks and the issue quote them
K = TypeVar("K", bound=Hashable)


# ----------------------------------------------------------------- timing


@dataclass(frozen=True)
class Timing:
    """Wall-clock seconds of repeated runs of one measurement."""

    seconds: tuple[float, ...]

    @property
    def best(self) -> float:
        return min(self.seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    def as_dict(self) -> dict[str, Any]:
        return {"seconds": list(self.seconds), "best": self.best, "median": self.median}


def stopwatch(fn: Callable[[int], object]) -> Callable[[int], float]:
    """``fn`` made to return the seconds its call took."""

    def timed(i: int) -> float:
        start = time.perf_counter()
        fn(i)
        return time.perf_counter() - start

    return timed


def round_robin(
    clocks: Mapping[K, Callable[[int], float]],
    repeat: int,
    *,
    warmup: int = 0,
    advance: Callable[[int], None] | None = None,
) -> dict[K, Timing]:
    """Run every measurement once per round: ``warmup`` untimed rounds, then ``repeat``.

    Each clock runs its measurement for round ``i`` (negative in warm-up
    rounds) and returns the seconds it took: most wrap their work in
    :func:`stopwatch`, a writer benchmark times its own span. Taking the
    peers in turn, round after round, spreads the load of a shared machine
    over all of them alike, instead of giving one a quiet minute and the
    next a busy one.
    """
    if repeat < 1:
        raise ConfigError("repeat must be at least 1")
    for i in range(warmup):
        for clock in clocks.values():
            clock(-1 - i)
    seconds: dict[K, list[float]] = {key: [] for key in clocks}
    for i in range(repeat):
        for key, clock in clocks.items():
            seconds[key].append(clock(i))
            if advance is not None:
                advance(1)
    return {key: Timing(tuple(v)) for key, v in seconds.items()}


def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b``, or None when either is missing or ``b`` is zero."""
    if a is None or b is None or b == 0:
        return None
    return a / b


# --------------------------------------------------------------- progress


class Bars:
    """Progress bars for long steps (rich), or silence when ``enabled`` is false."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self._progress: Any = None

    def __enter__(self) -> Bars:
        if self.enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                transient=True,
            )
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    @contextmanager
    def task(self, description: str, total: int) -> Iterator[Callable[[int], None]]:
        """A bar of ``total`` steps; the yielded callable advances it."""
        progress = self._progress
        if progress is None:
            yield _ignore
            return
        task_id = progress.add_task(description, total=total)

        def advance(n: int = 1) -> None:
            progress.advance(task_id, n)

        try:
            yield advance
        finally:
            progress.remove_task(task_id)


def _ignore(n: int = 1) -> None:
    """Advances no bar."""


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class Column:
    """One column of a printed table: the row key, its header and how to format it."""

    key: str
    header: str
    fmt: str = "{}"

    def format(self, value: Any) -> str:
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            return "–"
        return self.fmt.format(value)


@dataclass
class Table:
    """Rows of plain values, printed with ``columns`` and stored in JSON under ``key``."""

    key: str
    title: str
    columns: Sequence[Column]
    rows: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Outcome:
    """What one benchmark run measured."""

    name: str
    parameters: dict[str, Any]
    tables: list[Table]
    notes: list[str] = field(default_factory=list)

    def table(self, key: str) -> Table:
        for t in self.tables:
            if t.key == key:
                return t
        raise KeyError(key)

    def as_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.name,
            "parameters": self.parameters,
            "environment": environment(),
            **{t.key: t.rows for t in self.tables},
            "notes": self.notes,
        }


def environment() -> dict[str, Any]:
    """The software and hardware a result was measured with."""
    versions: dict[str, str | None] = {}
    for pkg in ("giod", "numpy", "pyarrow", "awkward", "uproot"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    return {
        "python": sys.version.split()[0],
        "system": platform.system(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "versions": versions,
    }


def print_tables(outcome: Outcome, console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table as RichTable

    # a wide table when piped (to a file, a README): rich would wrap at 80 columns
    console = console or Console(width=None if sys.stdout.isatty() else 160)
    for t in outcome.tables:
        rt = RichTable(title=t.title)
        for c in t.columns:
            rt.add_column(c.header, justify="left" if c.fmt == "{}" else "right")
        for row in t.rows:
            rt.add_row(*[c.format(row.get(c.key)) for c in t.columns])
        console.print(rt)
    for note in outcome.notes:
        console.print(f"note: {note}", highlight=False, markup=False)


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot store {type(value).__name__} in JSON")


def publish(
    outcome: Outcome,
    output: str | os.PathLike[str],
    plot: Callable[[Outcome, Path], None],
    console: Any = None,
) -> tuple[Path, Path]:
    """Print ``outcome``; write ``bench-<name>.json`` and ``bench-<name>.png`` into ``output``."""
    out = Path(output)
    try:
        out.mkdir(parents=True, exist_ok=True)
        json_path = out / f"bench-{outcome.name}.json"
        png_path = out / f"bench-{outcome.name}.png"
        json_path.write_text(json.dumps(outcome.as_dict(), indent=2, default=_json_default) + "\n")
        plot(outcome, png_path)
    except OSError as exc:
        raise StorageError(f"cannot write benchmark results to {out}: {exc}") from exc
    print_tables(outcome, console)
    return json_path, png_path


# ------------------------------------------------------------------ plots


def figure(title: str, ncols: int = 1) -> tuple[Any, Any]:
    """A matplotlib figure (Agg, no display needed) with ``ncols`` axes side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, ncols, figsize=(6.4 * ncols, 4.6), squeeze=False)
    fig.suptitle(title)
    return fig, list(axes[0])


def grouped_bars(
    ax: Any,
    groups: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    ylabel: str,
    *,
    log: bool = False,
) -> None:
    """Bars of each series side by side within each group; missing values leave a gap."""
    import numpy as np

    n = max(len(series), 1)
    width = 0.8 / n
    x = np.arange(len(groups))
    for k, (label, values) in enumerate(series.items()):
        heights = [float("nan") if v is None else v for v in values]
        ax.bar(x + (k - (n - 1) / 2) * width, heights, width, label=label)
    ax.set_xticks(x, groups)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize="small")
    ax.grid(axis="y", alpha=0.3)


def save(fig: Any, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
