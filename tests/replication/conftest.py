"""Two or three sites on one machine: a home federation, local sites, and other giod servers on loopback.

``home`` is an embedded federation holding the dataset ``qcd`` (synthetic
events in a few databases) at its site ``local``. ``remote_site`` starts a
giod server over a federation of its own, whose site ``local`` the home
federation registers as a remote site; its admin token is put in
``GIOD_TOKEN_<NAME>``, as an operator would. ``ServeProcess`` runs
``giod serve`` as a real child process, for tests that kill it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import awkward as ak
import pytest

import giod
from giod.read import tagindex
from giod.server.app import ServerThread, create_app
from giod.storage.remote import site_token_env
from giod.testing import synthetic

EVENTS = 240
PER_DATABASE = 60  # 4 databases x 4 containers = 16 files


@pytest.fixture(autouse=True)
def _small_databases_indexed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The databases here hold 60 events, less than a block of the tag index, which would leave them
    without one (``tagindex.worth_writing``): blocks of 8 positions give each its index, a file these tests
    follow through replicas and rules."""
    monkeypatch.setattr(tagindex, "BLOCK", 8)


def expected_events() -> ak.Array:
    return synthetic.events(EVENTS, seed=11)


def make_home(path: Path, events: ak.Array | None = None) -> giod.Federation:
    fed = giod.open(path, create=True)
    ds = fed.create_dataset("qcd", synthetic.schema())
    with ds.writer(database_events=PER_DATABASE, cluster_events=20) as w:
        w.append(expected_events() if events is None else events)
    return fed


@pytest.fixture
def home(tmp_path: Path) -> Iterator[giod.Federation]:
    fed = make_home(tmp_path / "home")
    yield fed
    fed.close()


@dataclass
class Remote:
    """A giod server over a federation of its own, registered as a site of the home federation."""

    name: str
    url: str  # the server, http://127.0.0.1:port
    root: Path  # the server's federation directory
    token: str  # its admin token

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def site_url(self) -> str:
        return f"{self.url}/files/local"


def start_remote(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Remote]:
    root = tmp_path / f"server-{name}"
    fed = giod.open(root, create=True)
    token = fed.catalog.create_token("admin", note="replication tests")[1]
    fed.close()
    monkeypatch.setenv(site_token_env(name), token)
    with ServerThread(create_app(str(root))) as url:
        yield Remote(name, url, root, token)


@pytest.fixture
def remote_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Remote]:
    yield from start_remote(tmp_path, "caltech", monkeypatch)


class ServeProcess:
    """``giod serve`` in a child process, on a fixed port so that it can be restarted there."""

    def __init__(self, root: Path, port: int = 0):
        self.root, self.port = root, port
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> str:
        argv = [sys.executable, "-c", "from giod.cli import main; main()", "serve", "-f", str(self.root),
                "--host", "127.0.0.1", "--port", str(self.port)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()  # "giod serving … at http://127.0.0.1:PORT", once listening
        if "giod serving" not in line:
            self.proc.kill()
            raise RuntimeError(f"giod serve did not start: {line}{self.proc.stderr.read()}")
        self.port = int(line.rsplit(":", 1)[1])
        return f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        self.kill()
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()


def files_under(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` (relative path -> bytes)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def states_at(fed: giod.Federation, site: str, dataset: str = "qcd") -> dict[str, str]:
    """path -> replica state at ``site`` for the live containers of ``dataset``."""
    paths = {c.id: c.path for db in fed.catalog.databases(dataset) for c in db.containers}
    out = {}
    for cid, reps in fed.catalog.replica_states(dataset).items():
        for r in reps:
            if r.site == site:
                out[paths[cid]] = r.state
    return out


def all_paths(fed: giod.Federation, dataset: str = "qcd", containers: set[str] | None = None) -> set[str]:
    return {c.path for db in fed.catalog.databases(dataset) for c in db.containers
            if containers is None or c.name in containers}
