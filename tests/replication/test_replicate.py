"""giod replicate: verified copies in parallel, push and pull, resumable, without duplicates."""

from __future__ import annotations

import threading
from pathlib import Path

import awkward as ak
import pytest
from click.testing import CliRunner

import giod
from giod.cli import main
from giod.replication import file_checksum, replicate
from giod.storage.checksum import checksum_bytes
from giod.store.consistency import fsck

from .conftest import all_paths, expected_events, files_under, make_home, states_at


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _checked(fed: giod.Federation, site: str, paths: set[str]) -> None:
    """Every path is a good replica at ``site`` whose file has the catalog's checksum."""
    assert states_at(fed, site) == dict.fromkeys(paths, "good")
    s = fed.site(site)
    for p in paths:
        assert file_checksum(s, p)[0] == fed.catalog.checksum_of(p)


def test_local_copy_of_chosen_containers_then_the_rest(home, tmp_path: Path):
    home.add_site("backup", str(tmp_path / "backup"), 5)
    tag_reco = all_paths(home, containers={"tag", "reco"})
    r = replicate(home.catalog, home.site, "qcd", "backup", containers=["tag", "reco"], streams=3)
    assert (r.copied, r.adopted, r.already, r.failed, r.ok) == (len(tag_reco), 0, 0, [], True)
    assert r.bytes == sum(len((tmp_path / "backup" / p).read_bytes()) for p in tag_reco)
    _checked(home, "backup", tag_reco)
    assert set(files_under(tmp_path / "backup")) == tag_reco  # no temporary file left behind

    r = replicate(home.catalog, home.site, "qcd", "backup", streams=4)
    everything = all_paths(home)
    assert (r.copied, r.already) == (len(everything - tag_reco), len(tag_reco))
    _checked(home, "backup", everything)
    again = replicate(home.catalog, home.site, "qcd", "backup")
    assert (again.copied, again.adopted, again.already) == (0, 0, len(everything))
    assert not fsck(home.store).problems


def test_copies_go_on_while_a_registration_is_written(home, tmp_path: Path, monkeypatch):
    """One stream: the first registration is held until every file is copied; the copies must not wait for it."""
    home.add_site("backup", str(tmp_path / "backup"), 5)
    paths = all_paths(home)
    total = sum(c.size for db in home.catalog.databases("qcd") for c in db.containers)
    copied_all = threading.Event()
    batches: list[int] = []
    waited: list[bool] = []
    real = home.catalog.set_replica_states

    def registering(rows):
        if rows and all(state == "good" for _, _, state in rows):
            batches.append(len(rows))
            if len(batches) == 1:
                waited.append(copied_all.wait(10))
        return real(rows)

    class Bytes:
        moved = 0

        def start(self, files, size):
            pass

        def advance(self, n):
            self.moved += n
            if self.moved == total:
                copied_all.set()

        def file_done(self):
            pass

    monkeypatch.setattr(home.catalog, "set_replica_states", registering)
    r = replicate(home.catalog, home.site, "qcd", "backup", streams=1, progress=Bytes())
    assert r.ok and r.copied == len(paths)
    assert waited == [True]  # every copy's bytes were moved while the first registration waited
    # the first registration holds what was copied when it began (one copy, or more on a loaded machine);
    # the rest went into one transaction, or two when the last copy was still being published
    assert sum(batches) == len(paths) and len(batches) <= 3
    _checked(home, "backup", paths)


def test_push_to_a_giod_server_and_pull_back(home, remote_site, tmp_path: Path):
    """local → remote server (push, the server checks each upload), then remote → a new local site (pull)."""
    home.add_site("caltech", remote_site.site_url, 20)
    r = replicate(home.catalog, home.site, "qcd", "caltech", streams=4)
    everything = all_paths(home)
    assert r.ok and r.copied == len(everything)
    on_server = files_under(remote_site.data)
    assert set(on_server) == everything
    local = files_under(Path(home.root) / "data")
    assert all(on_server[p] == local[p] for p in everything)
    _checked(home, "caltech", everything)

    # the origin goes away: a new site is filled from the server, the only good copy left
    home.catalog.set_replica_states([(c.id, "local", "lost") for db in home.catalog.databases("qcd")
                                     for c in db.containers])
    home.add_site("mirror", str(tmp_path / "mirror"), 30)
    r = replicate(home.catalog, home.site, "qcd", "mirror", streams=2)
    assert r.ok and r.copied == len(everything)
    assert files_under(tmp_path / "mirror") == local
    _checked(home, "mirror", everything)


def test_resume_adopts_right_files_replaces_wrong_ones_and_never_duplicates(home, tmp_path: Path):
    home.add_site("backup", str(tmp_path / "backup"), 5)
    dbs = home.catalog.databases("qcd")
    paths = sorted(all_paths(home))
    origin = files_under(Path(home.root) / "data")
    # an interrupted run: two files published but not registered (one still marked copying),
    # one file cut short, one with wrong content at the right size
    right, copying, short, wrong = paths[:4]
    for p in (right, copying):
        (tmp_path / "backup" / p).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "backup" / p).write_bytes(origin[p])
    (tmp_path / "backup" / short).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "backup" / short).write_bytes(origin[short][: len(origin[short]) // 2])
    (tmp_path / "backup" / wrong).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "backup" / wrong).write_bytes(bytes(len(origin[wrong])))
    ids = {c.path: c.id for db in dbs for c in db.containers}
    home.catalog.set_replica_states([(ids[copying], "backup", "copying")])
    assert [p.kind for p in fsck(home.store, checksums=False).problems].count("dark") == 3

    r = replicate(home.catalog, home.site, "qcd", "backup", streams=4)
    assert (r.adopted, r.copied, r.ok) == (2, len(paths) - 2, True)
    assert files_under(tmp_path / "backup") == origin  # every file right, none twice, no temporary file
    _checked(home, "backup", set(paths))
    # one replica row per (container, site): the resumed run added none twice
    assert all(len([x for x in reps if x.site == "backup"]) == 1
               for reps in home.catalog.replica_states("qcd").values())


def test_new_databases_and_readers_see_the_copies(home, tmp_path: Path):
    home.add_site("near", str(tmp_path / "near"), 0)
    replicate(home.catalog, home.site, "qcd", "near")
    ds = home.dataset("qcd")
    with ds.writer(database_events=60) as w:
        w.append(expected_events()[:30])
    r = replicate(home.catalog, home.site, "qcd", "near")
    assert r.copied == 5 and r.already == 20  # only the new database's containers (tag index included)
    got = ds.read(["hits", "ht"])
    assert len(got) == 270 and ak.array_equal(got.ht[:240], expected_events().ht)


def test_cli_replicate_progress_summary_and_errors(tmp_path: Path):
    fed = make_home(tmp_path / "home")
    fed.close()
    f = str(tmp_path / "home")
    r = run("site", "add", "backup", str(tmp_path / "backup"), "--distance", "3", "-f", f)
    assert r.exit_code == 0 and str(tmp_path / "backup") in r.output
    r = run("replicate", "qcd", "--to", "backup", "--containers", "tag,reco", "--streams", "2", "-f", f)
    assert r.exit_code == 0, r.output
    assert "qcd → backup: 8 copied" in r.output and "0 failed" in r.output
    r = run("replicate", "qcd", "--to", "backup", "-f", f)
    assert "12 copied" in r.output and "8 already there" in r.output  # raw.*, tag-index of 4 databases
    for bad, message in ((["--to", "nowhere"], "no site named 'nowhere'"),
                         (["--to", "backup", "--containers", "reko"], "has no container reko"),
                         (["--to", "backup", "--streams", "0"], "0")):
        r = CliRunner().invoke(main, ["replicate", "qcd", *bad, "-f", f])
        assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output


def test_sources_are_the_nearest_good_replicas(home, tmp_path: Path):
    """A copy comes from the nearest good replica; a bad one is never a source."""
    home.add_site("far", str(tmp_path / "far"), 50)
    home.add_site("near", str(tmp_path / "near"), 1)
    replicate(home.catalog, home.site, "qcd", "far")
    # the origin is marked bad (its files stay): the copy to "near" must come from "far"
    home.catalog.set_replica_states([(c.id, "local", "bad") for db in home.catalog.databases("qcd")
                                     for c in db.containers])
    for p in all_paths(home):
        (Path(home.root) / "data" / p).write_bytes(b"not what the catalog recorded")
    r = replicate(home.catalog, home.site, "qcd", "near")
    assert r.ok and r.attempts == r.copied == 20  # no try from the damaged origin
    for p in all_paths(home):
        assert checksum_bytes((tmp_path / "near" / p).read_bytes()) == home.catalog.checksum_of(p)


@pytest.mark.parametrize("copies", [0, 5])
def test_rules_refuse_impossible_copies(home, copies):
    with pytest.raises(giod.GiodError):
        home.catalog.add_rule("qcd", copies)
