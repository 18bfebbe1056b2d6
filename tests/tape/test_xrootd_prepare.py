"""XRootD ``prepare`` for a ``root://…?nearline=1`` site, against a real ``xrootd`` server: a selection
asks for every file it reads in one stage request, waits until none is offline, and reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import awkward as ak
import pytest

import giod
from giod.errors import NotFound
from giod.replication import replicate
from giod.storage.tape import xrootd as prepare
from giod.storage.xrootd import XRootDSite
from tests.conftest import xrootd_url

Server = tuple[Any, Path]


COLUMNS = ["jets", "ht"]


@pytest.fixture
def whole(fed: giod.Federation) -> list[Any]:
    """The selection read from disk, before the disk copies are marked bad."""
    return ak.to_list(fed["qcd"].select("njets >= 2").read(COLUMNS))


@pytest.fixture
def vault(fed: giod.Federation, whole: list[Any], xrootd_pair: list[Server]) -> XRootDSite:
    """The dataset replicated to a nearline ``root://`` site, its disk copies marked bad (reads go there)."""
    fed.add_site("cta", xrootd_url(xrootd_pair[0]) + "?nearline=1", distance=20)
    assert replicate(fed.catalog, fed.site, "qcd", "cta", streams=2).ok
    fed.catalog.set_replica_states([(c.id, "local", "bad") for db in fed.catalog.databases("qcd")
                                    for c in db.containers])
    site = fed.store.site("cta")
    assert isinstance(site, XRootDSite)
    return site


def test_a_site_says_it_is_nearline_in_its_url():
    assert prepare.is_nearline("root://eos.example//eos/cms?nearline=1")
    assert not prepare.is_nearline("root://eos.example//eos/cms")
    assert not prepare.is_nearline("tape:///data/vault?nearline=1")


def test_prepare_stage_evict_and_offline_on_a_real_server(fed, vault):
    paths = sorted(c.path for db in fed.catalog.databases("qcd") for c in db.containers)[:5]
    rid = prepare.stage(vault, paths)
    assert rid  # the server's request id: a disk server stages nothing, but takes the request
    assert prepare.offline(vault, paths) == []  # a disk server's files are all online
    prepare.wait(vault, paths)  # so this returns at once
    prepare.evict(vault, paths)
    with pytest.raises(NotFound):
        prepare.offline(vault, ["qcd/no-such-file.arrow"])


def test_a_selection_prepares_every_file_it_reads_in_one_request(fed, whole, vault, monkeypatch):
    calls: list[tuple[int, int]] = []
    real = vault.fs.prepare

    def counted(files: list[str], flags: int, *args: Any, **kw: Any) -> Any:
        calls.append((len(files), int(flags)))
        return real(files, flags, *args, **kw)

    monkeypatch.setattr(vault.fs, "prepare", counted)
    sel = fed["qcd"].select("njets >= 2")
    assert ak.to_list(sel.read(COLUMNS)) == whole  # the same events as on disk
    assert sel.staging is not None and len(sel.staging.prepared) == 1
    site, paths, rid = sel.staging.prepared[0]
    assert site is vault and rid and len(paths) == len(set(paths))
    from XRootD.client.flags import PrepareFlags

    assert calls == [(len(paths), int(PrepareFlags.STAGE))]  # one request for every file the read needs
    assert sel.staging.progress().on_disk == len(paths)
    assert sel.staging.release() == len(paths)
    assert calls[-1] == (len(paths), int(PrepareFlags.EVICT))
