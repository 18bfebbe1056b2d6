"""How an XRootD site takes its server's answers to a checksum query and a space query.

A real server cannot be made to fail one file's checksum job on demand (the
``xrootd`` of Debian 12 does now and then: "Program failed", then no answer
for that file), so these tests give the site a stand-in for the client
library's file system object and check the site's side: an answer is
validated before it is used, and only "not supported" turns the site's
checksums off.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("XRootD.client")

from giod.errors import NotFound
from giod.storage import xrootd
from giod.storage.xrootd import XRootDSite


@dataclass
class Status:
    ok: bool
    errno: int = 0
    message: str = ""


@dataclass
class Answers:
    """The client's file system: each query gets the next answer, and its timeout is kept."""

    answers: list[tuple[Status, Any]]
    timeouts: list[float] = field(default_factory=list)

    def query(self, code: Any, path: str, timeout: float) -> tuple[Status, Any]:
        self.timeouts.append(timeout)
        return self.answers.pop(0)

    def stat(self, path: str, timeout: float) -> tuple[Status, Any]:
        return Status(True), None


def _site(*answers: tuple[Status, Any]) -> tuple[XRootDSite, Answers]:
    site = XRootDSite("far", "root://127.0.0.1:1//data")
    fs = Answers(list(answers))
    site.fs = fs
    return site, fs


GOOD = (Status(True), b"crc32c 1a2b3c\0")


def test_a_failed_job_costs_that_file_only(caplog: pytest.LogCaptureFixture) -> None:
    site, fs = _site((Status(False, 3012, "[ERROR] Program failed"), None), GOOD)
    assert site.server_checksum("a/b.arrow", 10) is None
    assert "gave no checksum of a/b.arrow: [ERROR] Program failed" in caplog.text
    assert site.server_checksum("a/c.arrow") == "crc32c:001a2b3c"  # the next file is asked again


def test_an_expired_query_costs_that_file_only_and_waits_by_size() -> None:
    site, fs = _site((Status(False, 0, "[ERROR] Operation expired"), None), GOOD)
    assert site.server_checksum("a/b.arrow", 100 * xrootd.CHECKSUM_RATE) is None
    assert site.server_checksum("a/c.arrow", 0) == "crc32c:001a2b3c"
    assert fs.timeouts == [xrootd.CHECKSUM_SECONDS + 100, xrootd.CHECKSUM_SECONDS]


def test_no_checksum_configured_is_asked_once() -> None:
    site, fs = _site((Status(False, 3013, "query chksum is not supported"), None))
    assert site.server_checksum("a/b.arrow") is None
    assert site.server_checksum("a/c.arrow") is None
    assert len(fs.timeouts) == 1


def test_another_algorithm_is_asked_once() -> None:
    site, fs = _site((Status(True), b"adler32 0a0b0c0d\0"))
    assert site.server_checksum("a/b.arrow") is None
    assert site.server_checksum("a/c.arrow") is None
    assert len(fs.timeouts) == 1


def test_a_missing_file_is_not_found() -> None:
    site, _ = _site((Status(False, 3011, "no such file"), None))
    with pytest.raises(NotFound, match="a/b.arrow"):
        site.server_checksum("a/b.arrow")


@settings(max_examples=300, deadline=None)
@given(answer=st.one_of(st.binary(max_size=40), st.none(), st.integers(),
                        st.text(alphabet="crc32C 0123456789abcdefxyz\0-+", max_size=30).map(str.encode)))
def test_any_answer_is_a_checksum_of_eight_hex_digits_or_none(answer: Any) -> None:
    site, _ = _site((Status(True), answer))
    value = site.server_checksum("a/b.arrow")
    assert value is None or (value.startswith("crc32c:") and len(value) == 15 and int(value[7:], 16) >= 0)


def test_the_space_of_a_documented_answer() -> None:
    site, _ = _site((Status(True), b"oss.cgroup=default&oss.space=1000&oss.free=400&oss.maxf=400\0"))
    health = site.health()
    assert health.reachable and (health.free_bytes, health.total_bytes) == (400, 1000)


@settings(max_examples=300, deadline=None)
@given(answer=st.one_of(st.binary(max_size=60), st.none(),
                        st.builds("oss.space={}&oss.free={}".format, st.integers(), st.integers()).map(str.encode),
                        st.text(alphabet="os.freacp=&0123456789-_\xe9 ", max_size=60).map(str.encode)))
def test_any_space_answer_is_reachable_with_a_space_that_makes_sense_or_none(answer: Any) -> None:
    site, _ = _site((Status(True), answer))
    health = site.health()
    assert health.reachable
    assert (health.free_bytes is None) == (health.total_bytes is None)
    assert health.free_bytes is None or 0 <= health.free_bytes <= health.total_bytes


def test_the_client_checks_its_timeouts_every_second() -> None:
    """The client's default is every 15 s: a health check of HEALTH_TIMEOUT (10 s) would take 15."""
    import subprocess
    import sys

    from XRootD import client

    XRootDSite("far", "root://127.0.0.1:1//data")
    assert client.EnvGetInt("TimeoutResolution") == 1
    assert xrootd.HEALTH_TIMEOUT < 15
    # a user's own setting stays (the client keeps what it read from the environment)
    probe = ("from XRootD import client; from giod.storage.xrootd import XRootDSite; "
             "XRootDSite('far', 'root://127.0.0.1:1//data'); print(client.EnvGetInt('TimeoutResolution'))")
    out = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "XRD_TIMEOUTRESOLUTION": "7"},
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["7"]
