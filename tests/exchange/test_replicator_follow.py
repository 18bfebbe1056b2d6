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


def test_commits_are_copied_while_a_full_pass_is_planning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The full pass has read the catalog and is held before it claims its copies (a pass listing thousands of
    databases takes seconds); the database waiting at start and one committed meanwhile reach the site anyway,
    and the full pass, let go, copies neither again."""
    from giod.replication import rules

    daq = make_daq(tmp_path / "daq", databases=1)
    remote_gen = start_remote(tmp_path, "caltech", monkeypatch)
    remote = next(remote_gen)
    gate, held = threading.Event(), threading.Event()
    state, transfer = rules.rule_state, rules.run_transfers
    planned: list[tuple[int, str]] = []
    copied: list[tuple[int, str]] = []

    def planning(*args, **kw):  # type: ignore[no-untyped-def]
        # the full pass's planning: its reading done, it is held until the test lets it go
        result = state(*args, **kw)
        if not held.is_set():
            planned.extend((t.container.id, t.site) for t in result.transfers)
            held.set()
            assert gate.wait(DEADLINE)
        return result

    def full_pass_copies(catalog, open_site, transfers, **kw):  # type: ignore[no-untyped-def]
        copied.extend((t.container.id, t.site) for t in transfers)
        return transfer(catalog, open_site, transfers, **kw)

    monkeypatch.setattr(rules, "rule_state", planning)  # the full pass's, not the commits' (giod.replication's)
    monkeypatch.setattr(rules, "run_transfers", full_pass_copies)
    try:
        daq.add_site("caltech", remote.site_url, 10)
        daq.catalog.add_rule("raw", 2, ["local", "caltech"], ["reco"])
        first = {c.path for db in daq.dataset("raw").databases() for c in db.containers if c.name == "reco"}
        stop = threading.Event()
        thread, errors = in_thread(lambda: follow_rules(daq, stop=stop, interval=3600))
        try:
            assert held.wait(DEADLINE)  # the full pass has planned, and is held
            commit(daq, 1, seed=9)
            new = {c.path for db in daq.dataset("raw").databases() for c in db.containers
                   if c.name == "reco"} - first
            wait_for(daq, lambda: first | new <= _at(daq, "caltech"), "both databases at caltech during the pass")
            assert not gate.is_set()
            gate.set()
        finally:
            gate.set()
            stop.set()
            thread.join(DEADLINE)
        assert not thread.is_alive() and not errors, errors
        ids = {c.id for db in daq.dataset("raw").databases() for c in db.containers if c.path in first}
        assert {cid for cid, _ in planned} == ids  # the full pass had planned the first database's copy ...
        assert copied == []  # ... and found it made by the commits' path: nothing was copied twice
        files = {p.relative_to(remote.data).as_posix() for p in remote.data.rglob("*.*")}
        assert files == first | new
    finally:
        remote_gen.close()


def test_claims_drop_copies_under_way_and_finished_since_the_mark() -> None:
    from giod.replication.rules import Claims

    class T:
        def __init__(self, cid: int, site: str = "far") -> None:
            self.container, self.site = type("C", (), {"id": cid})(), site

    claims = Claims()
    early = claims.mark()
    a, b, c = T(1), T(2), T(3)
    assert claims.claim(claims.mark(), [a, b]) == [a, b]
    late = claims.mark()
    claims.release([a])  # a finished after both marks were taken
    assert claims.claim(early, [T(1), T(2), c]) == [c]  # 1 finished since the mark, 2 under way
    assert claims.busy == {(2, "far"), (3, "far")}
    claims.release([b, c])
    assert [t.container.id for t in claims.claim(late, [T(1), T(2), T(3)])] == []
    # no mark left open: finished copies are forgotten, a fresh plan (read after they were registered) may claim
    assert [t.container.id for t in claims.claim(claims.mark(), [T(1)])] == [1]
    # a copy finished before a mark was taken (a failed one, to try again) is a later plan's to claim
    keep = claims.mark()
    claims.release([T(1)])
    after = claims.mark()
    assert claims.claim(after, [T(1)]) != [] and claims.claim(keep, [T(2)]) != []
    assert claims.claim(claims.mark(), [T(1)]) == []  # under way again, claimed by ``after``
