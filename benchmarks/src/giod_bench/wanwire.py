"""The loopback itself, as a limit for ``giod bench wan``: the collection's container files moved from a server
process into fresh memory of the reading process, and nothing else.

No HTTP, no checksums, no decoding: a child process answers ``<path>\\n`` with the file's size and then the file
through ``sendfile``; the reader takes each file into a new buffer (as any reader that hands its result to the
caller must) with ``recv_into``, over a few connections; a second reading also takes each file's CRC-32C
as its bytes land (the least a reader that checks what it received does). What giod's client reaches
straight at the server is read beside both: on a small machine the kernel's own copy and page faults are
most of what is left.
"""

from __future__ import annotations

import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from giod.errors import GiodError

__all__ = ["LOOPBACK", "LOOPBACK_CHECKED", "loopback_server", "read_loopback"]

LOOPBACK = "the loopback itself (sendfile → recv_into, no checks)"
LOOPBACK_CHECKED = "the loopback with a CRC-32C of every byte as it lands"

# the server: one thread a connection, one request line a file; it serves only files under its root
_SERVER = r"""
import os, socket, sys, threading
root = os.path.realpath(sys.argv[1])
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(64)
print(ls.getsockname()[1], flush=True)
def one(c):
    with c, c.makefile("rb") as requests:
        for line in requests:
            path = os.path.realpath(os.path.join(root, line.decode().strip()))
            if not path.startswith(root + os.sep):
                return
            fd = os.open(path, os.O_RDONLY)
            try:
                size = os.fstat(fd).st_size
                c.sendall(size.to_bytes(8, "little"))
                sent = 0
                while sent < size:
                    sent += os.sendfile(c.fileno(), fd, sent, size - sent)
            finally:
                os.close(fd)
while True:
    c, _ = ls.accept()
    threading.Thread(target=one, args=(c,), daemon=True).start()
"""


@contextmanager
def loopback_server(root: Path) -> Iterator[tuple[str, int]]:
    """The plain sendfile server over ``root`` in a child process; yields its address."""
    child = subprocess.Popen([sys.executable, "-c", _SERVER, str(root)], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        if not line.strip().isdigit():
            raise GiodError("the loopback server did not start")
        yield ("127.0.0.1", int(line))
    finally:
        child.kill()
        child.wait()


def _recv_exactly(sock: socket.socket, view: memoryview, crc: list[int] | None = None) -> None:
    """``view`` filled from ``sock``; with ``crc``, its CRC-32C extended as each stretch lands (at most
    ``LANDED_BYTES`` at a time, as giod's client takes a buffer's while its bytes are in the cache)."""
    from giod.storage.checksum import extend
    from giod.storage.http import LANDED_BYTES

    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:got + LANDED_BYTES] if crc is not None else view[got:])
        if not n:
            raise GiodError("the loopback server closed the connection early")
        if crc is not None:
            crc[0] = extend(crc[0], view[got:got + n])
        got += n


def read_loopback(address: tuple[str, int], paths: list[str], connections: int, *, checked: bool = False,
                  sums: dict[str, int] | None = None) -> tuple[float, int]:
    """Seconds to receive every file of ``paths`` (relative to the server's root) over ``connections``, and
    the bytes received; ``checked``: each file's CRC-32C taken as it lands, the least a reader that checks
    what it received does (put in ``sums`` by path, if given)."""
    todo: queue.SimpleQueue[str] = queue.SimpleQueue()
    for p in paths:
        todo.put(p)
    errors: list[Exception] = []
    kept: list[np.ndarray] = []  # held until the end, as a reader holds its result
    taken: dict[str, int] = {} if sums is None else sums

    def work() -> None:
        try:
            with socket.create_connection(address) as sock:
                while True:
                    try:
                        path = todo.get_nowait()
                    except queue.Empty:
                        return
                    sock.sendall(path.encode() + b"\n")
                    head = bytearray(8)
                    _recv_exactly(sock, memoryview(head))
                    buf = np.empty(int.from_bytes(head, "little"), dtype=np.uint8)
                    crc = [0] if checked else None
                    _recv_exactly(sock, memoryview(buf.data), crc)
                    kept.append(buf)
                    if crc is not None:
                        taken[path] = crc[0]
        except (OSError, GiodError) as exc:  # reported by the caller
            errors.append(exc)

    start = time.perf_counter()
    threads = [threading.Thread(target=work) for _ in range(max(1, connections))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    if errors:
        raise GiodError(f"the loopback read failed: {errors[0]}")
    if len(kept) != len(paths):
        raise GiodError(f"the loopback read received {len(kept)} of {len(paths)} files")
    return seconds, sum(b.nbytes for b in kept)
