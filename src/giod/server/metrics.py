"""Counters for ``/metrics`` in the Prometheus text format (no client library needed)."""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict

__all__ = ["Metrics"]

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """Requests, bytes, latencies, errors, open files and the query cache."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, str, int], int] = defaultdict(int)
        self.latency: dict[str, list[int]] = defaultdict(lambda: [0] * (len(BUCKETS) + 1))
        self.latency_sum: dict[str, float] = defaultdict(float)
        self.bytes_sent = 0
        self.bytes_received = 0
        self.open_files = 0
        self.counters: dict[str, int] = defaultdict(int)

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[(route, method, status)] += 1
            self.latency[route][bisect.bisect_left(BUCKETS, seconds)] += 1
            self.latency_sum[route] += seconds

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            if name == "bytes_sent":
                self.bytes_sent += n
            elif name == "bytes_received":
                self.bytes_received += n
            elif name == "open_files":
                self.open_files += n
            else:
                self.counters[name] += n

    def render(self) -> str:
        with self._lock:
            out = ["# HELP giod_requests_total Requests answered, by route, method and status.",
                   "# TYPE giod_requests_total counter"]
            for (route, method, status), n in sorted(self.requests.items()):
                out.append(f'giod_requests_total{{route="{route}",method="{method}",status="{status}"}} {n}')
            errors = sum(n for (_, _, s), n in self.requests.items() if s >= 400)
            out += ["# TYPE giod_errors_total counter", f"giod_errors_total {errors}",
                    "# HELP giod_request_seconds Time to answer, by route.",
                    "# TYPE giod_request_seconds histogram"]
            for route, counts in sorted(self.latency.items()):
                acc = 0
                for bound, n in zip((*BUCKETS, float("inf")), counts, strict=True):
                    acc += n
                    le = "+Inf" if bound == float("inf") else repr(bound)
                    out.append(f'giod_request_seconds_bucket{{route="{route}",le="{le}"}} {acc}')
                out.append(f'giod_request_seconds_sum{{route="{route}"}} {self.latency_sum[route]:.6f}')
                out.append(f'giod_request_seconds_count{{route="{route}"}} {acc}')
            out += ["# TYPE giod_bytes_sent_total counter", f"giod_bytes_sent_total {self.bytes_sent}",
                    "# TYPE giod_bytes_received_total counter", f"giod_bytes_received_total {self.bytes_received}",
                    "# TYPE giod_open_files gauge", f"giod_open_files {self.open_files}"]
            for name, n in sorted(self.counters.items()):
                out += [f"# TYPE giod_{name}_total counter", f"giod_{name}_total {n}"]
            hits, misses = self.counters.get("query_cache_hits", 0), self.counters.get("query_cache_misses", 0)
            rate = hits / (hits + misses) if hits + misses else 0.0
            out += ["# TYPE giod_query_cache_hit_ratio gauge", f"giod_query_cache_hit_ratio {rate:.6f}"]
            return "\n".join(out) + "\n"
