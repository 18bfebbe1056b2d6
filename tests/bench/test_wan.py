"""``giod bench wan --quick`` end to end: a real server, real latency proxies, real peers.

Checks the run completes and writes sane JSON and a PNG; the one comparison
asserted is the one no machine can miss: at 50 ms the giod client, which
keeps many requests in flight, beats one synchronous page per round trip.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import google_crc32c
import pytest
from click.testing import CliRunner

from giod.cli import main
from giod.errors import GiodError
from giod_bench import wan, xrootd
from giod_bench.wanwire import LOOPBACK_CHECKED, loopback_server, read_loopback

pytestmark = pytest.mark.slow  # a minute of WAN emulation on two cores

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, Path]:
    out = tmp_path_factory.mktemp("wan")
    # no --workdir: the system's temporary directory lets the XRootD server's user read the export
    run = CliRunner().invoke(
        main, ["bench", "wan", "--quick", "--rtts", "0,50", "--output", str(out)], catch_exceptions=False
    )
    assert run.exit_code == 0, run.output
    return json.loads((out / "bench-wan.json").read_text()), run.output, out


def test_every_client_at_every_rtt(result):
    data, output, out = result
    assert data["benchmark"] == "wan"
    assert data["parameters"]["rtts_ms"] == [0.0, 50.0]
    assert data["parameters"]["bandwidth_mbit"] == pytest.approx(1000)
    rows = {(r["client"], r["rtt_ms"]): r for r in data["results"]}
    peers = [wan.AMS, wan.GIOD, wan.FSSPEC, wan.QUERY]
    xrootd_here = xrootd.missing() is None
    if xrootd_here or os.environ.get("CI") == "true":
        peers += [wan.XROOTD, wan.GIOD_XROOTD]
    else:
        assert all(rows[(wan.XROOTD, rtt)]["absent"] for rtt in (0.0, 50.0))
        assert any("XRootD left out" in n for n in data["notes"])
    for rtt in (0.0, 50.0):
        for client in peers:
            r = rows[(client, rtt)]
            assert _positive(r["mb_per_s"]) and _positive(r["median_s"]), r
            assert _positive(r["vs_cap"]) and _positive(r["vs_ams"]), r
        giod = rows[(wan.GIOD, rtt)]
        assert 0 < giod["open_s"] < giod["median_s"]
        assert giod["wire_mb"] >= data["parameters"]["collection_mb"] * 0.99  # it read every byte
        assert giod["detail"]["requests"] > 0
        if wan.GIOD_XROOTD in peers:  # the same files over root://: every byte, in vectored reads
            over = rows[(wan.GIOD_XROOTD, rtt)]
            assert over["wire_mb"] >= data["parameters"]["collection_mb"] * 0.99
            assert over["detail"]["readv_requests"] > 0
    assert rows[(wan.AMS, 0.0)]["vs_ams"] == pytest.approx(1.0)
    # far away, many requests in flight beat one page per round trip
    assert rows[(wan.GIOD, 50.0)]["mb_per_s"] > rows[(wan.AMS, 50.0)]["mb_per_s"]
    assert rows[(wan.AMS, 50.0)]["detail"]["ms_per_page"] >= 50  # the proxy really added the round trip
    assert "reading" in output and "targets of the issue" in output


def test_limits_aggregate_targets_and_plot(result):
    data, _, out = result
    limits = {r["what"]: r for r in data["limits"]}
    assert limits["link cap"]["mb_per_s"] == pytest.approx(125.0)
    for r in data["limits"]:
        assert _positive(r["mb_per_s"]) and _positive(r["vs_local"]), r
    # the loopback itself moved every file; each path is set beside it
    wire = limits[wan.LOOPBACK]
    assert wire["connections"] in (1, 2, 4) and all(wire[f"seconds_{n}_connections"] > 0 for n in (1, 2, 4))
    assert wire["seconds"] == pytest.approx(min(wire[f"seconds_{n}_connections"] for n in (1, 2, 4)))
    assert wire["vs_loopback"] == pytest.approx(1.0)
    assert limits[wan.DIRECT_GIOD]["vs_loopback"] == pytest.approx(
        limits[wan.DIRECT_GIOD]["mb_per_s"] / wire["mb_per_s"])
    checked = limits[LOOPBACK_CHECKED]  # the same, each byte's CRC-32C taken: the least a checking reader does
    assert checked["connections"] in (1, 2, 4) and all(checked[f"seconds_{n}_connections"] > 0 for n in (1, 2, 4))
    crowd = data["aggregate"]
    assert [c["clients"] for c in crowd] == list(wan.QUICK_CLIENTS)
    for c in crowd:
        assert c["errors"] == 0, c
        assert c["requests"] >= c["clients"]
        assert _positive(c["mb_per_s"]) and 0 < c["p50_ms"] <= c["p99_ms"] <= c["max_ms"], c
        assert c["total_mb"] == pytest.approx(c["clients"] * c["mb_each"], rel=1e-6)
    assert {t["verdict"] for t in data["targets"]} <= {"met", "missed", "–"}
    names = " | ".join(t["target"] for t in data["targets"])
    for goal in ("≥ 80 % of the cap while reading", "perfect link", "bytes on the wire ≤ 1.1×",
                 "through the proxy ≥ pyarrow + fsspec", "≥ 1 GB/s and ≥ 3× pyarrow + fsspec", "uproot + XRootD",
                 "clients: ≥ 1 GB/s together", "beside the loopback itself"):
        assert goal in names, names
    png = (out / "bench-wan.png").read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 10_000


def test_the_loopback_server_moves_whole_files_and_nothing_outside_its_root(tmp_path: Path):
    root = tmp_path / "site"
    root.mkdir()
    (root / "a.arrow").write_bytes(bytes(range(256)) * 1000)
    (root / "b.arrow").write_bytes(b"x" * 3)
    (tmp_path / "secret").write_bytes(b"s" * 10)
    with loopback_server(root) as address:
        for n in (1, 2, 4):
            seconds, got = read_loopback(address, ["a.arrow", "b.arrow"], n)
            assert got == 256_003 and seconds > 0
            sums: dict[str, int] = {}
            seconds, got = read_loopback(address, ["a.arrow", "b.arrow"], n, checked=True, sums=sums)
            assert got == 256_003 and sums == {p: google_crc32c.value((root / p).read_bytes())
                                               for p in ("a.arrow", "b.arrow")}
        with pytest.raises(GiodError, match="loopback"):  # a name leaving the root gets nothing
            read_loopback(address, ["../secret"], 1)


def test_bad_options_are_one_clear_line(tmp_path: Path):
    for args in (["--rtts", "0,-5"], ["--rtts", "fast"], ["--clients", "0"]):
        run = CliRunner().invoke(main, ["bench", "wan", "--quick", *args, "--output", str(tmp_path)])
        assert run.exit_code == 2, run.output
        assert "Traceback" not in run.output and ("--rtts" in run.output or "--clients" in run.output)
