"""Replication that follows commits: a rule-bound remote site receives each new database as it is committed."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import giod
from giod.exchange import follow_rules
from tests.exchange.conftest import DEADLINE, commit, in_thread, make_daq, wait_for
from tests.replication.conftest import start_remote


def _at(fed: giod.Federation, site: str) -> set[str]:
    """Paths of the containers of ``raw`` with a good replica at ``site``."""
    sid = fed.catalog.site(site).id
    return {c.path for db in fed.dataset("raw").databases() for c in db.containers if sid in c.site_ids}


def test_a_rule_bound_site_receives_each_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    daq = make_daq(tmp_path / "daq", databases=1)
    remote_gen = start_remote(tmp_path, "caltech", monkeypatch)
    remote = next(remote_gen)
    try:
        daq.add_site("caltech", remote.site_url, 10)
        daq.catalog.add_rule("raw", 2, ["local", "caltech"], ["tag", "reco"])
        stop = threading.Event()
        passes: list[object] = []
        thread, errors = in_thread(lambda: follow_rules(daq, stop=stop, on_pass=passes.append))
        try:
            def wanted() -> set[str]:
                # a rule naming the tags brings their index with them
                return {c.path for db in daq.dataset("raw").databases() for c in db.containers
                        if c.name in ("tag", "tag-index", "reco")}

            wait_for(daq, lambda: wanted() and _at(daq, "caltech") == wanted(), "the first database at caltech")
            for seed in (3, 4):
                commit(daq, 1, seed=seed)
                wait_for(daq, lambda: _at(daq, "caltech") == wanted(), "the new database at caltech")
        finally:
            stop.set()
            thread.join(DEADLINE)
        assert not thread.is_alive() and not errors, errors
        assert len(_at(daq, "caltech")) == 3 * 3
        files = {p.relative_to(remote.data).as_posix() for p in remote.data.rglob("*.*")}
        assert files == _at(daq, "caltech")  # the rule's containers, nothing else
        assert all(getattr(p, "ok") for p in passes[-1:])
    finally:
        remote_gen.close()


def test_a_commit_is_copied_while_a_full_pass_is_under_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The full pass holds its copies (a slow site); a database committed meanwhile reaches the site anyway,
    and no copy is made twice."""
    from giod.replication import rules

    daq = make_daq(tmp_path / "daq", databases=1)
    remote_gen = start_remote(tmp_path, "caltech", monkeypatch)
    remote = next(remote_gen)
    gate, held = threading.Event(), threading.Event()
    transfer = rules.run_transfers
    copied: list[tuple[int, str]] = []

    def slow_full_pass(catalog, open_site, transfers, **kw):  # type: ignore[no-untyped-def]
        # the full pass's copies wait for the gate, as behind a slow link
        held.set()
        assert gate.wait(DEADLINE)
        copied.extend((t.container.id, t.site) for t in transfers)
        return transfer(catalog, open_site, transfers, **kw)

    monkeypatch.setattr(rules, "run_transfers", slow_full_pass)
    try:
        daq.add_site("caltech", remote.site_url, 10)
        daq.catalog.add_rule("raw", 2, ["local", "caltech"], ["reco"])
        first = {c.path for db in daq.dataset("raw").databases() for c in db.containers if c.name == "reco"}
        stop = threading.Event()
        thread, errors = in_thread(lambda: follow_rules(daq, stop=stop, interval=3600))
        try:
            assert held.wait(DEADLINE)  # the full pass is under way, its copies held
            commit(daq, 1, seed=9)
            new = {c.path for db in daq.dataset("raw").databases() for c in db.containers
                   if c.name == "reco"} - first
            wait_for(daq, lambda: new <= _at(daq, "caltech"), "the new database at caltech during the pass")
            assert not gate.is_set() and not (first & _at(daq, "caltech"))
            gate.set()
            wait_for(daq, lambda: first | new <= _at(daq, "caltech"), "the first database after the pass")
        finally:
            gate.set()
            stop.set()
            thread.join(DEADLINE)
        assert not thread.is_alive() and not errors, errors
        # the full pass copied the first database alone: the new one was the commit's to copy
        ids = {c.id for db in daq.dataset("raw").databases() for c in db.containers if c.path in first}
        assert {cid for cid, _ in copied} == ids
    finally:
        remote_gen.close()
