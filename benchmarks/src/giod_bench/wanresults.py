"""The WAN benchmark's outcome: the tables of rates, limits, the crowd and the targets, and the plot."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from giod_bench.report import MB, Column, Outcome, Table, figure, ratio, save
from giod_bench.wancrowd import PIECE
from giod_bench.wanpeers import (
    AMS,
    AMS_PAGES,
    CLIENT_ORDER,
    COLLECTION,
    DIRECT_GIOD,
    FSSPEC,
    GIOD,
    LOCAL_GIOD,
    PAGE,
    QUERY,
    XROOTD,
    _Data,
    _Read,
)
from giod_bench.wanwire import LOOPBACK, LOOPBACK_CHECKED
from giod_bench.wanxrootd import GIOD_XROOTD, GIOD_XROOTD_DIRECT


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _outcome(
    data: _Data,
    events: int,
    rtts_ms: Sequence[float],
    bandwidth: float | None,
    repeat: int,
    budget: float,
    samples: dict[tuple[str, float], list[_Read]],
    failures: dict[tuple[str, float], str],
    local: dict[str, list[float]],
    direct: list[_Read],
    direct_fsspec: list[_Read],
    crowd: list[dict[str, Any]],
    have_xrootd: bool,
    notes: list[str],
    direct_xrootd: Sequence[_Read] = (),
    wire: dict[int, list[float]] | None = None,
    checked: dict[int, list[float]] | None = None,
) -> Outcome:
    size = data.nbytes
    cap = None if bandwidth is None else bandwidth / MB
    rows: list[dict[str, Any]] = []
    for rtt in rtts_ms:
        for label in CLIENT_ORDER:
            key = (label, rtt)
            reads = samples.get(key)
            if not reads or key in failures:
                why = failures.get(key) or ("no XRootD server (see the notes)" if label == XROOTD else "not measured")
                rows.append({"client": label, "rtt_ms": rtt, "mb_per_s": None, "absent": why})
                continue
            seconds = [r.seconds for r in reads]
            med = statistics.median(seconds)
            rows.append({
                "client": label, "rtt_ms": rtt, "median_s": med, "best_s": min(seconds), "seconds": seconds,
                "mb_per_s": size / MB / med, "open_s": _median([r.open_s for r in reads]),
                "after_open_mb_per_s": None if reads[0].open_s is None
                else size / MB / statistics.median([r.seconds - (r.open_s or 0.0) for r in reads]),
                "wire_mb": None if reads[0].wire is None or label == AMS
                else (_median([r.wire for r in reads]) or 0) / MB,
                "detail": min(reads, key=lambda r: abs(r.seconds - med)).detail,  # of the most typical round
            })  # fmt: skip
    by = {(r["client"], r["rtt_ms"]): r for r in rows}
    for r in rows:
        ams = by[(AMS, r["rtt_ms"])].get("mb_per_s")
        xrd = by[(XROOTD, r["rtt_ms"])].get("mb_per_s")
        r["vs_cap"] = ratio(r["mb_per_s"], cap)
        r["vs_ams"] = ratio(r["mb_per_s"], ams)
        r["vs_xrootd"] = ratio(r["mb_per_s"], xrd)
    direct_s = statistics.median(r.seconds for r in direct)
    limits: list[dict[str, Any]] = [
        {"what": "link cap", "mb_per_s": cap, "seconds": None if cap is None else size / bandwidth},  # type: ignore[operator]
        *({"what": label, "mb_per_s": size / MB / statistics.median(t), "seconds": statistics.median(t)}
          for label, t in local.items()),
        {"what": DIRECT_GIOD, "mb_per_s": size / MB / direct_s,
         "seconds": direct_s, "open_s": _median([r.open_s for r in direct])},
        {"what": "pyarrow + fsspec HTTP, straight at the server",
         "mb_per_s": size / MB / statistics.median(r.seconds for r in direct_fsspec),
         "seconds": statistics.median(r.seconds for r in direct_fsspec)},
    ]  # fmt: skip
    if direct_xrootd:
        limits.append({"what": GIOD_XROOTD_DIRECT, "mb_per_s": size / MB / statistics.median(
            r.seconds for r in direct_xrootd), "seconds": statistics.median(r.seconds for r in direct_xrootd),
            "open_s": _median([r.open_s for r in direct_xrootd])})
    for what, moved_s in ((LOOPBACK, wire), (LOOPBACK_CHECKED, checked)):
        if moved_s and all(moved_s.values()):
            # the best of 1, 2 and 4 connections: the most this machine moves from one process to another
            n, best = min(((n, statistics.median(t)) for n, t in moved_s.items()), key=lambda x: x[1])
            limits.append({"what": what, "mb_per_s": size / MB / best, "seconds": best, "connections": n,
                           **{f"seconds_{k}_connections": statistics.median(t) for k, t in moved_s.items()}})
    here = next(lim["mb_per_s"] for lim in limits if lim["what"] == LOCAL_GIOD)
    moved = next((lim["mb_per_s"] for lim in limits if lim["what"] == LOOPBACK), None)
    for lim in limits:
        lim["vs_local"] = ratio(lim["mb_per_s"], here)
        lim["vs_loopback"] = ratio(lim["mb_per_s"], moved)
    targets = _targets(rows, rtts_ms, limits, crowd, have_xrootd, size, cap)
    cap_text = "no cap" if cap is None else f"{bandwidth * 8 / 1e6:g} Mbit/s cap"  # type: ignore[operator]
    notes[:0] = [
        f"the read collection ({COLLECTION}): {data.n_events:,} events in {len(data.files)} container files, "
        f"{size / MB:.1f} MB; MB/s = those bytes / seconds for every client (the same data delivered); "
        f"'wire MB' = bytes that crossed the link where known (the query sends uncompressed Arrow IPC)",
        f"{AMS}: one synchronous range request at a time on one kept-alive connection, stopped after "
        f"{budget:g} s or {AMS_PAGES:,} pages; its rate is extrapolated to the whole collection",
        f"{GIOD}: fresh client each time (new connections), seconds from giod.open to the last byte; "
        f"'open s' is giod.open + dataset + database list alone, 'MB/s after open' the rate without it",
        f"{FSSPEC}: pq.read_table of the same container files (column {COLLECTION}) through fsspec's "
        f"HTTPFileSystem; {XROOTD}: the collection exported to one ROOT file (uproot, zlib), read with "
        f"uproot over root:// through fsspec-xrootd, a latency proxy in front of the XRootD server too",
        f"{GIOD_XROOTD}: the giod client (a fresh one each time) reading the same container files from an "
        f"xrootd exporting the site's directory (a root:// site, vectored reads), no giod server involved",
        f"{QUERY}: Dataset.query with columns {COLLECTION!r}, answered by the server as Arrow IPC; a different "
        f"limit past the end each round keeps the shared cache from answering",
        f"{LOOPBACK}: a plain server process sends the same container files with sendfile, this process "
        f"takes each into a new buffer with recv_into (1, 2 or 4 connections, the best median): what the "
        f"machine moves from one process to another at all; {LOOPBACK_CHECKED}: the same, each file's "
        f"CRC-32C taken as its bytes land (giod's checksum function, stretches of 256 KiB): the least a "
        f"reader that checks what it received does",
        f"each RTT: latency proxies (child processes, {cap_text}) in front of giod serve (its own process) "
        f"and XRootD; clients in turn, median of {repeat} rounds",
    ]
    parameters = {
        "events": events, "rtts_ms": list(rtts_ms), "bandwidth_mbit": None if cap is None else cap * 8,
        "repeat": repeat, "collection": COLLECTION, "collection_mb": size / MB, "files": len(data.files),
        "page_bytes": PAGE, "aggregate_request_bytes": PIECE, "ams_budget_s": budget,
    }  # fmt: skip
    title_cap = "no cap" if cap is None else f"{cap * 8:g} Mbit/s"
    return Outcome(
        name="wan",
        parameters=parameters,
        tables=[
            Table(
                "results", f"reading {size / MB:.0f} MB of {COLLECTION} through the server ({title_cap})", COLUMNS, rows
            ),
            Table("limits", "physical limits and the direct path (0 ms, no proxy)", LIMIT_COLUMNS, limits),
            Table("aggregate", "concurrent clients straight at the server (0 ms, no proxy)", AGGREGATE_COLUMNS, crowd),
            Table("targets", "targets of the issue", TARGET_COLUMNS, targets),
        ],
        notes=notes,
    )


def _targets(
    rows: list[dict[str, Any]],
    rtts_ms: Sequence[float],
    limits: list[dict[str, Any]],
    crowd: list[dict[str, Any]],
    have_xrootd: bool,
    size: int | None = None,
    cap: float | None = None,
) -> list[dict[str, Any]]:
    """The wire-speed goals: the link's use at the farthest RTT, bytes on the wire, the direct path, a crowd."""
    def verdict(ok: bool | None) -> str:
        return "–" if ok is None else ("met" if ok else "missed")

    far = max(rtts_ms)
    giod_far = next(r for r in rows if r["client"] == GIOD and r["rtt_ms"] == far)
    after = giod_far.get("after_open_mb_per_s")
    after_cap = ratio(after, cap)
    out = [
        {"target": f"giod at {far:g} ms ≥ 80 % of the cap while reading (after the open)",
         "measured": _pct(after_cap), "verdict": verdict(None if after_cap is None else after_cap >= 0.8)},
    ]  # fmt: skip
    if cap and size and giod_far.get("median_s"):
        # a perfect link: connect, the open's one request and the first data request each cost a round
        # trip, then every byte at the cap; counting the open, no client can do better than this
        ideal = 3 * far / 1e3 + size / MB / cap
        out.append({"target": f"giod at {far:g} ms, the open counted, beside a perfect link (3 RTT + bytes at the cap)",
                    "measured": f"{_pct(giod_far['vs_cap'])} of the cap; {ideal / giod_far['median_s']:.0%} "
                                f"of the perfect link's {size / MB / ideal / cap:.0%}",
                    "verdict": "–"})
    wire = giod_far.get("wire_mb")
    wire_ratio = None if wire is None or not size else wire / (size / MB)
    out.append({"target": "bytes on the wire ≤ 1.1× the columns read", "measured": _times2(wire_ratio),
                "verdict": verdict(None if wire_ratio is None else wire_ratio <= 1.1)})
    near = min(rtts_ms)
    giod_near = next(r for r in rows if r["client"] == GIOD and r["rtt_ms"] == near)
    fs_near = next((r for r in rows if r["client"] == FSSPEC and r["rtt_ms"] == near), {})
    vs_fs = ratio(giod_near.get("mb_per_s"), fs_near.get("mb_per_s"))
    out.append({"target": f"giod at {near:g} ms through the proxy ≥ pyarrow + fsspec", "measured": _times2(vs_fs),
                "verdict": verdict(None if vs_fs is None else vs_fs >= 1.0)})
    direct = next(lim for lim in limits if lim["what"] == DIRECT_GIOD)
    direct_fs = next((lim for lim in limits if lim["what"].startswith(FSSPEC)), {})
    vs_direct_fs = ratio(direct["mb_per_s"], direct_fs.get("mb_per_s"))
    out.append({"target": "straight at the server ≥ 1 GB/s and ≥ 3× pyarrow + fsspec",
                "measured": f"{direct['mb_per_s']:,.0f} MB/s, {_times2(vs_direct_fs)}",
                "verdict": verdict(direct["mb_per_s"] >= 1000 and vs_direct_fs is not None and vs_direct_fs >= 3)})
    for what, beside in ((LOOPBACK, "no HTTP, no checks"), (LOOPBACK_CHECKED, "no HTTP, every byte's CRC-32C")):
        wire = next((lim for lim in limits if lim["what"] == what), None)
        if wire is not None and direct_fs.get("mb_per_s"):
            # how much of what the machine can move at all each figure is: 3× the peer may lie past it
            out.append({"target": f"… beside the loopback itself ({beside})",
                        "measured": f"giod {_pct(ratio(direct['mb_per_s'], wire['mb_per_s']))} of its "
                                    f"{wire['mb_per_s']:,.0f} MB/s; 3× pyarrow + fsspec would be "
                                    f"{_pct(ratio(3 * direct_fs['mb_per_s'], wire['mb_per_s']))}",
                        "verdict": "–"})
    vs = [r["vs_xrootd"] for r in rows if r["client"] == GIOD]
    known = [v for v in vs if v is not None]
    out.append(
        {
            "target": "giod ≥ uproot + XRootD at every RTT",
            "measured": "no XRootD" if not have_xrootd or not known else f"worst {min(known):.2f}×",
            "verdict": verdict(None if not have_xrootd or not known else min(known) >= 1.0 and len(known) == len(vs)),
        }
    )
    if crowd:
        big = crowd[-1]
        out.append(
            {
                "target": f"{big['clients']} clients: ≥ 1 GB/s together, no errors, p99 reported",
                "measured": f"{big['mb_per_s']:,.0f} MB/s, {big['errors']} errors"
                + (f", p99 {big['p99_ms']:.0f} ms" if big["p99_ms"] is not None else ""),
                "verdict": verdict(big["errors"] == 0 and big["mb_per_s"] >= 1000),
            }
        )
    return out


def _times2(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}×"


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v:.0%}"


def _times(v: float | None) -> str:
    return "–" if v is None else f"{v:,.0f}×"


COLUMNS = [
    Column("client", "client"), Column("rtt_ms", "RTT ms", "{:g}"), Column("median_s", "median s", "{:.2f}"),
    Column("open_s", "open s", "{:.3f}"), Column("mb_per_s", "MB/s", "{:,.1f}"),
    Column("after_open_mb_per_s", "MB/s after open", "{:,.1f}"), Column("wire_mb", "wire MB", "{:,.0f}"),
    Column("vs_cap", "× cap", "{:.2f}"), Column("vs_ams", "× AMS", "{:,.0f}"),
    Column("vs_xrootd", "× XRootD", "{:.2f}"), Column("absent", "absent"),
]  # fmt: skip

LIMIT_COLUMNS = [
    Column("what", "limit / path"), Column("seconds", "s", "{:.2f}"), Column("open_s", "open s", "{:.3f}"),
    Column("mb_per_s", "MB/s", "{:,.0f}"), Column("vs_local", "× local", "{:.2f}"),
    Column("vs_loopback", "× loopback", "{:.2f}"),
]  # fmt: skip

AGGREGATE_COLUMNS = [
    Column("clients", "clients", "{:d}"), Column("layout", "processes×threads"),
    Column("mb_each", "MB each", "{:,.0f}"), Column("total_mb", "MB", "{:,.0f}"), Column("seconds", "s", "{:.2f}"),
    Column("mb_per_s", "MB/s", "{:,.0f}"), Column("requests", "requests", "{:,d}"), Column("errors", "errors", "{:d}"),
    Column("p50_ms", "p50 ms", "{:.1f}"), Column("p99_ms", "p99 ms", "{:.1f}"),
]  # fmt: skip

TARGET_COLUMNS = [Column("target", "target"), Column("measured", "measured"), Column("verdict", "verdict")]


def plot(outcome: Outcome, path: Path) -> None:
    """Throughput against RTT (log y) with the limits; aggregate rate and p99 latency of concurrent clients."""
    import numpy as np

    rows = outcome.table("results").rows
    limits = {r["what"]: r["mb_per_s"] for r in outcome.table("limits").rows}
    fig, (ax, ax2) = figure("giod bench wan: one collection through the server as the RTT grows", ncols=2)
    for label in CLIENT_ORDER:
        pts = [(r["rtt_ms"], r["mb_per_s"]) for r in rows if r["client"] == label and r["mb_per_s"]]
        if pts:
            x, y = zip(*pts, strict=True)
            ax.plot(x, y, marker="o", label=label)
    styles = {"link cap": ":", LOCAL_GIOD: "--"}
    for what, style in styles.items():
        if limits.get(what):
            ax.axhline(limits[what], linestyle=style, color="grey", label=what)
    ax.set_yscale("log")
    ax.set_xlabel("round-trip time (ms)")
    ax.set_ylabel("collection MB/s (median)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize="small")
    crowd = outcome.table("aggregate").rows
    if crowd:
        slots = np.arange(len(crowd))
        ax2.bar(slots, [c["mb_per_s"] for c in crowd], color="tab:orange", label="aggregate MB/s")
        ax2.set_xticks(slots, [str(c["clients"]) for c in crowd])
        ax2.set_xlabel("concurrent clients (0 ms, no proxy)")
        ax2.set_ylabel("aggregate MB/s")
        twin = ax2.twinx()
        twin.plot(slots, [c["p99_ms"] for c in crowd], marker="s", color="tab:red", label="p99 request ms")
        twin.plot(slots, [c["p50_ms"] for c in crowd], marker="o", color="tab:purple", label="p50 request ms")
        twin.set_ylabel(f"request latency ms ({PIECE >> 20} MB ranges)")
        twin.legend(fontsize="small", loc="upper left")
        ax2.grid(axis="y", alpha=0.3)
    save(fig, path)
