"""Synthetic events: fast, seeded, with every kind of column giod stores.

Used by tests, benchmarks and the demo when the physics chain is not wanted.
Payload sizes are chosen so that ``n`` events carry about ``n * 2.3 KB`` of
float32 data, the mix the benchmarks in the federation issue describe.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

import awkward as ak
import numpy as np

from giod.schema import Schema


@cache
def schema() -> Schema:
    """The synthetic data model (hits, cells, tracks → hits, jets → tracks, tags)."""
    text = resources.files("giod.testing").joinpath("synthetic.yaml").read_text()
    return Schema.from_yaml(text)


def _lists(counts: np.ndarray, content: ak.contents.Content) -> ak.contents.ListOffsetArray:
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return ak.contents.ListOffsetArray(ak.index.Index64(offsets), content)


def _record(columns: dict[str, np.ndarray]) -> ak.contents.RecordArray:
    n = len(next(iter(columns.values())))
    return ak.contents.RecordArray(
        [ak.contents.NumpyArray(v) if v.ndim == 1 else
         ak.contents.RegularArray(ak.contents.NumpyArray(v.reshape(-1)), v.shape[1], zeros_length=n)
         for v in columns.values()], list(columns), length=n)


def events(n: int, *, seed: int = 0, first_event: int = 0, hits: float = 60, cells: float = 100,
           tracks: float = 12, jets: float = 4) -> ak.Array:
    """``n`` synthetic events; the keyword arguments are mean multiplicities."""
    rng = np.random.default_rng(seed)
    f32 = np.float32
    nh = rng.poisson(hits, n)
    nc = rng.poisson(cells, n)
    nt = rng.poisson(tracks, n)
    nj = rng.poisson(jets, n)
    H, C, T, J = int(nh.sum()), int(nc.sum()), int(nt.sum()), int(nj.sum())

    hit = _record({"x": rng.normal(0, 30, H).astype(f32), "y": rng.normal(0, 30, H).astype(f32),
                   "z": rng.normal(0, 50, H).astype(f32), "e": rng.exponential(0.1, H).astype(f32),
                   "layer": rng.integers(0, 14, H).astype(np.uint8)})
    cell = _record({"eta": rng.uniform(-3, 3, C).astype(f32), "phi": rng.uniform(-np.pi, np.pi, C).astype(f32),
                    "e": rng.exponential(1.0, C).astype(f32), "t": rng.normal(0, 1, C).astype(f32)})

    # tracks → hits: each track takes a random subset of its event's hits
    ev_t = np.repeat(np.arange(n), nt)
    hits_in_ev = nh[ev_t]
    nth = np.minimum(rng.integers(3, 12, T), hits_in_ev)
    ev_th = np.repeat(ev_t, nth)
    th_local = (rng.random(len(ev_th)) * nh[ev_th]).astype(np.int32)
    track = _record({"pt": (rng.pareto(3.0, T) + 1).astype(f32), "eta": rng.uniform(-2.5, 2.5, T).astype(f32),
                     "phi": rng.uniform(-np.pi, np.pi, T).astype(f32),
                     "charge": rng.choice(np.array([-1, 1], dtype=np.int8), T),
                     "cov": rng.normal(0, 1e-3, (T, 3)).astype(f32)})
    track_hits = _lists(nth, ak.contents.NumpyArray(th_local))
    track = ak.contents.RecordArray([*track.contents, track_hits], [*track.fields, "hits"], length=T)

    ev_j = np.repeat(np.arange(n), nj)
    njt = np.minimum(rng.integers(1, 6, J), nt[ev_j])
    ev_jt = np.repeat(ev_j, njt)
    jt_local = (rng.random(len(ev_jt)) * nt[ev_jt]).astype(np.int32)
    leading = np.where(nt[ev_j] > 0, (rng.random(J) * nt[ev_j]).astype(np.int32), -1).astype(np.int32)
    jet_pt = (30 * (rng.pareto(4.0, J) + 1)).astype(f32)
    jet = _record({"pt": jet_pt, "eta": rng.uniform(-2.5, 2.5, J).astype(f32),
                   "phi": rng.uniform(-np.pi, np.pi, J).astype(f32),
                   "mass": rng.exponential(8, J).astype(f32)})
    jet = ak.contents.RecordArray([*jet.contents, _lists(njt, ak.contents.NumpyArray(jt_local)),
                                   ak.contents.NumpyArray(leading)],
                                  [*jet.fields, "tracks", "leading"], length=J)

    jets_per_event = ak.Array(_lists(nj, ak.contents.NumpyArray(jet_pt)))
    ht = ak.to_numpy(ak.sum(jets_per_event, axis=1)).astype(f32)
    lead = ak.to_numpy(ak.fill_none(ak.max(jets_per_event, axis=1), 0)).astype(f32)
    layout = ak.contents.RecordArray(
        [_lists(nh, hit), _lists(nc, cell), _lists(nt, track), _lists(nj, jet),
         ak.contents.NumpyArray(np.full(n, 1, dtype=np.uint32)),
         ak.contents.NumpyArray(np.arange(first_event, first_event + n, dtype=np.uint64)),
         ak.contents.NumpyArray(nj.astype(np.int32)), ak.contents.NumpyArray(nt.astype(np.int32)),
         ak.contents.NumpyArray(ht), ak.contents.NumpyArray(lead)],
        ["hits", "cells", "tracks", "jets", "run", "event", "njets", "ntracks", "ht", "lead_pt"],
        length=n)
    return ak.Array(layout)
