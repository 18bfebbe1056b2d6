"""Helpers for testing code that uses giod, shared by giod's own tests and benchmarks.

- :mod:`giod.testing.synthetic`: seeded synthetic events with every kind of
  column giod stores (``synthetic.schema()``, ``synthetic.events(n)``), and
  the model they follow (``synthetic.yaml``).
- :class:`LatencyProxy` (:mod:`giod.testing.netlab`): a TCP proxy on loopback
  that adds a round-trip time and a bandwidth cap, so that a local server
  looks far away; :class:`Faults` cut or corrupt its connections on purpose.
- :func:`echo_server`, :func:`source_server`, :func:`ping`, :func:`fetch`
  (:mod:`giod.testing.netprobe`): loopback servers and clients that measure
  a path through the proxy.

Example::

    from giod.testing import LatencyProxy, Faults, synthetic

    with ds.writer() as w:
        w.append(synthetic.events(1000, seed=1))
    with LatencyProxy(("127.0.0.1", port), rtt=0.05, faults=Faults(drop_after=4096)) as proxy:
        ...  # a client of http://127.0.0.1:{proxy.port} sees 50 ms and a cut connection

The names load on first use, so ``import giod.testing`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from giod.testing import synthetic
    from giod.testing.netlab import LatencyProxy
    from giod.testing.netprobe import echo_server, fetch, ping, source_server
    from giod.testing.proxyloop import Faults, Stats

__all__ = ["Faults", "LatencyProxy", "Stats", "echo_server", "fetch", "ping", "source_server", "synthetic"]


def __getattr__(name: str) -> object:
    if name == "synthetic":
        import importlib

        # not `from giod.testing import synthetic`: that asks this function again before importing
        return importlib.import_module("giod.testing.synthetic")
    if name in ("Faults", "LatencyProxy", "Stats"):
        from giod.testing import netlab

        return getattr(netlab, name)
    if name in ("echo_server", "fetch", "ping", "source_server"):
        from giod.testing import netprobe

        return getattr(netprobe, name)
    raise AttributeError(f"module 'giod.testing' has no attribute {name!r}")
