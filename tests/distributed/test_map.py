"""Selection.map gives the serial answer, bit for bit, on every scheduler."""

from __future__ import annotations

import awkward as ak
import numpy as np
import pytest

import giod.distributed
from giod.analysis import dijet
from giod.distributed import MapReport, map_selection
from giod.errors import ConfigError, DataError
from giod.testing import synthetic

from .conftest import DATABASES, DATASET

EXPRESSION = "njets >= 2 and ht > 60"
JETS = ["jets.pt", "jets.eta", "jets.phi", "jets.mass"]


def summary(chunk: ak.Array) -> dict:
    """Every kind of result the default reduction knows."""
    h = dijet.mass_histogram()
    h.fill(mjj=dijet.dijet_masses(chunk.jets))
    return {
        "events": len(chunk),
        "ht_sum": float(np.sum(chunk.ht.to_numpy().astype(np.float64))),
        "hist": h,
        "entries": chunk.event.to_numpy(),
        "pts": chunk.jets.pt,
        "pair": (len(chunk), [int(chunk.event[0])]),
    }


@pytest.fixture(params=["sync", "processes", "cluster"])
def scheduler(request: pytest.FixtureRequest):
    if request.param == "cluster":
        return request.getfixturevalue("client")
    return "processes:2" if request.param == "processes" else request.param


def test_map_equals_serial(fed: giod.Federation, scheduler) -> None:
    sel = fed.dataset(DATASET).select(EXPRESSION)
    columns = [*JETS, "ht", "event"]
    got, report = map_selection(sel, summary, columns=columns, scheduler=scheduler, partition_events=120,
                                       report=True)

    serial = sel.read(columns)
    h = dijet.mass_histogram()
    h.fill(mjj=dijet.dijet_masses(serial.jets))
    assert 0 < got["events"] == len(serial) == len(sel) < sum(n for _, n in DATABASES)
    assert np.array_equal(got["hist"].values(), h.values()) and np.array_equal(got["hist"].variances(), h.variances())
    assert np.array_equal(got["entries"], sel.entries())
    assert ak.array_equal(got["pts"], serial.jets.pt, dtype_exact=True)
    assert got["ht_sum"] == pytest.approx(float(np.sum(serial.ht.to_numpy().astype(np.float64))), rel=1e-12)
    assert got["pair"][0] == len(serial) and got["pair"][1] == sorted(got["pair"][1])
    # databases split in ranges of at most 120 entries: more tasks than databases, in entry order
    assert isinstance(report, MapReport) and report.partitions == len(report.tasks) > len(DATABASES)
    assert [t.partition for t in report.tasks] == list(range(report.partitions))
    assert sum(t.events for t in report.tasks) == len(serial)


def test_results_are_bit_identical_across_schedulers(fed: giod.Federation, client) -> None:
    sel = fed.dataset(DATASET).select(EXPRESSION)
    columns = [*JETS, "ht", "event"]
    runs = [map_selection(sel, summary, columns=columns, scheduler=s, partition_events=90)
            for s in ("sync", "processes:2", client)]
    for other in runs[1:]:
        assert other["ht_sum"] == runs[0]["ht_sum"]  # the same additions in the same order
        assert np.array_equal(other["hist"].view(flow=True), runs[0]["hist"].view(flow=True))
        assert ak.array_equal(other["pts"], runs[0]["pts"], dtype_exact=True)


def test_dijet_analysis_is_identical_serially_on_a_pool_and_on_a_cluster(fed: giod.Federation, client) -> None:
    ds = fed.dataset(DATASET)
    reference = dijet.mass_histogram()
    for chunk in ds.select("njets >= 2").iterate(JETS):
        dijet.fill(reference, chunk, "jets")
    for scheduler in ("sync", "processes:2", client):
        h = dijet.run(ds, "njets >= 2", scheduler=scheduler, step_size=100)
        assert h.sum() > 0
        assert np.array_equal(h.view(flow=True), reference.view(flow=True)), scheduler


def test_custom_reduce_and_lambdas(fed: giod.Federation) -> None:
    sel = fed.dataset(DATASET).select()
    biggest = map_selection(sel, lambda c: float(ak.max(c.ht)), columns=["ht"], reduce=max,
                                   scheduler="processes:2")
    assert biggest == float(ak.max(sel.read(["ht"]).ht))


def test_a_job_sees_its_snapshot_while_a_writer_commits(fed: giod.Federation) -> None:
    ds = fed.dataset(DATASET)
    sel = ds.select()
    before = len(sel)
    with fed.create_dataset("growing", synthetic.schema()).writer() as w:  # another dataset: the fixture is shared
        w.append(synthetic.events(10, seed=5))
    grow = fed.dataset("growing").select()
    with fed.dataset("growing").writer() as w:
        w.append(synthetic.events(7, seed=6))
    assert map_selection(sel, len, columns=["njets"], scheduler="sync") == before
    # pinned before the second commit
    assert map_selection(grow, len, columns=["njets"], scheduler="processes:2") == 10
    assert map_selection(fed.dataset("growing").select(), len, columns=["njets"], scheduler="sync") == 17


def test_no_selected_event_gives_the_function_of_an_empty_chunk(fed: giod.Federation) -> None:
    sel = fed.dataset(DATASET).select("njets > 1000")
    assert map_selection(sel, len, columns=["njets"], scheduler="sync") == 0
    h = dijet.run(fed.dataset(DATASET), "njets > 1000")
    assert h.sum() == 0


def test_progress_is_reported_in_the_client(fed: giod.Federation) -> None:
    seen: list[tuple[int, int]] = []
    map_selection(fed.dataset(DATASET).select(), len, columns=["njets"], scheduler="sync", partition_events=100,
                         progress=lambda done, total: seen.append((done, total)))
    total = seen[-1][1]
    assert seen[0] == (0, total) and seen[-1] == (total, total) and total >= len(DATABASES)
    assert [d for d, _ in seen] == list(range(total + 1))


def test_bad_input_is_refused(fed: giod.Federation) -> None:
    sel = fed.dataset(DATASET).select()
    with pytest.raises(ConfigError, match="unknown scheduler"):
        map_selection(sel, len, columns=["njets"], scheduler="threads")
    with pytest.raises(ConfigError, match="positive"):
        map_selection(sel, len, columns=["njets"], scheduler="processes:0")
    with pytest.raises(ConfigError, match="partition_events"):
        map_selection(sel, len, columns=["njets"], scheduler="sync", partition_events=0)
    with pytest.raises(DataError, match="cannot reduce"):
        map_selection(sel, lambda c: "text", columns=["njets"], scheduler="sync")
    with pytest.raises(ZeroDivisionError):  # the function's own error comes back as it is
        map_selection(sel, lambda c: 1 / 0, columns=["njets"], scheduler="processes:2")


def test_giods_local_cluster_is_quiet_and_keeps_the_users_settings(client) -> None:
    import dask

    from giod.distributed.executors import QUIET_LOCAL_CLUSTER, quiet_settings

    def seen() -> dict:
        import dask

        return {key: dask.config.get(key) for key in QUIET_LOCAL_CLUSTER}

    def intervals(dask_scheduler=None, dask_worker=None) -> tuple[float, float]:
        server = dask_scheduler or dask_worker
        return server._tick_interval, server.periodic_callbacks["monitor"].callback_time

    quiet = {key: value for key, (_, value) in QUIET_LOCAL_CLUSTER.items()}
    for worker, settings in client.run(seen).items():  # the workers, made by their nannies
        assert settings == quiet, worker
    first = sorted(client.scheduler_info()["workers"])[0]
    # its nanny starts a new worker process with the nanny's settings; restart_workers waits for it, so the
    # test does not race the nanny noticing a killed process (which took over a minute under the whole suite)
    client.restart_workers([first], timeout=240)
    restarted = client.run(seen)
    assert first not in restarted and len(restarted) == 2
    assert all(settings == quiet for settings in restarted.values())  # a restarted worker too
    # the scheduler lives in this process: it read its settings when it was made
    assert client.run_on_scheduler(intervals) == (1.0, 5000.0)
    assert set(client.run(intervals).values()) == {(1.0, 5000.0)}
    assert dask.config.get("distributed.worker.profile.enabled") is True  # this process is left as it was
    with dask.config.set({"distributed.admin.tick.interval": "50ms", "distributed.worker.profile.enabled": True}):
        # a value the user set is theirs (one set to exactly Dask's default looks like the default)
        assert "distributed.admin.tick.interval" not in quiet_settings()


def test_a_quiet_cluster_started_first_thing_leaves_dasks_configuration_whole() -> None:
    import subprocess
    import sys

    code = ("import dask\nfrom giod.distributed.executors import local_cluster\n"
            "c = local_cluster(1, dashboard=False)\n"
            "print(dask.config.get('distributed.deploy.lost-worker-timeout'), "
            "dask.config.get('distributed.admin.tick.interval'))\nc.close()\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["15s", "20ms"]  # Dask's own defaults, loaded and kept


def test_columns_are_optional_and_map_is_a_deprecated_name(fed):
    sel = fed.dataset(DATASET).select("njets >= 2")
    every = sel.read()
    got = map_selection(sel, lambda chunk: sorted(chunk.fields), scheduler="sync",
                                         reduce=lambda a, b: a if a == b else ["differ"])
    assert got == sorted(every.fields)  # every collection and tag, as Selection.read() gives
    with pytest.warns(DeprecationWarning, match=r"giod\.distributed\.map\(\).*map_selection\(\)"):
        n = giod.distributed.map(sel, len, columns=["njets"], scheduler="sync")
    assert n == len(every)
    assert "map" not in giod.distributed.__all__
