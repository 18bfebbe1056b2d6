"""The XRootD rows of ``giod bench replicate``: the same files copied between two ``xrootd`` servers.

Two ``xrootd`` servers (writable, CRC-32C checksums, third-party copies
through ``xrdcp``) stand beside the two giod servers. Once, before the timed
rounds, ``giod replicate`` copies the dataset from giod server *a* to XRootD
server *xa* (the bytes pass through the copying process; each upload is
checked by *xa*'s own CRC-32C before it is renamed into place): that one copy
is reported in a note. Then, round after round with giod's own rows, every
container is copied from *xa* (straight, or through a latency proxy of the
same RTT and cap as giod's) to *xb*: *xb*'s server fetches each file from
*xa* itself (``ofs.tpc``), and giod publishes it only when *xb*'s CRC-32C of
it is the catalog's.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

__all__ = ["XRD_TPC", "xrootd_copies"]

XRD_TPC = "giod replicate, XRootD → XRootD (third-party)"


def _name(rtt: float) -> str:
    return f"xa{rtt:g}".replace(".", "_")


@contextmanager
def xrootd_copies(home: Any, work: Path, dataset: str, rtts_ms: Sequence[float], streams: Sequence[int],
                  bandwidth: float | None, sources: list[str], notes: list[str]
                  ) -> Iterator[dict[tuple[str, float, int], Callable[[int], float]]]:
    """Clocks of the XRootD rows, keyed as giod's ((client, RTT, streams)); none, with a note, without XRootD.

    The XRootD sites are appended to ``sources``, so that giod's own rows mark their copies bad; the XRootD
    rows mark every other site's copies bad, so that each file is copied from XRootD server xa.
    """
    from giod.errors import GiodError
    from giod.replication import replicate
    from giod.storage.xrootd import available
    from giod.testing.netlab import LatencyProxy
    from giod_bench import xrootd

    reason = xrootd.missing() or available()
    if reason is None and shutil.which("xrdcp") is None:
        reason = "xrdcp is not installed (Debian package xrootd-client): no third-party copies"
    if reason is not None:
        notes.append(f"{XRD_TPC} left out: {reason}")
        yield {}
        return
    with ExitStack() as stack:
        dirs = {}
        servers = {}
        work.chmod(0o755)  # a root process runs xrootd as another user, who must reach the directories
        for name in ("xa", "xb"):
            d = dirs[name] = work / name
            d.mkdir()
            d.chmod(0o777)
            try:
                servers[name] = stack.enter_context(xrootd.XRootDServer(d, writable=True))
            except GiodError as exc:
                notes.append(f"{XRD_TPC} left out: the XRootD server did not start ({exc})")
                yield {}
                return
        home.add_site("xb", "root://{}:{}//".format(*servers["xb"].address), 1)
        home.add_site("xa", "root://{}:{}//".format(*servers["xa"].address), 3)
        t0 = time.perf_counter()
        report = replicate(home.catalog, home.site, dataset, "xa", streams=max(streams))
        seconds = time.perf_counter() - t0
        if not report.ok:
            raise GiodError(f"copying the dataset to the XRootD server failed: {report.failed[:3]}")
        notes.append(f"giod replicate, giod server → XRootD (bytes through the copying process, each upload "
                     f"checked by the server's CRC-32C): {report.bytes / 1e6:,.0f} MB in {seconds:.2f} s = "
                     f"{report.bytes / 1e6 / seconds:,.1f} MB/s with {max(streams)} streams, 0 ms, once")
        names = {}
        for rtt in rtts_ms:
            address = servers["xa"].address
            if rtt > 0 or bandwidth is not None:
                address = stack.enter_context(LatencyProxy(address, rtt=rtt / 1000, bandwidth=bandwidth,
                                                           isolate=True)).address
            names[rtt] = _name(rtt)
            home.add_site(names[rtt], "root://{}:{}//".format(*address), 3)
            # the same files behind the proxy: adopted (the server's checksums match), not copied
            if not replicate(home.catalog, home.site, dataset, names[rtt]).ok:
                raise GiodError(f"the XRootD server at {rtt:g} ms does not hold the dataset")
        xsites = ["xa", *names.values(), "xb"]
        containers = [c for db in home.catalog.databases(dataset) for c in db.containers]
        sources.extend(xsites)

        def copy_with(rtt: float, n: int) -> Callable[[int], float]:
            source = names[rtt]

            def clock(_: int) -> float:
                shutil.rmtree(dirs["xb"] / dataset, ignore_errors=True)
                # every other site's copies bad (giod's site b holds good ones after giod's rows): xa's are copied
                every = {site.name for site in home.catalog.sites()}
                home.catalog.set_replica_states(
                    [(c.id, s, "good" if s == source else "bad") for c in containers for s in sorted(every)])
                opened = home.site(source).opened
                t0 = time.perf_counter()
                report = replicate(home.catalog, home.site, dataset, "xb", streams=n)
                seconds = time.perf_counter() - t0
                if not report.ok or report.copied != len(containers):
                    raise GiodError(f"XRootD third-party copies at {rtt:g} ms with {n} streams failed: "
                                    f"{report.failed[:3]}")
                if home.site(source).opened != opened:
                    raise GiodError("a file passed through the copying process: not a third-party copy")
                return seconds
            return clock

        notes.append(f"{XRD_TPC}: XRootD server xa → XRootD server xb ({shutil.which('xrootd')}), xb's server "
                     "fetching each file from xa itself through the same kind of latency proxy (ofs.tpc with "
                     "xrdcp), giod publishing it when xb's CRC-32C matches the catalog's; '× 0 ms' compares "
                     "with giod's own 0 ms row")
        yield {(XRD_TPC, rtt, n): copy_with(rtt, n) for rtt in rtts_ms for n in streams}
