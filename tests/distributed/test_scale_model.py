"""The scaling model of ``giod bench scale``: its limits, and the simulation that checks it."""

from __future__ import annotations

import dataclasses

import pytest
from click.testing import CliRunner

from giod.cli import main
from giod_bench.scale import Costs, model, simulate_job

BASE = Costs(events=1000, compute_s=1.0, bytes=100e6, overhead_s=0.01, open_s=0.02, catalog_s=0.002,
             tasks_per_visit=100, scheduler_rate=2000, disk_rate=500e6)


def test_few_workers_are_limited_by_their_cpus() -> None:
    m = model(BASE, 2, 1, 10e9)
    assert m["limit"] == "workers (CPU)"
    per_task = BASE.compute_s + BASE.overhead_s + BASE.open_s / 100 + BASE.bytes / BASE.disk_rate
    assert m["events_per_s"] == pytest.approx(2 * BASE.events / per_task)


def test_many_workers_on_one_site_wait_for_its_bandwidth_and_more_sites_help() -> None:
    one = model(BASE, 1000, 1, 125e6)
    many = model(BASE, 1000, 16, 125e6)
    assert one["limit"] == "site bandwidth"
    assert one["events_per_s"] == pytest.approx(125e6 / BASE.bytes * BASE.events)
    assert many["events_per_s"] > 10 * one["events_per_s"]


def test_a_catalog_visit_per_task_makes_the_catalog_the_limit() -> None:
    per_task = dataclasses.replace(BASE, tasks_per_visit=1, catalog_s=0.05, bytes=1e3)
    m = model(per_task, 1000, 16, 125e6)
    assert m["limit"] == "catalog" and m["events_per_s"] == pytest.approx(BASE.events / 0.05)


@pytest.mark.parametrize(("workers", "sites"), [(2, 1), (100, 1), (100, 16), (1000, 4)])
def test_the_simulation_agrees_with_the_closed_form(workers: int, sites: int) -> None:
    predicted = model(BASE, workers, sites, 125e6)["events_per_s"]
    simulated = simulate_job(BASE, workers, sites, 125e6, tasks=100 * workers)
    assert simulated == pytest.approx(predicted, rel=0.15)
    assert simulated <= predicted * 1.01  # queueing only ever slows a job down


def test_bench_scale_is_a_command() -> None:
    result = CliRunner().invoke(main, ["bench", "scale", "--help"])
    assert result.exit_code == 0 and "LocalCluster" in result.output
