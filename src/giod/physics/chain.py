"""The physics chain over a federation: simulate into a dataset, reconstruct it as a pass.

``simulate_into`` generates and simulates events in batches and stores the
raw containers (``truth``, ``raw.tracker``, ``raw.calo``) through an ordinary
writer; the ``tag`` container is left to the reconstruction, whose tags have
no defaults. Events are numbered by their entry in the dataset, so that the
reconstruction, which reads no tags, can give each event its number back.

``reconstruct_dataset`` reads the raw hits and cells of each database,
reconstructs them and writes ``reco`` and ``tag`` as a later pass, beside the
raw containers: every database of the pass is registered in one catalog
transaction, so readers see the whole pass or nothing. With ``workers > 1`` the
databases are reconstructed in worker processes, each opening the federation
itself; the main process registers their outputs in the one commit.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any

import awkward as ak
import numpy as np

import giod
from giod.errors import ConfigError, ConflictError, DataError, GiodError
from giod.physics.layout import model_text
from giod.physics.reconstruct import CELL_FIELDS, HIT_FIELDS
from giod.read.projection import assemble, read_database, resolve_columns
from giod.schema import TAG_CONTAINER, Schema
from giod.write.passwriter import PassOutput, write_pass

if TYPE_CHECKING:
    from giod.catalog.records import DatabaseRecord
    from giod.distributed import Target
    from giod.federation import Dataset, Federation

__all__ = ["RAW_COLLECTIONS", "reconstruct_dataset", "simulate_into", "to_reconstruct"]

#: What the raw pass stores.
RAW_COLLECTIONS = ("mcparticles", "tracker_hits", "calo_cells")
#: Events reconstructed together when reading a database (bounds the memory of raw hits).
CHUNK_EVENTS = 2000
SIMULATE_PROGRAM = "giod.physics.simulate"
RECONSTRUCT_PROGRAM = "giod.physics.reconstruct"

Progress = Callable[[int], None]


def simulate_into(
    fed: Federation,
    dataset: str,
    n_events: int,
    *,
    seed: int,
    batch: int = 2000,
    pthat_min: float = 50.0,
    pileup: float = 0.0,
    generator: str = "builtin",
    run: int = 1,
    database_events: int | None = None,
    progress: Progress | None = None,
    append: bool = False,
) -> Dataset:
    """Create ``dataset`` and fill it with ``n_events`` simulated raw events.

    Batch ``k`` is generated and simulated with seeds derived from
    ``(seed, k)``: the same arguments give bit-identical datasets.
    ``progress`` is called with the number of events of each stored batch.
    With ``append``, an existing dataset of the physics model is filled
    further (its events numbered on from its last entry, seeds derived from
    ``(seed, k, first entry)`` so that an append never repeats earlier
    events); a dataset of another model is refused with ``DataError``.
    """
    from giod.physics.detector import Detector
    from giod.physics.generator import generate

    if n_events <= 0:
        raise ConfigError(f"n_events must be positive, got {n_events}")
    if batch <= 0:
        raise ConfigError(f"batch must be positive, got {batch}")
    detector = Detector.load()
    # Check the arguments and the generator before creating anything: no empty dataset is left behind.
    generate(0, seed=seed, pthat_min=pthat_min, pileup=pileup, run=run)
    if generator == "pythia":
        from giod.physics.pythia import _module

        _module()  # MissingDependency, saying how to install it
    elif generator != "builtin":
        generate(0, seed=seed, generator=generator)  # ConfigError naming the generators
    schema = Schema.from_yaml(model_text())
    created = not (append and dataset in fed.datasets())
    if created:
        ds = fed.create_dataset(dataset, schema)
    else:
        ds = fed.dataset(dataset)
        if ds.schema.fingerprint != schema.fingerprint:
            raise DataError(f"dataset {dataset} follows the model {ds.schema.name!r}, not {schema.name!r}: "
                            "simulate into a new dataset")
    first = 0 if created else len(ds)
    try:
        _fill(ds, n_events, first, detector, seed=seed, batch=batch, pthat_min=pthat_min, pileup=pileup,
              generator=generator, run=run, database_events=database_events, progress=progress)
    except BaseException:
        # a dataset created here that no database reached is not left behind, empty
        if created and len(fed.dataset(dataset)) == 0:
            fed.catalog.delete_dataset(dataset)
        raise
    return fed.dataset(dataset)


def _fill(ds: Dataset, n_events: int, first: int, detector: Any, *, seed: int, batch: int, pthat_min: float,
          pileup: float, generator: str, run: int, database_events: int | None, progress: Progress | None) -> None:
    from giod.physics.generator import generate
    from giod.physics.simulate import simulate

    parameters = {"seed": seed, "pthat_min": pthat_min, "pileup": pileup, "generator": generator, "run": run}
    writer_options: dict[str, Any] = {}
    if database_events is not None:
        writer_options["database_events"] = database_events
    with ds.writer(program=SIMULATE_PROGRAM, program_version=giod.__version__, parameters=parameters,
                   **writer_options) as writer:
        for k, start in enumerate(range(0, n_events, batch)):
            n = min(batch, n_events - start)
            entropy = [seed, k] if first == 0 else [seed, k, first]
            gen_seed, sim_seed = (int(s) for s in np.random.SeedSequence(entropy).generate_state(2))
            truth = generate(n, seed=gen_seed, pthat_min=pthat_min, pileup=pileup, generator=generator,
                             run=run, first_event=first + start)
            events = simulate(truth, detector, seed=sim_seed)
            writer.append(events[list(RAW_COLLECTIONS)])
            if progress is not None:
                progress(n)


def reconstruct_dataset(
    dataset: Dataset,
    *,
    workers: int = 1,
    force: bool = False,
    progress: Progress | None = None,
    scheduler: Any = None,
) -> int:
    """Reconstruct every database of ``dataset`` as one pass; returns the new federation version.

    Databases that already hold the ``reco`` container are skipped, and a
    dataset with nothing left to reconstruct is refused with
    :class:`~giod.errors.ConflictError`, unless ``force``: then every
    database is reconstructed again and its ``reco`` and ``tag`` replaced in
    the new version (snapshots taken before still read the old ones).
    ``progress`` is called with the number of events of each finished piece.
    ``scheduler`` (a Dask address or client, ``"localcluster:N"``, … as for
    ``Selection.map``) runs the databases there instead of in ``workers`` processes.
    """
    if workers < 1:
        raise ConfigError(f"workers must be >= 1, got {workers}")
    ds = dataset.pinned()
    # largest first, so that no worker is left with a big database when the others are done
    todo = sorted(_databases_to_do(ds, force), key=lambda db: -db.bytes)
    passes = ds.add_containers(replace=force, program=RECONSTRUCT_PROGRAM, program_version=giod.__version__)
    try:
        if scheduler is not None:
            _on_scheduler(passes, ds, todo, force, progress, scheduler)
        elif workers == 1:
            for db in todo:
                passes.add(reconstruct_database(ds, db, replace=force, progress=progress))
        else:
            try:
                _in_workers(passes, ds, todo, workers, force, progress)
            except BrokenProcessPool as exc:
                raise GiodError(
                    "a reconstruction worker process died (out of memory, killed, or a script that "
                    "starts workers without an `if __name__ == \"__main__\":` guard); nothing was committed"
                ) from exc
        version = passes.commit()
    except BaseException:
        passes.abort()
        raise
    assert version is not None  # there was at least one database to do
    return version


def to_reconstruct(dataset: Dataset, *, force: bool = False) -> list[DatabaseRecord]:
    """The databases :func:`reconstruct_dataset` would reconstruct, with its errors for a dataset it refuses."""
    return _databases_to_do(dataset, force)


def _databases_to_do(ds: Dataset, force: bool) -> list[DatabaseRecord]:
    schema = ds.schema
    needed = [c for c in ("tracker_hits", "calo_cells", "tracks", "clusters", "jets") if c not in schema.collections]
    if needed:
        raise DataError(f"dataset {ds.name} cannot be reconstructed: its schema has no {', '.join(needed)}")
    raw = sorted({schema.container_of("tracker_hits"), schema.container_of("calo_cells")})
    reco = schema.container_of("tracks")
    databases = ds.databases()
    if not databases:
        raise DataError(f"dataset {ds.name} has no events to reconstruct")
    for db in databases:
        missing = [c for c in raw if db.container(c) is None]
        if missing:
            raise DataError(f"dataset {ds.name}: database {db.id} has no {', '.join(missing)} container "
                            "to reconstruct from")
    if force:
        return databases
    todo = [db for db in databases if db.container(reco) is None]
    if not todo:
        raise ConflictError(f"dataset {ds.name} is already reconstructed ({len(databases)} databases hold "
                            f"{reco!r}); use force=True (--force) to replace it in a new version")
    return todo


def raw_events(ds: Dataset, db: DatabaseRecord) -> Iterator[ak.Array]:
    """The raw hits and cells of one database as the reconstruction reads them, ``CHUNK_EVENTS`` at a time."""
    schema = ds.schema
    columns = [f"tracker_hits.{f}" for f in HIT_FIELDS] + [f"calo_cells.{f}" for f in CELL_FIELDS]
    proj = resolve_columns(schema, columns, {c.name for c in db.containers})
    run = int(db.parameters.get("run", 0)) if isinstance(db.parameters, dict) else 0
    for start in range(0, db.n_events, CHUNK_EVENTS):
        local = np.arange(start, min(start + CHUNK_EVENTS, db.n_events))
        raw = assemble(schema, proj, read_database(ds.snapshot, db, proj, local))
        raw = ak.with_field(raw, np.full(len(local), run, dtype=np.uint32), "run")
        yield ak.with_field(raw, (db.first_entry + local).astype(np.uint64), "event")


def reconstruct_database(
    ds: Dataset, db: DatabaseRecord, *, replace: bool = False, progress: Progress | None = None,
) -> PassOutput:
    """Reconstruct one database and write its ``reco`` and ``tag`` containers (not yet registered)."""
    from giod.physics.reconstruct import reconstruct

    pieces = []
    for raw in raw_events(ds, db):
        pieces.append(reconstruct(raw))  # the packaged detector and calibration
        if progress is not None:
            progress(len(raw))
    events = pieces[0] if len(pieces) == 1 else ak.concatenate(pieces)
    return write_pass(ds.snapshot, db, events, containers=[ds.schema.container_of("tracks"), TAG_CONTAINER],
                      replace=replace)


def _reconstruct_task(target: Target, dataset: str, version: int, db: DatabaseRecord, replace: bool) -> PassOutput:
    """A worker's task: reconstruct one database of the pinned version.

    The task carries the database's record and the worker keeps its
    federation open between tasks: after a worker's first task, a task asks
    the catalog nothing (opening a federation costs tens of milliseconds).
    """
    from giod.distributed import worker_dataset, worker_federation

    return reconstruct_database(worker_dataset(worker_federation(target), dataset, version), db, replace=replace)


def _on_scheduler(passes: Any, ds: Dataset, todo: list[DatabaseRecord], force: bool, progress: Progress | None,
                  scheduler: Any) -> None:
    from giod.distributed import Target, run_tasks
    from giod.physics.reconstruct import warm_up

    warm_up()  # compile once here; workers on this machine load the compiled code from numba's cache
    sites = [[s.name for s in ds.federation.sites() if all(s.id in c.site_ids for c in db.containers)] for db in todo]
    calls = [(Target.of(ds.federation.store), ds.name, int(ds.version), db, force) for db in todo]  # type: ignore[arg-type]
    for i, output in run_tasks(scheduler, _reconstruct_task, calls, sites=sites):
        passes.add(output)
        if progress is not None:
            progress(todo[i].n_events)


def _in_workers(passes: Any, ds: Dataset, todo: list[DatabaseRecord], workers: int,
                force: bool, progress: Progress | None) -> None:
    from giod.distributed import Target
    from giod.physics.reconstruct import warm_up

    version = int(ds.version)  # type: ignore[arg-type]  # pinned by the caller
    target = Target.of(ds.federation.store)
    warm_up()  # compile once here; the workers load the compiled code from numba's cache
    # spawn, not fork: the parent holds catalog connections and library thread pools
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(todo)), mp_context=context) as pool:
        futures: dict[Future[PassOutput], DatabaseRecord] = {
            pool.submit(_reconstruct_task, target, ds.name, version, db, force): db for db in todo
        }
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_EXCEPTION)
                for future in done:
                    passes.add(future.result())  # raises the worker's error
                    if progress is not None:
                        progress(futures[future].n_events)
        except BaseException:
            for future in pending:
                future.cancel()
            # outputs of tasks still running are collected so that discard() removes their files
            for future in pending:
                if not future.cancelled() and future.exception() is None:
                    passes.add(future.result())
            raise
