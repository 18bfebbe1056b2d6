"""Container footers carry the writer's key-value entries without changing what the file holds."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from giod.storage.checksum import Checksum
from giod.storage.container import COMMIT_KEY, ContainerReader, ContainerWriter, WriteOptions
from giod.storage.site import LocalSite

SCHEMA = pa.schema([("ht", pa.float32()), ("hits", pa.list_(pa.struct([("e", pa.float32()), ("layer", pa.int16())])))])

texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
records = st.dictionaries(texts, st.one_of(texts, st.integers(), st.none(), st.lists(st.integers(), max_size=3)),
                          max_size=6)


@pytest.mark.parametrize("fmt", ["arrow", "parquet"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(record=records, clusters=st.lists(st.integers(0, 40), min_size=1, max_size=4), seed=st.integers(0, 99))
def test_the_commit_record_reads_back_and_the_data_is_unchanged(tmp_path: Path, fmt, record, clusters, seed):
    site = LocalSite("local", str(tmp_path))
    path = f"ds/{seed}-{len(list(tmp_path.rglob('*')))}/raw.{fmt}"
    tables = []
    for k, n in enumerate(clusters):
        ht = [float((seed + k + i) % 97) for i in range(n)]
        hits = [[{"e": float(i + j), "layer": j % 5} for j in range((seed + i) % 4)] for i in range(n)]
        tables.append(pa.table({"ht": pa.array(ht, pa.float32()), "hits": pa.array(hits, SCHEMA.field("hits").type)}))
    text = json.dumps(record, sort_keys=True)
    w = ContainerWriter(site, path, SCHEMA, WriteOptions(container_format=fmt), {COMMIT_KEY: text})
    for t in tables:
        w.write_cluster(t)
    out = w.close()

    raw = (tmp_path / path).read_bytes()
    summer = Checksum()
    summer.update(raw)
    assert (out.size, out.checksum) == (len(raw), summer.hexdigest())  # the checksum covers the footer too
    if fmt == "arrow":  # Arrow keeps key-value entries with the schema, in the footer
        with pa.memory_map(str(tmp_path / path)) as f:
            reader = pa.ipc.open_file(f)
            meta, back = reader.schema.metadata, reader.read_all()
    else:
        meta = pq.read_metadata(tmp_path / path).metadata
        back = ContainerReader(site, path, expected_size=out.size).read()
    assert json.loads(meta[COMMIT_KEY.encode()]) == record
    assert back.num_rows == sum(clusters)
    assert back.equals(pa.concat_tables(tables).cast(back.schema))
