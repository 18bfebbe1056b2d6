"""Tasks go to workers at the site holding their database; the report counts local and remote tasks."""

from __future__ import annotations

import giod.distributed
from giod.distributed import map_selection

from .conftest import DATABASES, DATASET, SITES


def _site_of_each_task(fed: giod.Federation, report) -> list[str]:
    dbs = [db.id for db in fed.dataset(DATASET).databases()]
    return [DATABASES[dbs.index(t.database)][0] for t in report.tasks]


def test_strict_locality_runs_every_task_where_its_replica_is(fed: giod.Federation, client) -> None:
    sel = fed.dataset(DATASET).select()
    n, report = map_selection(sel, len, columns=["njets", "jets.pt"], scheduler=client, report=True,
                                     locality="strict")
    assert n == len(sel)
    held = _site_of_each_task(fed, report)
    for task, site in zip(report.tasks, held, strict=True):
        assert task.declared  # the workers declared their sites as Dask resources
        if site in SITES:
            assert task.local and task.site == site
        else:  # fnal has no worker: the task ran elsewhere, and is counted remote
            assert not task.local and task.site in SITES
    assert report.local == sum(1 for s in held if s in SITES) == 3
    assert report.remote == 1
    sites = report.by_site()
    assert sites["cern"]["local"] == 2 and sites["caltech"]["local"] == 1
    assert sum(s["remote"] for s in sites.values()) == 1
    assert "3 local, 1 remote" in report.summary()


def test_preferred_locality_counts_what_really_happened(fed: giod.Federation, client) -> None:
    sel = fed.dataset(DATASET).select()
    _, report = map_selection(sel, len, columns=["njets"], scheduler=client, report=True, partition_events=50)
    held = _site_of_each_task(fed, report)
    for task, site in zip(report.tasks, held, strict=True):
        assert task.local == (task.site == site)  # idle workers elsewhere may steal a task: then it is remote
    assert report.local + report.remote == report.partitions
    assert report.remote >= sum(1 for s in held if s not in SITES)


def test_a_worker_declares_its_site_with_an_environment_variable(fed: giod.Federation, monkeypatch) -> None:
    sel = fed.dataset(DATASET).select()
    monkeypatch.setenv("GIOD_SITE", "caltech")
    _, report = map_selection(sel, len, columns=["njets"], scheduler="sync", report=True)
    assert [t.local for t in report.tasks] == [s == "caltech" for s, _ in DATABASES]
    assert all(t.declared and t.site == "caltech" for t in report.tasks)
    monkeypatch.delenv("GIOD_SITE")
    _, report = map_selection(sel, len, columns=["njets"], scheduler="sync", report=True)
    assert all(not t.declared and t.site == "local" and not t.local for t in report.tasks)  # assumed nearest


def test_a_worker_reads_the_replica_at_its_own_site(tmp_path, monkeypatch) -> None:
    from giod.replication import replicate
    from giod.testing import synthetic

    with giod.open(tmp_path / "fed", create=True) as fed:
        fed.add_site("near", str(tmp_path / "near"), 1)
        fed.add_site("far", str(tmp_path / "far"), 50)
        ds = fed.create_dataset("syn", synthetic.schema())
        with ds.writer(site="near") as w:
            w.append(synthetic.events(120, seed=3))
        replicate(fed.catalog, fed.site, "syn", "far", streams=1)
        sel = fed.dataset("syn").select()
        _, report = map_selection(sel, len, columns=["njets", "jets.pt"], scheduler="sync", report=True)
        assert [t.read_sites for t in report.tasks] == [("near",)]  # nobody declared a site: the nearest
        monkeypatch.setenv("GIOD_SITE", "far")
        n, report = map_selection(sel, len, columns=["njets", "jets.pt"], scheduler="sync", report=True)
        assert n == 120
        assert [(t.site, t.local, t.read_sites) for t in report.tasks] == [("far", True, ("far",))]
