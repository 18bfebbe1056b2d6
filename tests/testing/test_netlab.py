"""The latency proxy (giod.testing.netlab) against real servers on loopback.

Timing assertions have wide margins for a busy machine, yet each fails when
the feature it checks is missing: a proxy without delay answers in well under
a millisecond, a stop-and-wait proxy needs dozens of round trips for what a
long fat pipe carries in one, an uncapped one runs at hundreds of MB/s.
"""

from __future__ import annotations

import os
import socket
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from click.testing import CliRunner

from giod.cli import main
from giod.errors import ConfigError
from giod.testing.netlab import (
    Faults,
    LatencyProxy,
    echo_server,
    fetch,
    parse_target,
    ping,
    source_server,
)


@pytest.fixture(scope="module")
def echo():
    with echo_server() as address:
        yield address


@pytest.fixture(scope="module")
def source():
    with source_server() as address:
        yield address


def _roundtrip(address: tuple[str, int], payload: bytes, timeout: float = 60) -> bytes:
    """Send ``payload`` to an echo server (from a thread, while reading), half-close, read to the end."""
    with socket.create_connection(address, timeout=timeout) as sock:
        sender = threading.Thread(target=lambda: (sock.sendall(payload), sock.shutdown(socket.SHUT_WR)))
        sender.start()
        got = _read_to_end(sock)
        sender.join()
    return got


def _read_to_end(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("rtt", [0.05, 0.2])
def test_round_trip_time_is_added(echo, rtt):
    with LatencyProxy(echo, rtt=rtt) as proxy:
        times = ping(proxy.address, count=5)
    assert min(times) >= rtt * 0.99, times  # never early
    assert statistics.median(times) <= rtt * 1.1 + 0.05, times  # 200 ms asked → at most 270 ms


def test_no_delay_asked_adds_little(echo):
    with LatencyProxy(echo) as proxy:
        times = ping(proxy.address, count=20)
    assert statistics.median(times) < 0.02, times


def test_new_connection_costs_a_handshake(echo):
    rtt = 0.1
    payload = b"x" * 16
    for handshake, rounds in ((True, 2), (False, 1)):
        with LatencyProxy(echo, rtt=rtt, handshake=handshake) as proxy:
            start = time.perf_counter()
            with socket.create_connection(proxy.address, timeout=10) as sock:
                sock.sendall(payload)
                got = b""
                while len(got) < len(payload):
                    got += sock.recv(64)
            elapsed = time.perf_counter() - start
        assert got == payload
        assert rounds * rtt * 0.99 <= elapsed < rounds * rtt + 0.09, (handshake, elapsed)


def test_bytes_arrive_intact_both_ways(echo):
    payload = os.urandom(6_000_000)
    with LatencyProxy(echo, rtt=0.01) as proxy:
        assert _roundtrip(proxy.address, payload) == payload
        stats = proxy.stats
    assert stats.bytes_up == stats.bytes_down == len(payload)


def test_a_long_fat_pipe_carries_many_reads_per_round_trip(source):
    """16 MB in one request: one round trip plus the transfer, not one round trip per read."""
    size, rtt = 16_000_000, 0.1
    with LatencyProxy(source, rtt=rtt) as proxy:
        fat = fetch(proxy.address, size)
    # a proxy that waited a round trip per 256 KiB read would need 61 round trips (6 s)
    assert rtt <= fat < 1.0, fat


def test_the_window_bounds_the_bytes_in_flight(source):
    size, rtt, window = 8_000_000, 0.1, 1_000_000
    with LatencyProxy(source, rtt=rtt, window=window) as proxy:
        narrow = fetch(proxy.address, size)
    # at most one window per round trip: 8 round trips at least
    assert narrow >= 0.6 * size / window * rtt, narrow


def test_bandwidth_cap_is_shared_by_all_connections(source):
    cap = 20e6  # bytes/s
    size = 4_000_000
    with LatencyProxy(source, bandwidth=cap) as proxy:
        one = fetch(proxy.address, 2 * size)
        start = time.perf_counter()
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda _: fetch(proxy.address, size // 2), range(4)))
        four = time.perf_counter() - start
    assert 0.6 * cap <= 2 * size / one <= 1.1 * cap, one
    assert 0.6 * cap <= 2 * size / four <= 1.1 * cap, four


def test_many_concurrent_connections(echo):
    n, rtt = 64, 0.05
    payloads = [os.urandom(50_000 + i) for i in range(n)]
    with LatencyProxy(echo, rtt=rtt) as proxy:
        start = time.perf_counter()
        with ThreadPoolExecutor(n) as pool:
            answers = list(pool.map(lambda p: _roundtrip(proxy.address, p), payloads))
        elapsed = time.perf_counter() - start
        stats = proxy.stats
    assert answers == payloads
    assert stats.connections == n
    assert stats.bytes_down == sum(map(len, payloads))
    # each exchange costs about 3 round trips (handshake, data, end of stream); one after the other: 64 × 3
    assert elapsed < n * rtt, elapsed


def test_flip_inverts_one_byte_of_the_server_stream(echo):
    payload = os.urandom(100_000)
    with LatencyProxy(echo, faults=Faults(flip_at=70_000)) as proxy:
        got = _roundtrip(proxy.address, payload)
        assert proxy.stats.flipped == 1
    assert len(got) == len(payload)
    assert [i for i in range(len(got)) if got[i] != payload[i]] == [70_000]
    assert got[70_000] == payload[70_000] ^ 0xFF


def test_drop_cuts_the_connection_after_n_bytes(echo):
    payload = os.urandom(100_000)
    with LatencyProxy(echo, rtt=0.01, faults=Faults(drop_after=30_000, connections=1)) as proxy:
        first = _roundtrip(proxy.address, payload)
        second = _roundtrip(proxy.address, payload)  # faults were asked for one connection only
        stats = proxy.stats
    assert first == payload[:30_000]
    assert second == payload
    assert stats.dropped == 1


def test_faults_can_be_changed_while_running(echo):
    payload = os.urandom(10_000)
    with LatencyProxy(echo) as proxy:
        assert _roundtrip(proxy.address, payload) == payload
        proxy.faults = Faults(drop_after=0)
        assert _roundtrip(proxy.address, payload) == b""
        proxy.faults = Faults()
        assert _roundtrip(proxy.address, payload) == payload


def test_refused_target_resets_the_client():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]  # bound, not listening: connections are refused
        with LatencyProxy(("127.0.0.1", closed_port), handshake=False) as proxy:
            with socket.create_connection(proxy.address, timeout=10) as sock:
                sock.sendall(b"hello")
                with pytest.raises(ConnectionResetError):
                    if sock.recv(10) == b"":
                        raise ConnectionResetError("closed")


def test_isolated_proxy_runs_in_a_child_process(echo):
    rtt = 0.05
    with LatencyProxy(echo, rtt=rtt, isolate=True) as proxy:
        times = ping(proxy.address, count=3)
        with pytest.raises(ConfigError, match="isolated"):
            proxy.stats
    assert min(times) >= rtt * 0.99
    assert statistics.median(times) <= rtt * 1.1 + 0.05


@pytest.mark.parametrize("isolate", [False, True])
def test_a_taken_port_is_a_config_error(echo, isolate):
    with LatencyProxy(echo) as first:
        with pytest.raises(ConfigError, match="listen"):
            LatencyProxy(echo, listen=("127.0.0.1", first.port), isolate=isolate).start()


def test_bad_settings_are_config_errors(echo):
    with pytest.raises(ConfigError):
        LatencyProxy(echo, rtt=-1)
    with pytest.raises(ConfigError):
        LatencyProxy(echo, bandwidth=0)
    with pytest.raises(ConfigError):
        Faults(drop_after=-3)
    with pytest.raises(ConfigError):
        parse_target("localhost")
    assert parse_target("[::1]:8080") == ("::1", 8080)
    assert parse_target("example.org:1") == ("example.org", 1)


def test_cli_wants_a_target():
    result = CliRunner().invoke(main, ["bench", "proxy", "--rtt", "10"])
    assert result.exit_code == 2
    assert "--target" in result.output


def test_cli_check_measures_the_proxy():
    result = CliRunner().invoke(main, ["bench", "proxy", "--check", "--quick", "--rtt", "20"])
    assert result.exit_code == 0, result.output
    assert "direct" in result.output and "proxy" in result.output
