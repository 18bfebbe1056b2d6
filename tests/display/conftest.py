"""Fixtures for the display tests: a small simulated federation, real servers over it, Chromium.

The federation is made once per session: ``sim`` (simulated and
reconstructed events), ``raw`` (simulated, not yet reconstructed) and
``weights`` (a model with nothing a display can draw). The NanoAOD file of the
CMS open data and uproot's HZZ sample beside the repository are imported on
demand. Phoenix's loader runs in node, installed from the npm registry once per
session (``phoenix_build``). Chromium is
Debian's ``chromium`` package (or ``$GIOD_CHROMIUM``) driven by playwright.
Without node/npm, Chromium or playwright the tests needing them skip, except
under ``CI=true``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import pytest

import giod
from giod.schema import Schema
from giod.server.app import ServerThread, create_app

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
TTBAR = "nanoAOD_2015_CMS_Open_Data_ttbar.root"
HZZ = "uproot-HZZ.root"

WEIGHTS_MODEL = """
schema_version: 1
name: weights_only
types:
  Weight:
    fields:
      w: {type: float32}
collections:
  weights: Weight
containers:
  w: [weights]
tags:
  nweights: {type: int32}
"""


def _missing(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: it is required)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def sim_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from giod.physics.chain import reconstruct_dataset, simulate_into

    root = tmp_path_factory.mktemp("display") / "fed"
    fed = giod.open(root, create=True)
    reconstruct_dataset(simulate_into(fed, "sim", 6, seed=5, pthat_min=80.0))
    simulate_into(fed, "raw", 2, seed=6)
    ds = fed.create_dataset("weights", Schema.from_yaml(WEIGHTS_MODEL))
    with ds.writer() as w:
        w.append(ak.Array({"weights": [[{"w": 1.0}], [{"w": 0.5}, {"w": 2.0}]],
                           "nweights": np.array([1, 2], dtype=np.int32)}))
    fed.close()
    return root


@pytest.fixture(scope="session")
def sim(sim_root: Path) -> Iterator[giod.Federation]:
    fed = giod.open(sim_root, create=False)
    yield fed
    fed.close()


@dataclass
class Server:
    url: str
    local: giod.Federation

    def token(self, scope: str, dataset: str | None = None) -> str:
        return self.local.catalog.create_token(scope, dataset, note="display tests")[1]


@pytest.fixture(scope="session")
def open_server(sim_root: Path, sim: giod.Federation) -> Iterator[Server]:
    """A server that lets requests without a token read."""
    with ServerThread(create_app(str(sim_root), anonymous_read=True)) as url:
        yield Server(url, sim)


@pytest.fixture(scope="session")
def locked_server(sim_root: Path, sim: giod.Federation) -> Iterator[Server]:
    """A server where every request needs a token."""
    with ServerThread(create_app(str(sim_root))) as url:
        yield Server(url, sim)


@pytest.fixture(scope="session")
def nano_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A federation holding the CMS open-data NanoAOD ttbar file as dataset ``ttbar``."""
    from giod.interchange.nanoaod import import_root

    path = DATA / TTBAR
    if not path.is_file():
        _missing(f"CMS open-data file {TTBAR} not found in {DATA.resolve()}")
    root = tmp_path_factory.mktemp("nano") / "fed"
    fed = giod.open(root, create=True)
    import_root(fed, path, "ttbar")
    fed.close()
    return root


@pytest.fixture(scope="session")
def hzz_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A federation holding uproot's HZZ sample (objects as Px, Py, Pz, E; MET_px, MET_py) as ``hzz``."""
    from giod.interchange.nanoaod import import_root

    path = DATA / HZZ
    if not path.is_file():
        _missing(f"open-data file {HZZ} not found in {DATA.resolve()}")
    root = tmp_path_factory.mktemp("hzz") / "fed"
    fed = giod.open(root, create=True)
    import_root(fed, path, "hzz")
    fed.close()
    return root


# ------------------------------------------------------------------ Phoenix in node

#: What the Phoenix test installs from the npm registry: Phoenix's released loader, and a DOM
#: for the menus it imports.
PHOENIX_PACKAGES = ("phoenix-event-display@~3.0.5", "jsdom@^24")
PHOENIX_BUILD = Path(__file__).resolve().parent / "phoenix_node" / "build.mjs"


@pytest.fixture(scope="session")
def phoenix_build(tmp_path_factory: pytest.TempPathFactory) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Build Phoenix event data with Phoenix's own loader in node: what each object became.

    The packages are installed once per session into the session's temporary directory.
    """
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        _missing("node and npm are needed to run Phoenix's loader (apt-get install nodejs npm)")
    modules = tmp_path_factory.mktemp("phoenix-npm")
    (modules / "package.json").write_text('{"private": true}')
    try:
        subprocess.run([str(npm), "install", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error",
                        *PHOENIX_PACKAGES], cwd=modules, check=True, capture_output=True, text=True, timeout=240)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        _missing(f"npm install {' '.join(PHOENIX_PACKAGES)} failed: {(getattr(exc, 'stderr', '') or exc)!s:.500}")

    def build(data: dict[str, Any]) -> dict[str, Any]:
        path = modules / "event.json"
        path.write_text(json.dumps(data, allow_nan=False))
        done = subprocess.run([str(node), str(PHOENIX_BUILD), str(modules), str(path)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout)  # type: ignore[no-any-return]

    return build


# ------------------------------------------------------------------ browser


def chromium_path() -> str:
    path = os.environ.get("GIOD_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        _missing("Chromium not found (apt-get install chromium, or set GIOD_CHROMIUM)")
    return str(path)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed (it comes with giod's test extra)")
    path = chromium_path()
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=path, args=["--enable-unsafe-swiftshader", "--ignore-gpu-blocklist"])
        yield b
        b.close()


@dataclass
class Page:
    """A page with its console errors collected."""

    page: Any
    errors: list[str]

    def ready(self, timeout: float = 120_000) -> dict[str, Any]:
        """Wait for the display to draw an event or to report an error; its state."""
        self.page.wait_for_function(
            "(s => s && !s.loading && (s.ready || s.error))(window.giodDisplay)", timeout=timeout)
        return self.state()

    def state(self) -> dict[str, Any]:
        return self.page.evaluate("""() => { const s = window.giodDisplay; return {ready: s.ready, error: s.error,
            dataset: s.dataset, entry: s.entry, counts: s.counts, layers: s.layers, selected: s.selected,
            highlight: s.highlight, loads: s.loads, timings: s.timings, renderer: s.renderer}; }""")


@pytest.fixture
def page(browser: Any) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 860})
    p = context.new_page()
    errors: list[str] = []
    p.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    p.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    yield Page(p, errors)
    context.close()
