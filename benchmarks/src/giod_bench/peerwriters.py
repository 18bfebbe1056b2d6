"""The peers' writers: the same events as plain pyarrow Parquet, uproot TTree and RNTuple, and ``dd``.

Every file is fsync'ed before the writer returns, as giod's are. The DAQ
benchmark (:mod:`giod_bench.daq`) times them beside giod's writers, and
the read benchmark (:mod:`giod_bench.read`) writes its peer files with them.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import awkward as ak
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from giod.errors import StorageError
from giod.schema import Schema
from giod.storage.container import WriteOptions
from giod.storage.site import fsync_path
from giod.write.writeoptions import DEFAULT_CLUSTER_BYTES

ZSTD_LEVEL = 1


def peer_chunk(n_events: int, payload: int) -> int:
    """Events per peer row group / basket / cluster: about giod's cluster size."""
    per_event = max(payload / max(n_events, 1), 1.0)
    return max(1, min(n_events, int(DEFAULT_CLUSTER_BYTES / per_event)))


def write_parquet(path: Path, events: ak.Array, chunk: int) -> None:
    """``events`` as one Parquet file by plain pyarrow: giod's settings, a row group per chunk."""
    writer = None
    try:
        for start in range(0, len(events), chunk):
            table = ak.to_arrow_table(events[start : start + chunk], extensionarray=False)
            if writer is None:
                kwargs = WriteOptions().parquet_kwargs(table.schema)
                writer = pq.ParquetWriter(path, table.schema, **kwargs)
            writer.write_table(table, row_group_size=table.num_rows)
    except (pa.ArrowException, OSError) as exc:
        raise StorageError(f"cannot write the Parquet peer file {path.name}: {exc}") from exc
    finally:
        if writer is not None:
            writer.close()
    fsync_path(path)


def ttree_arrays(events: ak.Array, schema: Schema) -> dict[str, ak.Array]:
    """``events`` as uproot can write them to a TTree: NanoAOD-style flat collections.

    A fixed-size field ``f[3]`` becomes ``f_0..f_2`` (uproot cannot read jagged
    fixed-size branches back); a one-to-many relation ``r`` of ``X`` becomes a
    count ``r_n`` per object and a collection ``X_r`` of indices per event.
    """
    out: dict[str, ak.Array] = {}
    for coll in schema.collections:
        tdef = schema.collection_type(coll)
        objects = events[coll]
        counts = ak.num(objects, axis=1)
        fields: dict[str, ak.Array] = {}
        for name, fdef in tdef.fields.items():
            if not fdef.shape:
                fields[name] = objects[name]
                continue
            size = int(np.prod(fdef.shape))
            flat = ak.to_numpy(ak.flatten(objects[name], axis=1)).reshape(-1, size)
            for i in range(size):
                fields[f"{name}_{i}"] = ak.unflatten(flat[:, i], counts)
        for name, rdef in tdef.relations.items():
            if rdef.many:
                fields[f"{name}_n"] = ak.values_astype(ak.num(objects[name], axis=2), np.int32)
                out[f"{coll}_{name}"] = ak.zip({"idx": ak.flatten(objects[name], axis=2)})
            else:
                fields[name] = objects[name]
        out[coll] = ak.zip(fields)
    for tag in schema.tags:
        out[tag] = events[tag]
    return out


def _slice(arrays: dict[str, ak.Array], start: int, stop: int) -> dict[str, ak.Array]:
    return {k: v[start:stop] for k, v in arrays.items()}


def write_ttree(path: Path, arrays: dict[str, ak.Array], chunk: int) -> None:
    """Flat arrays (:func:`ttree_arrays`) as TTree ``t`` by uproot: zstd 1, a basket per chunk."""
    import uproot

    n = len(next(iter(arrays.values())))
    try:
        with uproot.recreate(path, compression=uproot.ZSTD(ZSTD_LEVEL)) as f:
            # counters "n_<name>": the default "n<name>" would clash with tag ntracks
            tree = f.mktree("t", _slice(arrays, 0, chunk), counter_name=lambda c: f"n_{c}")
            for start in range(chunk, n, chunk):
                tree.extend(_slice(arrays, start, start + chunk))
    except (OSError, ValueError, TypeError) as exc:
        raise StorageError(f"cannot write the TTree peer file {path.name}: {exc}") from exc
    fsync_path(path)


def write_rntuple(path: Path, events: ak.Array, chunk: int) -> None:
    """``events`` as an RNTuple ``n`` with uproot, zstd level 1, one cluster per chunk."""
    import uproot

    try:
        with uproot.recreate(path, compression=uproot.ZSTD(ZSTD_LEVEL)) as f:
            ntuple = f.mkrntuple("n", events[:chunk])
            for start in range(chunk, len(events), chunk):
                ntuple.extend(events[start : start + chunk])
    except (OSError, ValueError, TypeError, NotImplementedError) as exc:
        raise StorageError(f"cannot write the RNTuple peer file {path.name}: {exc}") from exc
    fsync_path(path)


def rntuple_supported() -> bool:
    import uproot

    return hasattr(uproot.WritableDirectory, "mkrntuple")


def raw_disk_seconds(path: Path, megabytes: int) -> float | None:
    """Seconds for ``dd`` to write ``megabytes`` MiB of zeros to ``path`` and fdatasync.

    None when there is no ``dd``.
    """
    dd = shutil.which("dd")
    if dd is None:
        return None
    cmd = [dd, "if=/dev/zero", f"of={path}", "bs=1M", f"count={megabytes}", "conv=fdatasync"]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    path.unlink(missing_ok=True)
    if done.returncode != 0:
        raise StorageError(f"dd failed: {done.stderr.strip().splitlines()[-1] if done.stderr else done.returncode}")
    return seconds
