"""``giod copy``: datasets from one federation to another, once or following the source."""

from __future__ import annotations

import signal
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import click

from giod.cli.base import main
from giod.errors import ConfigError, NotFound


def _names(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ConfigError(f"--containers {text!r} names nothing: give comma-separated names")
    return names


def _open_as(target: str, token: str | None) -> Any:
    import giod

    return giod.open(target, token=token)


def _server(target: str) -> tuple[str, str, int] | None:
    """The server a federation argument names (scheme, host, port), or None for a directory or catalog."""
    if not target.startswith(("http://", "https://")):
        return None
    try:
        parts = urlsplit(target)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None  # giod.open says what is wrong with it
    return parts.scheme, (parts.hostname or "").lower(), port


def copy_tokens(ctx: click.Context, source: str, destination: str, from_token: str | None,
                to_token: str | None) -> tuple[str | None, str | None]:
    """The tokens of SRC and DST: each side's own option, else ``giod --token`` where it can mean only that
    side, else the side's variable (GIOD_FROM_TOKEN, GIOD_TO_TOKEN), else (None) GIOD_TOKEN.

    ``giod --token`` means the one server of the two, or both when SRC and DST are the same server; for
    two servers it would hand one server's secret to the other, so it is refused unless each side has its
    own. The side's variable comes after it, as ``GIOD_FEDERATION`` comes after ``giod -f``.
    """
    given: str | None = ctx.find_root().params.get("token")
    own = {name: ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
           for name in ("from_token", "to_token")}
    servers = {"from_token": _server(source), "to_token": _server(destination)}
    tokens = {"from_token": from_token, "to_token": to_token}
    if given is not None:
        wanting = [name for name, where in servers.items() if where is not None and not own[name]]
        if len({servers[name] for name in wanting}) > 1:
            raise ConfigError("giod --token is for one server, and SRC and DST are two: give --from-token "
                              "and --to-token (or GIOD_FROM_TOKEN and GIOD_TO_TOKEN)")
        for name in wanting:
            tokens[name] = given
    return tokens["from_token"], tokens["to_token"]


def stop_on_signals() -> threading.Event:
    """An event set by the first SIGINT/SIGTERM; a second Ctrl-C interrupts at once."""
    stop = threading.Event()

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)
    return stop


@main.command("copy")
@click.argument("dataset")
@click.option("--from", "source", required=True, metavar="SRC",
              help="The source federation: directory, catalog URL or giod server.")
@click.option("--to", "destination", required=True, metavar="DST",
              help="The destination federation: directory, catalog URL or giod server.")
@click.option("--select", "select", default=None, help="Copy only the events passing this selection (a skim).")
@click.option("--containers", default=None, help="Comma-separated containers to copy (default: all).")
@click.option("--as", "as_name", default=None, help="The dataset's name in DST (default: the same).")
@click.option("--site", default=None, help="The DST site the files go to (default: its nearest).")
@click.option("--follow", is_flag=True, help="Keep copying as SRC commits, until interrupted.")
@click.option("--from-token", envvar="GIOD_FROM_TOKEN", default=None,
              help="Token for a SRC server (default: giod --token if SRC is the only server, else env "
                   "GIOD_FROM_TOKEN, else GIOD_TOKEN).")
@click.option("--to-token", envvar="GIOD_TO_TOKEN", default=None,
              help="Token for a DST server (default: giod --token if DST is the only server, else env "
                   "GIOD_TO_TOKEN, else GIOD_TOKEN).")
def copy(dataset: str, source: str, destination: str, select: str | None, containers: str | None,
         as_name: str | None, site: str | None, follow: bool, from_token: str | None, to_token: str | None) -> None:
    """Copy what DATASET of SRC committed since the last copy into DST.

    Files are verified before they are registered, each database lands
    whole and once, and each records where it came from (giod show DATASET
    --database N). What SRC says is checked before anything is written: a
    refused copy leaves nothing behind. With --follow, DST keeps in step:
    SRC's change feed wakes the copy at each commit; Ctrl-C ends it after the
    database in hand; an error another try cannot cure ends it (exit code
    2), others are tried again after a wait that doubles up to a minute.

    Example: giod copy raw --from ./daq --to ./reco --select "njets >= 2" --as dijet --follow
    """
    from giod.exchange import copy_dataset
    from giod.exchange import follow as run_follow

    from_token, to_token = copy_tokens(click.get_current_context(), source, destination, from_token, to_token)
    src = _open_as(source, from_token)
    dst = _open_as(destination, to_token)
    chosen = _names(containers)
    if not follow:
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            task = bar.add_task(f"copying {dataset}", total=None)

            def advance(r: Any) -> None:
                bar.update(task, completed=r.done, total=r.planned)

            report = copy_dataset(src, dst, dataset, select=select, containers=chosen, as_name=as_name,
                                  site=site, on_database=advance)
        click.echo(report.summary())
        if report.pending:  # the next run goes on from there, once the source database has what is missing
            raise NotFound(f"copy stopped: {report.pending}; run it again once it has")
        return
    stop = stop_on_signals()
    totals = {"databases": 0, "events": 0}
    waiting = [""]

    def copied(r: Any) -> None:
        if r.pending != waiting[0]:
            waiting[0] = r.pending
            if r.pending:
                click.echo(f"{time.strftime('%H:%M:%S')} waiting: {r.pending}")
        if r.copied or r.already:
            totals["databases"] += r.copied
            totals["events"] += r.events
            click.echo(f"{time.strftime('%H:%M:%S')} {r.summary()}")

    click.echo(f"following {dataset} of {source} into {destination} (Ctrl-C ends)")
    run_follow(src, dst, dataset, select=select, containers=chosen, as_name=as_name, site=site, stop=stop,
               on_copy=copied)
    click.echo(f"stopped: {totals['databases']} databases ({totals['events']:,} events) copied while following")
