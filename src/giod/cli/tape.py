"""``giod stage``, ``giod release`` and ``giod tier``: the nearline tier from the command line.

The commands are made by :func:`tape_commands` from the CLI's federation
option and opener, which ``giod.cli`` passes down: this module imports
nothing of ``giod.cli``, so no circle of files is added.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import click

from giod.errors import ConfigError, NotFound

__all__ = ["duration", "tape_commands"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def duration(text: str, option: str) -> float:
    """Seconds in ``30d``, ``12h``, ``15m``, ``3600s``, ``2w`` or a plain number of seconds (0 allowed)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text, re.ASCII)
    if match is None:
        raise ConfigError(f"{option} {text!r}: give a number and a unit s, m, h, d or w, e.g. 30d")
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


def _nearline_sites(fed: Any) -> dict[str, Any]:
    from giod.storage.tape import NearlineSite

    sites = {s.name: fed.store.site(s.name) for s in fed.store.sites() if s.url.startswith("tape://")}
    if not sites:
        raise ConfigError("this federation has no nearline site (giod site add NAME 'tape:///DIR')")
    return {name: site for name, site in sites.items() if isinstance(site, NearlineSite)}


def tape_commands(federation_option: Callable[[Any], Any], open_federation: Callable[[str], Any]
                  ) -> list[click.Command]:
    """``stage``, ``release`` and ``tier``, with the CLI's federation option and opener."""

    @click.command("stage")
    @click.argument("dataset")
    @click.option("--select", "expression", default=None, help="Stage only the databases this selection may need.")
    @click.option("--columns", default=None, help="Comma-separated columns: stage only their containers (and tags).")
    @click.option("--pin", default="1h", show_default=True, help="How long staged copies are kept for this request.")
    @click.option("--request", "request_id", default=None, help="Name the request (default: a fresh id).")
    @click.option("--wait/--no-wait", default=False, help="Wait until every file is on disk, showing progress.")
    @federation_option
    def stage(dataset: str, expression: str | None, columns: str | None, pin: str, request_id: str | None,
              wait: bool, federation: str) -> None:
        """Stage a dataset's nearline files to disk in ONE request, planned by cartridge and position.

        Example: giod stage qcd --select "njets >= 4" --columns jets --pin 12h --wait
        """
        from giod.tier import stage_databases

        fed = open_federation(federation)
        if request_id is not None and not re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", request_id):
            raise ConfigError(f"--request {request_id!r}: letters, digits, '_', '.', '-' only")
        sel = fed.dataset(dataset).select(expression)
        cols = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
        names = None
        if cols is not None:
            names = set(sel.projection(cols).columns) | {"tag", "tag-index"}
        plan = stage_databases(fed.store, sel.databases(), names, pin_s=duration(pin, "--pin"), request=request_id)
        if plan.empty:
            click.echo(f"nothing of {dataset} needs staging: every file it reads is on disk")
            return
        for site, rid in plan.requests.items():
            click.echo(f"request {rid} at site {site}: {len(plan.paths[site])} files")
        progress = plan.progress()
        click.echo(str(progress))
        if not wait:
            return
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            task = bar.add_task("staging", total=progress.total)
            while progress.on_disk < progress.total:
                bar.update(task, completed=progress.on_disk, description=f"staging, ~{progress.eta_s:.0f} s left")
                lib = next(iter(plan.sites.values())).library
                lib.advance(lib.now() + max(1.0, min(progress.eta_s, 60.0)))
                progress = plan.progress()
        click.echo(f"all {progress.total} files on disk")

    @click.command("release")
    @click.argument("request_id", metavar="REQUEST")
    @federation_option
    def release(request_id: str, federation: str) -> None:
        """End the pins of a stage request (its copies stay on disk until evicted).

        Example: giod release myjob
        """
        fed = open_federation(federation)
        ended, known = 0, False
        for site in _nearline_sites(fed).values():
            try:
                ended += site.library.release(request_id)
                known = True
            except NotFound:
                continue
        if not known:
            raise NotFound(f"no stage request {request_id} at any nearline site")
        click.echo(f"request {request_id} released: {ended} pins ended")

    @click.group("tier")
    def tier() -> None:
        """The nearline tier: carry out tier rules, see where a dataset's files are."""

    @tier.command("apply")
    @click.option("--streams", default=2, show_default=True, type=click.IntRange(1, 64), help="Files copied at once.")
    @federation_option
    def tier_apply(streams: int, federation: str) -> None:
        """Move the databases the tier rules name to their nearline site (then off disk).

        Example: giod rule add qcd --tier nearline --sites archive --older-than 30d && giod tier apply
        """
        from giod.tier import apply_tier_rules

        fed = open_federation(federation)
        r = apply_tier_rules(fed.store, streams=streams)
        click.echo(f"{r.databases} databases due, {r.copied} files on tape, {r.dropped} disk replicas dropped"
                   + (f", {len(r.failed)} failed: {', '.join(r.failed[:3])}" if r.failed else ""))
        if r.failed:
            raise SystemExit(1)

    @tier.command("status")
    @click.argument("dataset")
    @federation_option
    def tier_status(dataset: str, federation: str) -> None:
        """Per tier and state, how many files of a dataset and how many bytes."""
        from giod.tier import tier_summary

        fed = open_federation(federation)
        for line in tier_summary(fed.store, fed.dataset(dataset).databases()):
            click.echo(line)

    return [stage, release, tier]
