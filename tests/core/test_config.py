"""Settings: file < environment < arguments, with clear errors."""

from __future__ import annotations

import pytest

import giod
from giod import config
from giod.bench import synthetic


def test_order_file_env_args(tmp_path):
    (tmp_path / "giod.toml").write_text("[giod]\ndatabase_events = 50\ncompression_level = 3\n")
    assert config.load(tmp_path, environ={})["database_events"] == 50
    env = {"GIOD_DATABASE_EVENTS": "70", "GIOD_BYTE_STREAM_SPLIT": "yes"}
    cfg = config.load(tmp_path, environ=env)
    assert cfg["database_events"] == 70 and cfg["byte_stream_split"] is True and cfg["compression_level"] == 3
    assert config.load(tmp_path, environ=env, database_events=90)["database_events"] == 90


@pytest.mark.parametrize("text", ["[giod]\nnosuch = 1\n", "[giod]\ndatabase_events = 'many'\n", "[giod\n"])
def test_bad_settings(tmp_path, text):
    (tmp_path / "giod.toml").write_text(text)
    with pytest.raises(giod.ConfigError):
        config.load(tmp_path, environ={})


def test_writer_uses_the_federation_file(tmp_path):
    fed = giod.open(tmp_path / "fed")
    (tmp_path / "fed" / "giod.toml").write_text("[giod]\ndatabase_events = 40\n")
    ds = fed.create_dataset("s", synthetic.schema())
    with ds.writer() as w:
        w.append(synthetic.events(100, seed=1))
    assert [d.n_events for d in ds.databases()] == [40, 40, 20]
