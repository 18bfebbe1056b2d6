"""``giod site``, ``replicate``, ``rule``, ``replicator`` and ``verify``: sites and their copies."""

from __future__ import annotations

import sys
from typing import Any

import click

from giod.cli.base import _number_id, _open, federation_option, hidden_alias, main
from giod.cli.tables import _size, _table
from giod.errors import ConfigError, GiodError


@main.group()
def site() -> None:
    """Sites that hold files: local directories, other giod servers, XRootD servers, fsspec URLs."""


@site.command("add")
@click.argument("name")
@click.argument("url")
@click.option("--distance", default=10, show_default=True, help="Preference order: lower is nearer.")
@federation_option
def site_add(name: str, url: str, distance: int, federation: str) -> None:
    """Register a site: a directory, a giod server, an XRootD server, or an fsspec URL.

    URL is a directory (created if needed), http(s)://HOST:PORT/files/SITE (a site
    of another giod server; HOST:PORT alone takes its nearest site, ?site=SITE
    another), root://HOST[:PORT]//PATH (a directory of an XRootD server), or an
    fsspec URL (memory://…, s3://…). The token of a remote site
    comes from GIOD_TOKEN_<NAME>, else GIOD_TOKEN; it is never stored.

    Example: giod site add caltech http://data.caltech.edu:8470 --distance 20
    """
    from giod.replication.sites import normalize_site_url, probe

    fed = _open(federation)
    rec = fed.add_site(name, normalize_site_url(name, url), distance)
    click.echo(f"site {rec.name} at {rec.url} (distance {rec.distance})")
    try:
        health = probe(fed.site(rec.name))
        reachable, detail = health.reachable, health.detail
    except GiodError as exc:  # registered all the same: a site may be down for a while
        reachable, detail = False, str(exc)
    if not reachable:
        click.echo(f"warning: site {rec.name} does not answer now: {detail}", err=True)


@site.command("rm")
@click.argument("name")
@click.option("--force", is_flag=True, help="Also drop the site's replica rows (never the only good copy).")
@federation_option
def site_rm(name: str, force: bool, federation: str) -> None:
    """Remove a site from the catalog; its files are left as they are.

    A site that still has replicas is refused unless --force, which drops
    their rows too. A site holding the only good copy of a container, or
    named by a rule, is always refused: replicate the data elsewhere (or
    remove the rule) first.

    Example: giod site rm scratch --force
    """
    version = _open(federation).remove_site(name, force=force)
    dropped = " with its replica rows" if force else ""
    click.echo(f"site {name} removed{dropped} (version {version}); its files were not touched")


@site.command("ls")
@federation_option
def site_ls(federation: str) -> None:
    """List sites with their health: reachable, free space, replicas held, damaged replicas."""
    from concurrent.futures import ThreadPoolExecutor

    from giod.replication.sites import probe
    from giod.storage.kind import SiteHealth

    fed = _open(federation)
    summary = fed.catalog.replica_summary()
    rows, away = [], []
    sites = fed.sites()

    def checked(name: str) -> SiteHealth | GiodError:
        try:
            return probe(fed.site(name))
        except GiodError as exc:  # a site that cannot even be opened is shown, not fatal
            return exc

    with ThreadPoolExecutor(max(1, min(16, len(sites))), thread_name_prefix="giod-site-ls") as pool:
        # side by side: a site that does not answer costs its timeout once, not once per site listed
        healths = list(pool.map(checked, [s.name for s in sites]))
    for s, health in zip(sites, healths, strict=True):
        if isinstance(health, GiodError):
            reachable, detail, free = "no", str(health), "?"
        else:
            reachable = "yes" if health.reachable else "no"
            detail = health.detail
            free = "?" if health.free_bytes is None else _size(health.free_bytes)
        if reachable == "no":
            away.append(f"unreachable: {s.name}: {detail}")
        held = summary.get(s.name, {})
        good_n, good_bytes = held.get("good", (0, 0))
        rows.append([s.name, s.url, s.distance, reachable, free, f"{good_n} ({_size(good_bytes)})",
                     held.get("bad", (0, 0))[0], held.get("lost", (0, 0))[0], held.get("copying", (0, 0))[0],
                     detail])
    _table("sites", ["name", "url", "distance", "reachable", "free", "replicas", "bad", "lost", "copying",
                     "remark"], rows)
    for line in away:  # whole, where a narrow table cuts the remark short
        click.echo(line)


hidden_alias(site, "list", site_ls)


def _names(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ConfigError(f"{text!r} names nothing: give comma-separated names")
    return names


def _containers(fed: Any, dataset: str, text: str | None) -> list[str] | None:
    """Container names checked against the dataset's model."""
    names = _names(text)
    if names is None:
        return None
    known = list(fed.dataset(dataset).schema.containers)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"dataset {dataset} has no container {', '.join(unknown)} (it has {', '.join(known)})")
    return names


class _TransferBar:
    """A rich progress bar for copies and checks: files, bytes, rate, time left."""

    def __init__(self, label: str):
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self.label = label
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[files]}"),
                            DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(), transient=True)
        self.task: Any = None
        self.files = 0
        self.total = 0

    def __enter__(self) -> _TransferBar:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def start(self, files: int, size: int) -> None:
        self.total, self.files = files, 0
        self.task = self.bar.add_task(self.label, total=size, files=f"0/{files} files")

    def advance(self, n: int) -> None:
        self.bar.advance(self.task, n)

    def file_done(self) -> None:
        self.files += 1
        self.bar.update(self.task, files=f"{self.files}/{self.total} files")


def _transfers_summary(r: Any) -> str:
    rate = f" at {_size(r.rate)}/s" if r.copied else ""
    return (f"{r.copied} copied ({_size(r.bytes)} in {r.seconds:.1f} s{rate}), {r.adopted} found in place and "
            f"registered, {r.already} already there, {len(r.failed)} failed")


@main.command()
@click.argument("dataset")
@click.option("--to", "to", required=True, help="The site that gets the replicas.")
@click.option("--containers", default=None, help="Comma-separated containers (default: all), e.g. tag,reco.")
@click.option("--streams", default=4, show_default=True, type=click.IntRange(1, 256), help="Files copied at once.")
@federation_option
def replicate(dataset: str, to: str, containers: str | None, streams: int, federation: str) -> None:
    """Copy a dataset's containers to a site, verified before they are registered.

    Copies come from the nearest good replica; a file already at the site is
    checked and registered instead of copied again, so an interrupted run
    resumes where it stopped. Exits 1 when a container could not be placed.

    Example: giod replicate qcd --to caltech --containers tag,reco --streams 8
    """
    from giod.replication import replicate as run

    fed = _open(federation)
    names = _containers(fed, dataset, containers)
    with _TransferBar(f"{dataset} → {to}") as bar:
        report = run(fed.catalog, fed.site, dataset, to, containers=names, streams=streams, progress=bar)
    click.echo(f"{dataset} → {to}: {_transfers_summary(report)}")
    for path, where, why in report.failed:
        click.echo(f"failed: {path} → {where}: {why}")
    for path in report.unavailable:
        click.echo(f"no good copy to copy from: {path} (giod verify; giod rule ls)")
    if not report.ok:
        sys.exit(1)


@main.group()
def rule() -> None:
    """Replication rules: how many good copies of a dataset, where (see giod replicator)."""


@rule.command("add")
@click.argument("dataset")
@click.option("--copies", type=int, help="Good replicas every matching container keeps.")
@click.option("--sites", default=None, help="Comma-separated sites that count and receive copies (default: any).")
@click.option("--containers", default=None, help="Comma-separated containers (default: all).")
@click.option("--tier", default=None, type=click.Choice(["nearline"]),
              help="A tier rule instead: databases live on the nearline site --sites names (giod tier apply).")
@click.option("--older-than", default="0", help="With --tier: only databases older than this (30d, 12h, 0).")
@click.option("--unread-for", default=None,
              help="With --tier: only databases not read for this long either (30d, 12h; never read: since written).")
@federation_option
def rule_add(dataset: str, copies: int | None, sites: str | None, containers: str | None, tier: str | None,
             older_than: str, unread_for: str | None, federation: str) -> None:
    """Add a rule; `giod replicator` makes the federation satisfy it, new databases included.

    Example: giod rule add qcd --copies 2 --sites cern,caltech --containers tag,reco

    Example: giod rule add qcd --tier nearline --sites archive --older-than 30d

    Example: giod rule add qcd --tier nearline --sites archive --unread-for 90d
    """
    fed = _open(federation)
    if unread_for is not None and tier is None:
        raise ConfigError("--unread-for belongs to a tier rule (--tier nearline)")
    if tier is not None:
        from giod.cli.tape import duration

        where = _names(sites) or ()
        if len(where) != 1 or copies is not None or containers is not None:
            raise ConfigError("a tier rule names one nearline site (--sites) and no --copies or --containers")
        unread = None if unread_for is None else duration(unread_for, "--unread-for")
        tr = fed.catalog.add_tier_rule(dataset, where[0], tier=tier, older_than=duration(older_than, "--older-than"),
                                       unread_for=unread)
        also = "" if tr.unread_for is None else f" and not read for {tr.unread_for:g} s"
        click.echo(f"tier rule {tr.id}: databases of {dataset} older than {tr.older_than:g} s{also} live on "
                   f"{tr.site} ({tr.tier}); giod tier apply moves them")
        return
    if copies is None:
        raise ConfigError("give --copies N (or --tier nearline for a tier rule)")
    rec = fed.catalog.add_rule(dataset, copies, _names(sites), _containers(fed, dataset, containers))
    click.echo(f"rule {rec.id}: {_rule_text(rec)}")


def _rule_text(rec: Any) -> str:
    where = "any sites" if rec.sites is None else "sites " + ",".join(rec.sites)
    what = "every container" if rec.containers is None else "containers " + ",".join(rec.containers)
    return f"{rec.copies} copies of {rec.dataset} ({what}) on {where}"


@rule.command("ls")
@federation_option
def rule_ls(federation: str) -> None:
    """List rules with their state: satisfied, or how many replicas are missing."""
    from giod.replication import rule_states

    fed = _open(federation)
    rows = [[s.rule.id, s.rule.dataset, s.rule.copies, ",".join(s.rule.sites or ("any",)),
             ",".join(s.rule.containers or ("all",)), s.containers, s.describe()] for s in rule_states(fed.catalog)]
    _table("rules", ["id", "dataset", "copies", "sites", "containers", "covers", "state"], rows)
    tiers: list[Any] = getattr(fed.catalog, "tier_rules", list)()
    if tiers:
        _table("tier rules (giod rule rm ID --tier)", ["id", "dataset", "tier", "site", "older than (s)",
                                                        "unread for (s)"],
               [[t.id, t.dataset, t.tier, t.site, f"{t.older_than:g}",
                 "-" if t.unread_for is None else f"{t.unread_for:g}"] for t in tiers])


hidden_alias(rule, "list", rule_ls)


@rule.command("rm")
@click.argument("rule_id", metavar="ID")
@click.option("--tier", "is_tier", is_flag=True, help="ID is a tier rule's (its databases stay where they are).")
@federation_option
def rule_rm(rule_id: str, is_tier: bool, federation: str) -> None:
    """Remove a rule (its replicas stay).

    Example: giod rule rm 3
    """
    number = _number_id(rule_id, "rule", "giod rule ls")
    if is_tier:
        _open(federation).catalog.remove_tier_rule(number)
        click.echo(f"tier rule {number} removed")
        return
    _open(federation).catalog.remove_rule(number)
    click.echo(f"rule {number} removed")


@main.command()
@click.option("--once", is_flag=True, help="One pass, then exit (1 if a rule is still unsatisfied).")
@click.option("--interval", default=60.0, show_default=True, type=click.FloatRange(0.1), help="Seconds between passes.")
@click.option("--streams", default=4, show_default=True, type=click.IntRange(1, 256), help="Files copied at once.")
@click.option("--follow", is_flag=True,
              help="A pass at every commit (the catalog's change feed), not every --interval.")
@federation_option
def replicator(once: bool, interval: float, streams: int, follow: bool, federation: str) -> None:
    """Make the federation satisfy its rules and repair damaged replicas, in passes.

    Runs until interrupted (SIGINT/SIGTERM end it after the current pass).
    With --follow a pass starts as soon as the federation commits, so a
    rule-bound site receives a new database at once (sites are probed and
    damaged replicas repaired every --interval).

    Example: giod replicator --interval 300
    """
    import signal
    import time

    from giod.replication import replicator as run

    fed = _open(federation)
    stopping: list[bool] = []
    results: list[Any] = []

    def report(p: Any) -> None:
        results.append(p)
        states = ", ".join(f"rule {s.rule.id} {s.describe()}" for s in p.rules) or "no rules"
        away = f"; away: {', '.join(p.away)}" if p.away else ""
        click.echo(f"{time.strftime('%H:%M:%S')} {states}; {p.repairs} repairs; "
                   f"{_transfers_summary(p.transfers)}{away}")
        for path, where, why in p.transfers.failed:
            click.echo(f"  failed: {path} → {where}: {why}")
        for path in p.newly_lost:
            click.echo(f"  LOST: {path} has no good copy left")

    if follow and not once:
        from giod.cli.exchange import stop_on_signals
        from giod.exchange import follow_rules

        follow_rules(fed, streams=streams, interval=interval, stop=stop_on_signals(), on_pass=report)
        return
    if not once:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stopping.append(True))
    run(fed.catalog, fed.site, interval=interval, streams=streams, passes=1 if once else None, on_pass=report,
        stop=lambda: bool(stopping))
    if once and (not results or not results[-1].ok):
        sys.exit(1)


@main.command()
@click.option("--site", "site_name", default=None, help="Check only this site (default: every site).")
@click.option("--sample", default=None, type=float, help="Check a random fraction of the replicas, e.g. 0.05.")
@click.option("--seed", default=None, type=int, help="Seed of the sample (default: a new one each time).")
@click.option("--streams", default=4, show_default=True, type=click.IntRange(1, 256), help="Files read at once.")
@federation_option
def verify(site_name: str | None, sample: float | None, seed: int | None, streams: int, federation: str) -> None:
    """Re-read replicas and check their checksums; mark damaged ones bad (or lost).

    Exits 1 when a replica is missing or corrupt, or a site does not answer.

    Example: giod verify --site caltech --sample 0.1
    """
    from giod.replication import verify as run

    fed = _open(federation)
    with _TransferBar("verifying") as bar:
        report = run(fed.catalog, fed.site, site=site_name, sample=sample, seed=seed, streams=streams,
                     progress=bar)
    for f in report.damaged:
        click.echo(f"{f.kind}: {f.site}:{f.path}: {f.detail} → marked {f.state or '(not recorded)'}")
    for where, path in report.restored:
        click.echo(f"restored: {where}:{path} reads right again → marked good")
    for where, why in report.unreachable.items():
        click.echo(f"unreachable: {where}: {why}")
    click.echo(f"checked {report.checked} replicas ({_size(report.bytes)}), skipped {report.skipped}: "
               f"{len(report.damaged)} damaged ({len(report.lost)} lost), {len(report.restored)} restored, "
               f"{len(report.unreachable)} sites unreachable")
    if not report.ok:
        sys.exit(1)
