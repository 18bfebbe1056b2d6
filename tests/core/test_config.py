"""Settings: file < environment < arguments, with clear errors."""

from __future__ import annotations

import pytest

import giod
from giod import config
from giod.testing import synthetic


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
    fed = giod.open(tmp_path / "fed", create=True)
    (tmp_path / "fed" / "giod.toml").write_text("[giod]\ndatabase_events = 40\n")
    ds = fed.create_dataset("s", synthetic.schema())
    with ds.writer() as w:
        w.append(synthetic.events(100, seed=1))
    assert [d.n_events for d in ds.databases()] == [40, 40, 20]


def _codec(ds):
    import pyarrow.parquet as pq

    c = ds.databases()[-1].container("raw.tracker")
    return pq.ParquetFile(ds.federation.site().local_path(c.path)).metadata.row_group(0).column(0).compression


@pytest.mark.parametrize("codec,stored", [("lz4", "LZ4"), ("snappy", "SNAPPY"), ("none", "UNCOMPRESSED")])
def test_writer_takes_every_documented_setting_as_a_keyword(tmp_path, codec, stored):
    fed = giod.open(tmp_path / "fed", create=True)
    ds = fed.create_dataset("s", synthetic.schema())
    with ds.writer(container_format="parquet", compression=codec, compression_level=3, byte_stream_split=False,
                   page_checksums=False, database_events=30, cluster_bytes=1 << 20) as w:
        w.append(synthetic.events(50, seed=2))
    assert [d.n_events for d in ds.databases()] == [30, 20]
    assert _codec(ds) == stored
    assert len(ds.read(["hits"])) == 50


@pytest.mark.parametrize("kwargs,words", [
    ({"compresion": "lz4"}, ["compresion", "compression_level", "did you mean 'compression'"]),
    ({"compression": "nosuch"}, ["nosuch", "zstd"]),
    ({"compression": "lz4", "options": "x"}, ["compression", "not both"]),
])
def test_writer_refuses_unknown_settings_by_name(tmp_path, kwargs, words):
    fed = giod.open(tmp_path / "fed", create=True)
    ds = fed.create_dataset("s", synthetic.schema())
    with pytest.raises(giod.ConfigError) as info:
        ds.writer(**kwargs)
    assert all(w in str(info.value) for w in words)
    with pytest.raises(giod.ConfigError, match="nosuch"):
        ds.add_containers(nosuch=1)
