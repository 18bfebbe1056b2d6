"""Where tasks run: in this process, on a pool of spawned processes, or on a Dask cluster.
"""

from __future__ import annotations

import atexit
import os
import pickle
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from giod import config
from giod.errors import ConfigError, GiodError, MissingDependency

if TYPE_CHECKING:
    pass


from giod.distributed.tasks import SITE_RESOURCE

#: How often a local pool whose worker died is restarted before the job fails.
POOL_RESTARTS = 3

# ---------------------------------------------------------------- executors


@dataclass(frozen=True)
class TaskTiming:
    """When and where one task ran, measured around it in the worker."""

    index: int
    start: float  # time.time()
    stop: float
    cpu_s: float  # CPU time of the worker process during the task (its library threads too)
    worker: str

    @property
    def wall_s(self) -> float:
        return self.stop - self.start


class _Timed:
    """``func`` made to return its result with a :class:`TaskTiming` (index filled in by the client)."""

    def __init__(self, func: Callable[..., Any]):
        self.func = func
        self.__name__ = getattr(func, "__name__", "task")

    def __call__(self, *args: Any) -> tuple[Any, TaskTiming]:
        start, cpu = time.time(), time.process_time()
        out = self.func(*args)
        return out, TaskTiming(-1, start, time.time(), time.process_time() - cpu, _worker_name())


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return f"pid {os.getpid()}"


class Executor:
    """Runs tasks somewhere: this process, a local pool or a Dask cluster.

    ``timings`` holds a :class:`TaskTiming` per task of the last ``run``.
    """

    name = "executor"
    dashboard: str | None = None
    in_process = False

    def __init__(self) -> None:
        self.timings: list[TaskTiming] = []

    def run(self, func: Callable[..., Any], calls: Sequence[tuple[Any, ...]], *,
            sites: Sequence[Sequence[str]] | None = None, strict: bool = False) -> Iterator[tuple[int, Any]]:
        """``func(*calls[i])`` for every i; yields ``(i, result)`` as they finish."""
        self.timings = []
        for i, (out, timing) in self._run(_Timed(func), calls, sites=sites, strict=strict):
            self.timings.append(TaskTiming(i, timing.start, timing.stop, timing.cpu_s, timing.worker))
            yield i, out

    @property
    def n_workers(self) -> int:
        return 1

    def worker_sites(self) -> dict[str, str | None]:
        """The workers and the site each declared (empty when placement is not up to giod)."""
        return {}

    def _run(self, func: Callable[..., Any], calls: Sequence[tuple[Any, ...]], *,
             sites: Sequence[Sequence[str]] | None, strict: bool) -> Iterator[tuple[int, Any]]:
        raise NotImplementedError

    def close(self) -> None:
        """Release what this executor started."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SyncExecutor(Executor):
    """Every task in this process, in order."""

    name = "sync"
    in_process = True

    def _run(self, func: Callable[..., Any], calls: Sequence[tuple[Any, ...]], *,
             sites: Sequence[Sequence[str]] | None, strict: bool) -> Iterator[tuple[int, Any]]:
        for i, args in enumerate(calls):
            yield i, func(*args)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_POOLS: dict[int, ProcessPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _pool(n: int, fresh: bool = False) -> ProcessPoolExecutor:
    import multiprocessing

    with _POOLS_LOCK:
        pool = _POOLS.get(n)
        if pool is not None and fresh:
            pool.shutdown(wait=False, cancel_futures=True)
            pool = None
        if pool is None:
            # spawn, not fork: the parent holds catalog connections and library thread pools
            pool = ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn"))
            _POOLS[n] = pool
        return pool


@atexit.register
def _close_pools() -> None:
    with _POOLS_LOCK:
        for pool in _POOLS.values():
            pool.shutdown(wait=True, cancel_futures=True)
        _POOLS.clear()


def _call_pickled(payload: bytes) -> Any:
    # cloudpickle writes plain pickles: the standard loader reads both kinds
    func, args = pickle.loads(payload)  # noqa: S301 - written by this job's own client process
    return func(*args)


def _payloads(func: Callable[..., Any], calls: Sequence[tuple[Any, ...]]) -> list[bytes]:
    """Each call pickled for a worker process: by cloudpickle (the ``dask`` extra) when installed,
    so that lambdas and closures work on every scheduler alike, else by the standard pickle."""
    try:
        import cloudpickle
    except ImportError:
        try:
            return [pickle.dumps((func, args)) for args in calls]
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            raise MissingDependency(
                f"worker processes cannot receive this function without cloudpickle ({exc}): "
                "pip install 'giod[dask]', define the function at module level, or use scheduler='sync'"
            ) from exc
    return [cloudpickle.dumps((func, args)) for args in calls]


class PoolExecutor(Executor):
    """A pool of spawned processes on this machine, kept for later jobs of the same size."""

    def __init__(self, workers: int | None = None):
        super().__init__()
        self.workers = workers or _cpus()
        if self.workers < 1:
            raise ConfigError(f"a local pool needs at least 1 worker, got {self.workers}")
        self.name = f"processes:{self.workers}"
        self.restarts = 0

    @property
    def n_workers(self) -> int:
        return self.workers

    def _run(self, func: Callable[..., Any], calls: Sequence[tuple[Any, ...]], *,
             sites: Sequence[Sequence[str]] | None, strict: bool) -> Iterator[tuple[int, Any]]:
        payloads = _payloads(func, calls)
        todo = set(range(len(calls)))
        restarts = 0
        pool = _pool(self.workers)
        while todo:
            futures: dict[Future[Any], int] = {pool.submit(_call_pickled, payloads[i]): i for i in sorted(todo)}
            pending = set(futures)
            try:
                while pending:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for f in sorted(done, key=futures.__getitem__):
                        result = f.result()  # raises the task's error
                        todo.discard(futures[f])
                        yield futures[f], result
            except BrokenProcessPool as exc:
                # a worker died (killed, out of memory): a new pool runs the unfinished tasks again
                for f in pending:
                    f.cancel()
                restarts += 1
                self.restarts += 1
                if restarts > POOL_RESTARTS:
                    raise GiodError(f"local worker processes died {restarts} times; giving up "
                                    "(out of memory? a script without `if __name__ == \"__main__\":`?)") from exc
                pool = _pool(self.workers, fresh=True)
            except BaseException:
                for f in pending:
                    f.cancel()
                raise


class DaskExecutor(Executor):
    """A Dask ``distributed`` client: a remote scheduler, or a LocalCluster started for the job."""

    def __init__(self, client: Any, *, owned: tuple[Any, ...] = (), name: str | None = None):
        super().__init__()
        self.client = client
        self._owned = owned  # closed by close(): what this executor started
        self.name = name or f"dask {client.scheduler.address}"
        try:  # only a dashboard that runs: the scheduler lists it among its services
            running = "dashboard" in (client.scheduler_info().get("services") or {})
            self.dashboard = client.dashboard_link if running else None
        except Exception:  # noqa: BLE001 - no dashboard (bokeh missing): not an error
            self.dashboard = None

    @property
    def n_workers(self) -> int:
        return max(1, len(self.client.scheduler_info().get("workers", {})))

    def worker_sites(self) -> dict[str, str | None]:
        workers = self.client.scheduler_info().get("workers", {})
        out: dict[str, str | None] = {}
        for address, info in workers.items():
            declared = [k[len(SITE_RESOURCE):] for k in (info.get("resources") or {}) if k.startswith(SITE_RESOURCE)]
            out[address] = declared[0] if declared else None
        if any(v is None for v in out.values()):
            env = self.client.run(config.worker_site)
            out = {a: s if s is not None else env.get(a) for a, s in out.items()}
        return out

    def _run(self, func: Callable[..., Any], calls: Sequence[tuple[Any, ...]], *,
             sites: Sequence[Sequence[str]] | None, strict: bool) -> Iterator[tuple[int, Any]]:
        from distributed import as_completed

        at: dict[str, list[str]] = {}
        if sites is not None:
            for address, site in self.worker_sites().items():
                if site is not None:
                    at.setdefault(site, []).append(address)
        futures = []
        for i, args in enumerate(calls):
            workers = sorted({a for s in (sites[i] if sites is not None else ()) for a in at.get(s, ())})
            where: dict[str, Any] = {"workers": workers, "allow_other_workers": not strict} if workers else {}
            futures.append(self.client.submit(
                func, *args, pure=False, key=f"giod-{getattr(func, '__name__', 'task')}-{i}-{os.urandom(4).hex()}",
                **where))
        index = {f.key: i for i, f in enumerate(futures)}
        try:
            for f in as_completed(futures, loop=self.client.loop):  # this client's, default or not
                yield index[f.key], f.result()  # raises the task's error
        finally:
            self.client.cancel([f for f in futures if not f.done()])

    def close(self) -> None:
        for thing in self._owned:
            thing.close()


#: Dask's housekeeping in a LocalCluster, made quieter: Dask's defaults (left) cost an idle cluster of
#: two workers 11.5 % of one CPU, these 1.7 %, and the statistical profiler also samples every running
#: task's stack 100 times a second. On a laptop's few cores that is taken from the tasks themselves.
QUIET_LOCAL_CLUSTER = {
    "distributed.worker.profile.enabled": (True, False),  # the dashboard's profile tab stays empty
    "distributed.admin.tick.interval": ("20ms", "1s"),  # the event loop's health check
    "distributed.admin.system-monitor.interval": ("500ms", "5s"),  # CPU, memory and network of each process
    "distributed.worker.memory.monitor-interval": ("100ms", "1s"),  # the nanny's check of the memory limit
}


def quiet_settings() -> dict[str, Any]:
    """The quieter values of :data:`QUIET_LOCAL_CLUSTER` for settings still at Dask's defaults (a value
    set in the user's Dask configuration is kept)."""
    import dask
    import distributed  # noqa: F401 - its defaults, to compare with

    return {key: quiet for key, (default, quiet) in QUIET_LOCAL_CLUSTER.items()
            if dask.config.get(key, default) == default}


def local_cluster(n_workers: int = 2, *, sites: Sequence[str | None] | None = None,
                  dashboard: bool = True, host: str = "127.0.0.1") -> Any:
    """A Dask cluster of ``n_workers`` worker processes on this machine (one thread each).

    ``sites[i]`` declares the site of worker ``i`` (a ``site-<name>``
    resource), to try locality on one machine. It listens on ``host``
    (loopback by default: nothing outside this machine can reach it).
    Its housekeeping is quieter than Dask's defaults (:func:`quiet_settings`).
    """
    try:
        import copy
        import logging

        import dask
        from distributed import LocalCluster, Nanny, Scheduler, SpecCluster
    except ImportError as exc:
        raise MissingDependency("Dask is not installed: pip install 'giod[dask]'") from exc
    quiet = quiet_settings()
    # a nanny hands its configuration to every worker it starts, restarts included: its own deep copy,
    # since the global one (and any shallow copy of it) returns to the defaults when the context below ends
    config = copy.deepcopy(dask.config.config)
    dask.config.set(quiet, config=config)
    nanny = {"nthreads": 1, "host": host, "silence_logs": logging.ERROR, "config": config}
    address = f"{host}:0" if dashboard else None
    with dask.config.set(quiet):  # the scheduler, in this process, reads its settings when it is made
        if sites is None:
            return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host=host,
                                dashboard_address=address, silence_logs=logging.ERROR, config=config)
        if len(sites) != n_workers:
            raise ConfigError(f"sites names the site of each of the {n_workers} workers, got {len(sites)}")
        workers = {
            f"worker-{i}": {"cls": Nanny, "options": {
                **nanny, "resources": {f"{SITE_RESOURCE}{site}": 1} if site else {}}}
            for i, site in enumerate(sites)
        }
        scheduler = {"cls": Scheduler, "options": {"host": host, "dashboard_address": address}}
        return SpecCluster(workers=workers, scheduler=scheduler, silence_logs=logging.ERROR)


def connect(scheduler: Any = None) -> Executor:
    """The executor for ``scheduler`` (see the module's docstring); close it when done."""
    if isinstance(scheduler, Executor):
        return scheduler
    if scheduler is None:
        return PoolExecutor()
    if isinstance(scheduler, bool):
        raise ConfigError(f"unknown scheduler {scheduler!r}")
    if isinstance(scheduler, int):
        return PoolExecutor(scheduler)
    if isinstance(scheduler, str):
        text = scheduler.strip()
        kind, _, count = text.partition(":")
        if text == "sync":
            return SyncExecutor()
        if kind in ("processes", "localcluster") and not text.startswith("localcluster://"):
            if count and not (count.isdigit() and int(count) > 0):
                raise ConfigError(f"scheduler {text!r}: the number of workers must be a positive integer")
            n = int(count) if count else None
            if kind == "processes":
                return PoolExecutor(n)
            cluster = local_cluster(n or _cpus())
            client = _client(cluster)
            return DaskExecutor(client, owned=(client, cluster), name=f"localcluster:{n or _cpus()}")
        if "://" in text:
            client = _client(text)
            return DaskExecutor(client, owned=(client,))
        raise ConfigError(f"unknown scheduler {text!r}: use sync, processes[:N], localcluster[:N] or "
                          "tcp://HOST:PORT")
    try:
        from distributed import Client
    except ImportError as exc:
        raise MissingDependency("Dask is not installed: pip install 'giod[dask]'") from exc
    if isinstance(scheduler, Client):
        return DaskExecutor(scheduler)
    if hasattr(scheduler, "scheduler_address"):  # a cluster object
        client = Client(scheduler)
        return DaskExecutor(client, owned=(client,))
    raise ConfigError(f"unknown scheduler {scheduler!r}")


def _client(where: Any) -> Any:
    try:
        from distributed import Client
    except ImportError as exc:
        raise MissingDependency("Dask is not installed: pip install 'giod[dask]'") from exc
    try:
        return Client(where)  # waits distributed.comm.timeouts.connect (Dask's configuration)
    except OSError as exc:
        raise ConfigError(f"cannot reach the Dask scheduler at {where}: {exc}") from exc


def run_tasks(scheduler: Any, func: Callable[..., Any], calls: Sequence[tuple[Any, ...]], *,
              sites: Sequence[Sequence[str]] | None = None, strict: bool = False) -> Iterator[tuple[int, Any]]:
    """``func(*calls[i])`` on ``scheduler``; yields ``(i, result)`` in the order they finish.

    ``sites[i]`` lists the sites where call ``i`` reads locally. ``func``
    must be importable by the workers (a module-level function) or
    picklable by cloudpickle.
    """
    executor = connect(scheduler)
    try:
        yield from executor.run(func, calls, sites=sites, strict=strict)
    finally:
        if executor is not scheduler:
            executor.close()

