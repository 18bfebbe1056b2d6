"""Every GIOD_* variable is read through giod.config: the process's own ones included."""

from __future__ import annotations

import re
from pathlib import Path

from giod import config

SRC = Path(__file__).resolve().parents[2] / "src" / "giod"


def test_tokens_site_and_federation_come_from_config():
    env = {"GIOD_TOKEN": "all", "GIOD_TOKEN_CERN_T0": "cern", "GIOD_SITE": "", "GIOD_FEDERATION": "./fed"}
    assert config.token(environ=env) == "all"
    assert config.token("cern-t0", env) == "cern"  # one site's own variable first
    assert config.token("fnal", env) == "all"
    assert config.token("fnal", env, fallback=False) is None
    assert config.worker_site(env) is None  # set but empty: unset
    assert config.worker_site({"GIOD_SITE": "cern"}) == "cern"
    assert config.federation(env) == "./fed"


def test_no_module_but_config_reads_the_environment():
    readers = re.compile(r"os\.environ\b|os\.getenv\(|environ\.get\(")
    found = [f"{p.relative_to(SRC)}:{i}" for p in sorted(SRC.rglob("*.py"))
             if p.name != "config.py" and p.relative_to(SRC).parts[0] != "bench"
             for i, line in enumerate(p.read_text().splitlines(), 1) if readers.search(line)]
    assert not found, "read GIOD_* variables through giod.config: " + ", ".join(found)
