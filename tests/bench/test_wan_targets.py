"""The WAN benchmark's targets from its measured rows: the verdicts follow the numbers."""

from __future__ import annotations

from giod_bench import wan
from giod_bench.wanresults import _targets

MB = 1e6
SIZE = int(400 * MB)
CAP = 125.0  # MB/s: 1 Gbit/s


def _rows(after_open: float, median_s: float, wire_mb: float, near: float, fsspec_near: float) -> list[dict]:
    return [
        {"client": wan.GIOD, "rtt_ms": 250.0, "median_s": median_s, "mb_per_s": SIZE / MB / median_s,
         "after_open_mb_per_s": after_open, "wire_mb": wire_mb, "vs_cap": SIZE / MB / median_s / CAP,
         "vs_xrootd": 3.0},
        {"client": wan.GIOD, "rtt_ms": 0.0, "median_s": 4.0, "mb_per_s": near, "after_open_mb_per_s": near,
         "wire_mb": wire_mb, "vs_cap": near / CAP, "vs_xrootd": 2.0},
        {"client": wan.FSSPEC, "rtt_ms": 0.0, "mb_per_s": fsspec_near},
    ]


def _limits(direct: float, direct_fsspec: float) -> list[dict]:
    return [{"what": wan.DIRECT_GIOD, "mb_per_s": direct},
            {"what": "pyarrow + fsspec HTTP, straight at the server", "mb_per_s": direct_fsspec}]


def _verdicts(targets: list[dict]) -> dict[str, str]:
    return {t["target"]: t["verdict"] for t in targets}


def test_every_goal_met():
    crowd = [{"clients": 64, "mb_per_s": 1100.0, "errors": 0, "p99_ms": 700.0}]
    got = _verdicts(_targets(_rows(106.0, 4.4, 410.0, 110.0, 90.0), [0.0, 250.0], _limits(1200.0, 350.0),
                             crowd, True, SIZE, CAP))
    assert set(got.values()) == {"met", "–"}, got


def test_every_goal_missed():
    crowd = [{"clients": 64, "mb_per_s": 600.0, "errors": 2, "p99_ms": 900.0}]
    targets = _targets(_rows(90.0, 6.0, 480.0, 80.0, 90.0), [0.0, 250.0], _limits(500.0, 400.0), crowd, True,
                       SIZE, CAP)
    got = _verdicts(targets)
    assert list(got.values()).count("missed") == 5, got  # all but the perfect-link line and XRootD
    perfect = next(t for t in targets if "perfect link" in t["target"])
    # 3 × 0.25 s + 400 MB at 125 MB/s = 3.95 s; measured 6.0 s: 66 % of it, and the perfect link itself 81 %
    assert "66%" in perfect["measured"] and "81%" in perfect["measured"], perfect
