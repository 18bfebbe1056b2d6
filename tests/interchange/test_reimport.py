"""A file already in a dataset is refused on a second import, unless it is appended on purpose;
one an interrupted import left partly imported is finished by the same import."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import giod
from giod.cli import main
from giod.errors import ConflictError
from giod.interchange import import_root, inspect_tree, iterate_events
from giod.interchange.nanoaod import file_checksum

HZZ_EVENTS = 2421


def iter_events(path: Path, step: int):
    return iterate_events(path, inspect_tree(path), step_size=step)


@pytest.mark.rootdata
def test_cli_refuses_a_reimport_and_appends_on_purpose(tmp_path: Path, hzz: Path) -> None:
    fed = str(tmp_path / "fed")
    runner = CliRunner()
    first = runner.invoke(main, ["import", str(hzz), "--dataset", "hzz", "--create", "-f", fed])
    assert first.exit_code == 0, first.output
    with giod.open(fed) as opened:
        before = [(d.id, d.n_events) for d in opened.dataset("hzz").databases()]
        version = opened.version

    again = runner.invoke(main, ["import", str(hzz), "--dataset", "hzz", "-f", fed])
    lines = [ln for ln in again.output.splitlines() if ln.strip()]
    assert again.exit_code == 2 and len(lines) == 1, again.output
    assert "already in dataset hzz: all of its events" in lines[0] and "--append" in lines[0]
    with giod.open(fed) as opened:
        assert len(opened.dataset("hzz")) == HZZ_EVENTS
        assert [(d.id, d.n_events) for d in opened.dataset("hzz").databases()] == before
        assert opened.version == version  # nothing was committed

    on_purpose = runner.invoke(main, ["import", str(hzz), "--dataset", "hzz", "--append", "-f", fed])
    assert on_purpose.exit_code == 0, on_purpose.output
    with giod.open(fed) as opened:
        assert len(opened.dataset("hzz")) == 2 * HZZ_EVENTS


@pytest.mark.rootdata
def test_api_records_the_checksum_and_refuses_a_reimport(tmp_path: Path, hzz: Path) -> None:
    import hashlib

    with giod.open(tmp_path / "fed", create=True) as fed:
        report = import_root(fed, hzz, "hzz")
        digest = "sha256:" + hashlib.sha256(hzz.read_bytes()).hexdigest()
        assert report.checksum == digest
        params = [d.parameters for d in fed.dataset("hzz").databases()]
        assert params and all(p["source_checksum"] == digest and p["source"] == hzz.name for p in params)
        assert {d.program for d in fed.dataset("hzz").databases()} == {"giod import"}

        # the same bytes under another name are the same file
        copy = tmp_path / "renamed.root"
        copy.write_bytes(hzz.read_bytes())
        for path, target in ((hzz, fed), (copy, fed), (hzz, fed.dataset("hzz"))):
            with pytest.raises(ConflictError, match=r"already in dataset hzz: all of its events.*append=True"):
                import_root(target, path, "hzz")
        assert len(fed.dataset("hzz")) == HZZ_EVENTS

        assert import_root(fed, copy, "hzz", append=True).n_events == HZZ_EVENTS
        assert len(fed.dataset("hzz")) == 2 * HZZ_EVENTS
        assert import_root(fed, hzz, "hzz2").created  # another dataset takes it as usual


@pytest.mark.rootdata
def test_an_interrupted_import_into_an_existing_dataset_is_finished_by_the_same_import(
    tmp_path: Path, hzz: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIOD_DATABASE_EVENTS", "1000")  # a database committed per chunk

    def interrupt(done: int, total: int) -> None:
        if done >= 2000:
            raise KeyboardInterrupt

    with giod.open(tmp_path / "fed", create=True) as fed:
        import_root(fed, hzz, "hzz", step_size=1000)
        with pytest.raises(KeyboardInterrupt):
            import_root(fed, hzz, "hzz", step_size=1000, progress=interrupt, append=True)
        assert len(fed.dataset("hzz")) == HZZ_EVENTS + 2000  # what was committed stays
        with pytest.raises(ConflictError, match=r"already in dataset hzz: all of its events"):
            import_root(fed, hzz, "hzz")

    with giod.open(tmp_path / "other", create=True) as fed:
        fed.create_dataset("hzz", inspect_tree(hzz).schema)
        with pytest.raises(KeyboardInterrupt):
            import_root(fed, hzz, "hzz", step_size=1000, progress=interrupt)
        report = import_root(fed, hzz, "hzz", step_size=1000)
        assert (report.resumed, report.n_events) == (2000, HZZ_EVENTS - 2000)
        whole = import_root(fed, hzz, "whole")
        mine, theirs = fed.dataset("hzz").read(), fed.dataset("whole").read()
        assert len(mine) == whole.n_events == HZZ_EVENTS
        assert mine.to_list() == theirs.to_list()  # the same events in the same order, none twice

    with giod.open(tmp_path / "keyless", create=True) as fed:
        # databases of an import that recorded no keys (before imports could be resumed): refused as before
        ds = fed.create_dataset("hzz", inspect_tree(hzz).schema)
        checksum = file_checksum(hzz)
        events = next(iter_events(hzz, 2000))
        with ds.writer(program="giod import", parameters={"source": hzz.name, "source_checksum": checksum}) as w:
            w.append(events)
        with pytest.raises(ConflictError, match=r"already in dataset hzz: 2,000 of the 2,421 of its events"):
            import_root(fed, hzz, "hzz")
