"""The ``giod`` command line: a thin layer over the library.

Every command finds its federation from its own ``-f/--federation``, else
the one given before the command (``giod -f PATH ls``), else the
``GIOD_FEDERATION`` environment variable, else ``./giod-data``; the token
for a server likewise from the command's ``--token``, else the group's
(``giod --token TOKEN ls``), else ``GIOD_TOKEN``. Expected failures print
one line and exit with code 2; there are no tracebacks.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from giod.cli.base import BENCH_MISSING as BENCH_MISSING  # re-exported: the benchmarks' stand-in names it
from giod.cli.base import PLUGIN_GROUP as PLUGIN_GROUP
from giod.cli.base import _open, federation_option
from giod.cli.base import main as main  # the `giod` entry point
from giod.cli.base import plugin_commands as plugin_commands
from giod.cli.output import OutputPath, writing
from giod.cli.tables import _size, _table, print_cutflow
from giod.errors import ConfigError, NotFound


@main.command()
@click.argument("path", default=None, required=False)
@federation_option
def init(path: str | None, federation: str) -> None:
    """Create a federation (SQLite catalog + local site) at PATH.

    Example: giod init ./myfed
    """
    fed = _open(path or federation, create=True)
    click.echo(f"federation ready at {fed.root or fed.catalog.url} (version {fed.version})")


@main.command("ls")
@federation_option
def ls_(federation: str) -> None:
    """List datasets with their events, databases and bytes."""
    fed = _open(federation)
    rows = []
    for name in fed.datasets():
        s = fed.dataset(name).summary()
        rows.append([name, f"{s['n_events']:,}", s["n_databases"], _size(s["bytes"])])
    _table(f"federation version {fed.version}", ["dataset", "events", "databases", "size"], rows)


@main.command()
@click.argument("dataset")
@click.option("--database", "database_id", type=int, help="Trace one database's provenance.")
@click.option("--version", "version", type=int, help="Show the dataset as of this federation version.")
@click.option("--all", "every", is_flag=True,
              help="Stream every database, one tab-separated line each, instead of the first 20 in a table.")
@federation_option
def show(dataset: str, database_id: int | None, version: int | None, every: bool, federation: str) -> None:
    """Show a dataset: schema, containers, databases, provenance.

    Example: giod show qcd --database 12
    """
    fed = _open(federation)
    ds = fed.dataset(dataset)
    if version is not None:
        ds = ds.at(version)
    if database_id is not None:
        _trace(fed, _database_of(fed, ds, database_id, version))
        return
    # streamed: the first 20 lines cost the same at 20 databases as at a million
    listing = fed.catalog.database_rows(ds.name, ds.version)
    try:
        if every:  # one line a database as it comes, for a pager or a script
            click.echo("id\tfirst_entry\tevents\tbytes\tcontainers\tprogram\tversion")
            for db in listing:
                click.echo(f"{db.id}\t{db.first_entry}\t{db.n_events}\t{db.bytes}\t{db.containers}\t"
                           f"{db.program}\t{db.created_version}")
            return
        lines = [[db.id, f"{db.first_entry}..{db.stop_entry - 1}", db.n_events, _size(db.bytes),
                  db.containers.replace(",", ", "), db.program or "-", db.created_version]
                 for db in itertools.islice(listing, 20)]
    finally:
        listing.close()
    s = ds.summary()
    click.echo(f"dataset {ds.name}: {s['n_events']:,} events in {s['n_databases']} databases, "
               f"{_size(s['bytes'])}; schema {ds.schema.name} ({ds.schema.fingerprint[:12]})")
    rows = []
    for container, colls in ds.schema.containers.items():
        rows.append([container, ", ".join(colls) or ", ".join(ds.schema.tags)])
    _table("containers", ["container", "collections / tags"], rows)
    more = f" (first 20 of {s['n_databases']}; --all lists every one)" if s["n_databases"] > 20 else ""
    _table("databases" + more, ["id", "entries", "events", "size", "containers", "program", "version"], lines)
    from giod.tier import has_nearline, tier_summary

    if has_nearline(fed.store):  # where the files are: disk, or tape and its states
        for line in tier_summary(fed.store, ds.databases()):
            click.echo(f"  {line}")


def _database_of(fed: Any, ds: Any, database_id: int, version: int | None) -> int:
    """``database_id`` if it is a database of ``ds`` (at ``version``); a one-line error naming both otherwise."""
    try:
        if fed.catalog.database(database_id, version).dataset_id == ds.snapshot.record.id:
            return database_id
    except NotFound:
        pass
    db = fed.catalog.database(database_id)  # NotFound when no dataset has it
    owner = fed.dataset_of(db)
    if owner != ds.name:
        raise NotFound(f"database {database_id} is in dataset {owner}, not {ds.name} "
                       f"(giod show {owner} --database {database_id})")
    when = "" if version is None else f" at version {version}"
    raise NotFound(f"dataset {ds.name} has no database {database_id}{when} (giod show {ds.name} lists them)")


def _trace(fed: Any, database_id: int, depth: int = 0) -> None:
    db = fed.catalog.database(database_id)
    pad = "  " * depth
    click.echo(f"{pad}db{db.id}: {db.n_events} events, entries {db.first_entry}..{db.stop_entry - 1}, "
               f"written by {db.program or '?'} {db.program_version} on {db.writer} "
               f"at version {db.created_version}")
    for c in db.containers:
        click.echo(f"{pad}  container {c.name}: {c.path} ({_size(c.size)}, {c.checksum}), "
                   f"written by {c.program or '?'} {c.program_version}".rstrip())
        if c.parameters and c.parameters != db.parameters:
            click.echo(f"{pad}    parameters: {json.dumps(c.parameters, sort_keys=True)}")
    if db.parameters:
        click.echo(f"{pad}  parameters: {json.dumps(db.parameters, sort_keys=True)}")
    from giod.exchange import provenance_chain

    for step in provenance_chain(db.parameters):
        skim = f", events passing {step['selection']!r}" if step.get("selection") else ""
        click.echo(f"{pad}  copied from {step['federation']}: dataset {step['dataset']}, "
                   f"db{step['database']} at version {step['version']}{skim}")
    for parent in db.parents:
        click.echo(f"{pad}  derived from:")
        _trace(fed, parent, depth + 2)


@main.command("object")
@click.argument("oid")
@federation_option
def object_(oid: str, federation: str) -> None:
    """Show one object by its id, its relations and where it came from.

    Example: giod object db3/jets/1234#0
    """
    from giod.read.objects import INDEX_SUFFIX, OID

    fed = _open(federation)
    o = OID.parse(oid)
    obj = fed.object(o)
    db = fed.catalog.database(o.database)
    ds_name = fed.dataset_of(db)
    schema = fed.dataset(ds_name).schema
    tdef = schema.collection_type(o.collection)
    click.echo(f"{o}: a {tdef.name} in collection {o.collection} of dataset {ds_name}, entry {o.entry}")
    for name in tdef.fields:
        click.echo(f"  {name} = {obj[name]}")
    for name, rdef in tdef.relations.items():
        idx = obj[name + INDEX_SUFFIX]
        targets = [int(i) for i in (idx if rdef.many else [idx]) if int(i) >= 0]
        shown = ", ".join(str(OID(o.database, rdef.target, o.entry, i)) for i in targets[:10])
        more = f" (+{len(targets) - 10} more)" if len(targets) > 10 else ""
        click.echo(f"  {name} -> {shown or 'none'}{more}")
    container = db.container(schema.container_of(o.collection))
    if container is not None:
        who = container.program or db.program or "?"
        version = container.program_version or db.program_version
        click.echo(f"  stored in {container.name} ({container.path}), written by {who} {version}")
    click.echo(f"  raw data: giod show {ds_name} --database {db.id}")


@main.group()
def schema() -> None:
    """Data-model files."""


@schema.command("check")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--old", type=click.Path(dir_okay=False), help="Also check evolution from this model.")
def schema_check(file: str, old: str | None) -> None:
    """Validate a YAML data model (and its evolution from --old).

    Example: giod schema check model.yaml --old model-v1.yaml
    """
    from giod.schema import Schema

    for path in (file, old):
        if path is not None and not Path(path).is_file():
            raise NotFound(f"no such file: {path}")
    s = Schema.from_yaml(file)
    click.echo(f"{file}: model {s.name} is valid: {len(s.types)} types, "
               f"{len(s.collections)} collections, {len(s.containers)} containers, {len(s.tags)} tags")
    if old:
        changes = s.check_evolution(Schema.from_yaml(old))
        click.echo(f"evolution from {old} is allowed: " + ("; ".join(changes) or "no change"))


@main.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--dataset", required=True, help="Dataset to create or append to.")
@click.option("--tree", default=None, help="Tree name (default: Events, or the only tree).")
@click.option("--create", is_flag=True, help="Create the federation first if there is none (as giod init).")
@click.option("--append", is_flag=True, help="Add the file again even if the dataset already holds it.")
@click.option("--container-format", type=click.Choice(["arrow", "parquet"]), default=None,
              help="Format of every container of a dataset this import creates, for every later writer too "
                   "[default: the container_format setting, per writer].")
@federation_option
def import_(file: str, dataset: str, tree: str | None, create: bool, append: bool, container_format: str | None,
            federation: str) -> None:
    """Import a NanoAOD-style ROOT file (TTree or RNTuple) into an existing federation.

    A file the dataset already holds (same checksum) is refused unless --append is given;
    one an interrupted import left partly imported is finished: the same command imports
    the events still missing, and only those.

    Example: giod init ./myfed && giod import nano.root --dataset ttbar -f ./myfed
    """
    from giod.cli.progress import progress_bar
    from giod.interchange.nanoaod import import_root

    fed = _open(federation, create=create)
    with progress_bar(stderr=True, transient=True) as bar:
        task = bar.add_task(f"importing {Path(file).name}", total=None)
        report = import_root(fed, file, dataset, tree=tree, append=append, container_format=container_format,
                             progress=lambda done, total: bar.update(task, completed=done, total=total))
    click.echo(f"imported {report.n_events:,} events from tree {report.tree} into dataset {report.dataset}: "
               f"{len(report.collections)} collections, {len(report.tags)} tags, "
               f"{len(report.skipped)} branches skipped")
    if report.resumed:
        click.echo(f"resumed: {report.resumed:,} of the file's {report.resumed + report.n_events:,} events were "
                   f"already in dataset {report.dataset}, from an import of it that did not finish")
    for branch, why in sorted(report.skipped.items()):
        click.echo(f"  skipped {branch}: {why}")
    for name, what in report.trees.items():
        click.echo(f"tree {name}: {what}")


@main.command()
@click.argument("dataset")
@click.option("--format", "fmt", type=click.Choice(["root", "parquet"]), default="parquet", show_default=True)
@click.option("-o", "--output", required=True, type=OutputPath(), help="Output file (its directory must exist).")
@click.option("--where", "expression", default=None, help="Tag expression selecting the events.")
@federation_option
def export(dataset: str, fmt: str, output: str, expression: str | None, federation: str) -> None:
    """Export a dataset (or a selection) to ROOT or Parquet.

    A dataset imported from ROOT is written back with the tree, counter and
    branch names and types of the file it came from.

    Example: giod export qcd --format root -o qcd.root --where "njets >= 2"
    """
    from giod.interchange.export import linked_trees, root_names, write_parquet, write_root

    fed = _open(federation)
    ds = fed.dataset(dataset)
    sel = ds.select(expression)
    chunks = sel.iterate()
    with writing(output):
        if fmt == "root":  # spelled as the file the dataset was imported from, if it was
            trees = linked_trees(sel)
            write_root(output, chunks, ds.schema, names=root_names(sel), trees=trees)
        else:
            write_parquet(output, chunks, ds.schema)
    click.echo(f"wrote {len(sel):,} events to {output}")
    if fmt == "root":
        for name, tree in trees.items():
            click.echo(f"wrote tree {name} from dataset {tree.dataset.name}, whole ({len(tree):,} entries)")



@main.command("export-event")
@click.argument("dataset")
@click.argument("entry", type=click.IntRange(min=0))
@click.option("--format", "fmt", type=click.Choice(["phoenix", "scene"]), default="phoenix", show_default=True,
              help="phoenix: HSF Phoenix event data; scene: what giod's web display draws.")
@click.option("-o", "--output", type=OutputPath(), default=None,
              help="Output file (default: stdout; its directory must exist).")
@federation_option
def export_event(dataset: str, entry: int, fmt: str, output: str | None, federation: str) -> None:
    """Export one event as JSON for an event display (HSF Phoenix by default).

    Example: giod export-event qcd 7 --format phoenix -o qcd-7.json
    """
    from giod.display import event_scene, phoenix_event

    ds = _open(federation).dataset(dataset)
    data = (phoenix_event if fmt == "phoenix" else event_scene)(ds, entry)
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    if output is None:
        click.echo(text)
        return
    with writing(output):
        Path(output).write_text(text + "\n", encoding="utf-8")
    click.echo(f"wrote {dataset} entry {entry} as {fmt} JSON ({len(text):,} bytes) to {output}", err=True)

def _write_parquet(path: str, chunks: Any, empty: Callable[[], Any]) -> None:
    """Selected columns as one plain Parquet file (readable without giod); ``empty()`` gives the
    columns when no event is selected, so that the file is written all the same."""
    import awkward as ak
    import pyarrow.parquet as pq

    writer = None
    try:
        for chunk in chunks:
            table = ak.to_arrow_table(chunk, extensionarray=False)
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema, compression="zstd")
            writer.write_table(table)
        if writer is None:
            table = ak.to_arrow_table(empty(), extensionarray=False)
            writer = pq.ParquetWriter(path, table.schema, compression="zstd")
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()


@main.command()
@click.argument("dataset")
@click.argument("expression", required=False)
@click.option("--columns", default=None, help="Comma-separated collections, fields or tags to show.")
@click.option("--limit", default=10, show_default=True, help="Events to print (0 or more).")
@click.option("--count", is_flag=True, help="Only print the number of selected events.")
@click.option("-o", "--output", type=OutputPath(), help="Write the selection to this Parquet file.")
@federation_option
def select(dataset: str, expression: str | None, columns: str | None, limit: int, count: bool,
           output: str | None, federation: str) -> None:
    """Select events by an expression over tags and objects.

    Example: giod select qcd "njets >= 2 and ht > 500" --columns ht,njets;
    giod select ttbar "count(Jet.pt > 30) >= 2 and Muon.pt[0] > 25" --count
    """
    if limit < 0:
        raise ConfigError(f"--limit must be 0 or more, got {limit}")
    fed = _open(federation)
    sel = fed.dataset(dataset).select(expression)
    cols = [c.strip() for c in columns.split(",")] if columns else list(sel.dataset.schema.tags)
    if not count:
        sel.projection(cols)
    n = len(sel)
    total = len(sel.dataset)
    click.echo(f"{n:,} of {total:,} events selected ({len(sel.databases())} databases read)")
    if count:
        return
    if output:
        from giod.read.objects import unlink

        with writing(output):
            _write_parquet(output, (unlink(c, sel.dataset.schema) for c in sel.iterate(cols)),
                           lambda: unlink(sel.read(cols), sel.dataset.schema))
        click.echo(f"wrote {output}")
        return
    entries = sel.entries()[:limit]
    shown = 0
    for chunk in sel.iterate(cols, step_size=max(limit, 1)):
        for i in range(len(chunk)):
            if shown >= limit:
                return
            click.echo(f"{entries[shown]}: {chunk[i].to_list()}")
            shown += 1


@main.command()
@click.option("--quick", is_flag=True, help="Check sizes only, not checksums.")
@click.option("--repair", is_flag=True,
              help="Write the catalog's kept totals, listing and tag coverage found wrong anew from its rows.")
@federation_option
def fsck(quick: bool, repair: bool, federation: str) -> None:
    """Check catalog and files: orphans, dark copies, deleted and lost files, missing files, checksums.

    Dark copies are files of known containers at a site the catalog lists no
    replica of them at (giod replicate adopts them). Files under a live
    writer's lease are shown as writing. Lost files are complete files of
    commits the catalog does not hold (giod recover registers them again).
    Catalog rows that do not parse, and the totals, listing and tag coverage
    the catalog keeps that disagree with its rows, are catalog problems;
    --repair writes those kept values again from the rows, at a new version.
    Exits 1 when committed data is missing, corrupt or lost, the catalog is
    damaged, or a site does not answer.
    """
    from giod.store.consistency import fsck as run

    fed = _open(federation)
    report = run(fed.store, checksums=not quick, repair=repair)
    for p in report.problems:
        where = f"{p.site}:{p.path}" if p.site and p.path else p.site or p.path  # a catalog row has no site
        click.echo(f"{p.kind}: {where}: {p.detail}")
    repaired = len(report.by_kind("repaired"))
    found = len(report.problems) - repaired
    click.echo(f"checked {report.files_checked} files ({_size(report.bytes_checked)} read): "
               f"{found} problem{'' if found == 1 else 's'}{f', {repaired} repaired' if repaired else ''}, "
               f"{len(report.by_kind('orphan'))} orphans, "
               f"{len(report.by_kind('dark'))} dark copies, {len(report.by_kind('writing'))} files being written, "
               f"{report.deleted_files} files of deleted containers ({_size(report.deleted_bytes)}), "
               f"{len(report.by_kind('lost'))} files of lost commits")
    if report.lost_commits:
        click.echo("the catalog lost commits whose files are complete: run giod recover to register them again")
    if report.kept_wrong:
        click.echo("the catalog keeps values its rows do not hold: run giod fsck --repair to write them again")
    if report.damaged or report.lost_commits:
        sys.exit(1)


@main.command()
@click.option("--grace", default=3600.0, show_default=True, type=click.FloatRange(min=0),
              help="Keep orphans, and files of deletions, younger than this (s).")
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
@click.option("--include-lost", is_flag=True, help="Remove files of lost commits too (see giod recover).")
@federation_option
def gc(grace: float, dry_run: bool, include_lost: bool, federation: str) -> None:
    """Remove orphan files left by interrupted writes, and the files of deleted datasets and databases.

    The saved tag indexes of deleted datasets (indexes/ in the federation's
    directory) go too. Files under a live writer's lease are never removed,
    whatever --grace says.
    A site that does not answer is named and skipped; the others are cleaned,
    and the command exits 1.
    """
    from giod.read.datasetindex import remove_unused
    from giod.store.consistency import gc as run

    fed = _open(federation)
    away: list[str] = []

    def unreachable(site: str, why: str) -> None:
        away.append(site)
        click.echo(f"unreachable: {site}: {why}")

    removed = run(fed.store, grace_seconds=grace, dry_run=dry_run, include_lost=include_lost,
                  on_unreachable=unreachable)
    for site, path in removed:
        click.echo(f"{'would remove' if dry_run else 'removed'} {site}:{path}")
    for name in remove_unused(fed.store, grace_seconds=grace, dry_run=dry_run):
        click.echo(f"{'would remove' if dry_run else 'removed'} the saved tag index of deleted dataset {name}")
    click.echo(f"{len(removed)} orphan files {'found' if dry_run else 'removed'}"
               + (f"; {len(away)} sites not reached" if away else ""))
    if removed.lost and not include_lost:
        click.echo(f"kept {len(removed.lost)} files of commits the catalog lost (giod recover registers them "
                   "again); deleted rows are not purged until then", err=True)
    if away:
        sys.exit(1)


@main.command()
@click.option("--dry-run", is_flag=True, help="Only list what would be registered.")
@federation_option
def recover(dry_run: bool, federation: str) -> None:
    """Register again the databases, and the containers of later passes, of commits the catalog lost.

    Those are the files fsck reports as lost; their footers say what to register.
    """
    from giod.store.consistency import recover as run

    found = run(_open(federation).store, dry_run=dry_run)
    for r in found:
        where = f"{r.site}:{r.folder}/ ({len(r.paths)} files, {r.n_events:,} events)"
        if r.reason:
            click.echo(f"cannot register {where}: {r.reason}")
        elif r.database_id is None:
            click.echo(f"would {'add the containers of a pass' if r.kind == 'pass' else 'register'} {where} "
                       f"in {r.dataset}")
        elif r.kind == "pass":
            click.echo(f"added the containers of a pass {where} to db{r.database_id} of {r.dataset}")
        else:
            click.echo(f"registered {where} as db{r.database_id} of {r.dataset}, entries from {r.first_entry:,}")
    done = [r for r in found if r.database_id is not None]
    click.echo(f"{sum(r.kind == 'database' for r in done)} databases registered again, "
               f"{sum(r.kind == 'pass' for r in done)} passes added again")
    if any(r.reason for r in found):
        sys.exit(1)


@main.command()
@click.argument("analysis", type=click.Choice(["dijet"]))
@click.argument("dataset")
@click.option("--where", "expression", default=None, help="Tag expression selecting the events first.")
@click.option("-o", "--output", default="dijet.png", show_default=True, type=OutputPath(),
              help="The plot (PNG; its directory must exist).")
@click.option("--jets", default=None, help="Jet collection (default: jets/Jet, or any with pt, eta, phi, mass).")
@click.option("--max-mass", default=2000.0, show_default=True,
              help="Masses above this (GeV) are left out; the plot's range follows the data.")
@click.option("--scheduler", default="sync", show_default=True,
              help="Where to run: sync (here), processes[:N] (local pool), localcluster[:N] or tcp://HOST:PORT (Dask).")
@federation_option
def analyze(analysis: str, dataset: str, expression: str | None, output: str, jets: str | None,
            max_mass: float, scheduler: str, federation: str) -> None:
    """Run an analysis over a dataset and plot it (di-jet mass).

    Example: giod analyze dijet qcd --where "njets >= 2" -o dijet.png --scheduler processes
    """
    from rich.progress import Progress

    from giod.analysis import dijet, plots
    from giod.distributed import connect

    ds = _open(federation).dataset(dataset)
    with connect(scheduler) as executor, Progress(transient=True) as bar:
        if executor.dashboard:
            click.echo(f"Dask dashboard: {executor.dashboard}")
        task = bar.add_task(f"{analysis} on {executor.name}", total=None)
        h, cutflow = dijet.run_with_cutflow(
            ds, expression, collection=jets, histogram=dijet.fine_mass_histogram(max_mass), scheduler=executor,
            progress=lambda done, total: bar.update(task, completed=done, total=total))
    with writing(output):
        dijet.plot(h, output, title=f"di-jet mass, {dataset}", label=dataset, **plots.dataset_label(ds))
    click.echo(f"{int(h.sum()):,} events in the histogram; plot: {output}")
    print_cutflow(cutflow, f"cut flow, di-jet analysis of {dataset}")


@main.command()
@click.argument("dataset")
@click.option("-o", "--output", default="validation", show_default=True, type=OutputPath(directory=True),
              help="Directory for the plots (created; its parent must exist).")
@click.option("--max-events", default=None, type=int, help="Use at most this many events.")
@federation_option
def validate(dataset: str, output: str, max_events: int | None, federation: str) -> None:
    """Validate reconstruction against truth: efficiency, fake rate, resolutions, jet response.

    Example: giod validate qcd -o validation/
    """
    from giod.physics.validation import cms_verdict, report_rows
    from giod.physics.validation import validate as run

    with writing(output):
        summary = run(_open(federation).dataset(dataset), output, max_events=max_events)
    rows = [list(row) for row in report_rows(summary)]
    _table(f"validation of {dataset} ({summary['events']:,} events)", ["quantity", "value"], rows)
    for name, ok in summary["targets"].items():
        click.echo(f"{'meets' if ok else 'MISSES'} the target for {name.replace('_', ' ')}")
    verdict = cms_verdict(summary)
    if verdict is not None:
        click.echo(verdict)
    click.echo(f"plots in {output}")


from giod.cli import chain, exchange, replication, serving  # noqa: E402, F401 - their commands register on main
from giod.cli.sql import sql_command  # noqa: E402 - made from the options above, importing nothing of this module
from giod.cli.tape import tape_commands  # noqa: E402 - the same

main.add_command(sql_command(federation_option, _open))
for _command in tape_commands(federation_option, _open):
    main.add_command(_command)
