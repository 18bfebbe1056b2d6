"""Progress of long commands: a bar with elapsed time on a terminal, plain lines elsewhere.

:func:`progress_bar` gives an object with the calls of ``rich.progress.Progress``
that giod uses (``add_task``, ``advance``, ``update``, a ``with`` block). On a
terminal it is rich's bar: the stage, the bar, done of total, time elapsed
and time left. Where the output is a file or a pipe (a log, CI, ``make demo
| tee``) a bar would print nothing at all, so each stage prints one line when
it ends (``reconstruct (2 processes): 10,000 of 10,000 in 41.2 s``), and a
line every :data:`EVERY` seconds while it runs. A stage that fails prints
nothing: the error stays the one line a failed command prints.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import IO, Any

#: Seconds between the lines of a stage still running, where the output is not a terminal.
EVERY = 10.0


@dataclass
class _Stage:
    description: str
    total: float | None
    completed: float = 0
    start: float = field(default_factory=time.perf_counter)
    said: float = field(default_factory=time.perf_counter)
    done: bool = False


class PlainProgress:
    """The calls of ``rich.progress.Progress`` giod makes, as plain lines on ``stream``."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._stages: list[_Stage] = []

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            for stage in self._stages:
                self._end(stage)

    def add_task(self, description: str, total: float | None = None, **_: Any) -> int:
        """A new stage; the stages before it have ended."""
        for stage in self._stages:
            self._end(stage)
        self._stages.append(_Stage(description, total))
        return len(self._stages) - 1

    def advance(self, task: int, advance: float = 1) -> None:
        self.update(task, completed=self._stages[task].completed + advance)

    def update(self, task: int, *, completed: float | None = None, total: float | None = None, **_: Any) -> None:
        stage = self._stages[task]
        if total is not None:
            stage.total = total
        if completed is not None:
            stage.completed = completed
        now = time.perf_counter()
        if stage.total is not None and stage.completed >= stage.total:
            self._end(stage)
        elif now - stage.said >= EVERY and not stage.done:
            stage.said = now
            self._say(f"{stage.description}: {self._count(stage)}, {now - stage.start:.0f} s so far")

    def _end(self, stage: _Stage) -> None:
        if not stage.done:
            stage.done = True
            self._say(f"{stage.description}: {self._count(stage)} in {time.perf_counter() - stage.start:.1f} s")

    @staticmethod
    def _count(stage: _Stage) -> str:
        if stage.total is None:
            return f"{stage.completed:,.0f} done"
        return f"{stage.completed:,.0f} of {stage.total:,.0f}"

    def _say(self, line: str) -> None:
        print(line, file=self._stream, flush=True)


def progress_bar(*, stderr: bool = False, transient: bool = False) -> Any:
    """rich's progress bar on a terminal (on stderr if ``stderr``), else :class:`PlainProgress`."""
    stream = sys.stderr if stderr else sys.stdout
    if not stream.isatty():
        return PlainProgress(stream)
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(TextColumn("{task.description:<28}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(),
                    console=Console(stderr=stderr), transient=transient)
