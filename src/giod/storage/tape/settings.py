"""The settings of a simulated tape library, with defaults from an LTO-9 data sheet.

A nearline site is named ``tape:///DIR?drives=3&time_scale=0.001``: the query
sets any field of :class:`LibrarySettings`, so the catalog's site URL says what
hardware the site simulates. The defaults, for one current LTO generation
(LTO-9):

* capacity 18 TB native per cartridge, 400 MB/s native drive rate (data sheet);
* mount 30 s: the robot's move (~10 s) plus load-and-thread to ready (~20 s);
* unmount 25 s: rewind from mid-tape and unload;
* locate: 3 s to stop and reposition, plus up to 100 s to wind the whole
  length (so an average locate of a full cartridge is ~ 35–55 s, as data
  sheets quote for the first byte of a random file);
* 4 drives, a 1 TiB disk buffer, staged copies pinned for 1 h by default;
  ``unread_s`` releases a staged copy not read for that long (by last read,
  as a disk cache in front of tape does), where by default a copy stays
  until the buffer needs its room (least recently read first).

``time_scale`` is how many real seconds one simulated second takes: 1 runs
in real time, 0.001 turns a 30 s mount into 30 ms, and 0 never sleeps (the
library's clock jumps to when the awaited file is ready), which is what the
tests use.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any
from urllib.parse import parse_qsl

from giod.errors import ConfigError

__all__ = ["LibrarySettings"]


@dataclass(frozen=True)
class LibrarySettings:
    """What a simulated library is: drives, latencies, rate, cartridge and buffer sizes, its clock."""

    drives: int = 4
    mount_s: float = 30.0
    unmount_s: float = 25.0
    seek_s: float = 3.0  # stop, reposition, start streaming again: paid by every locate
    wind_s: float = 100.0  # locate across the whole length of a cartridge
    rate: float = 400e6  # bytes per second read or written by one drive
    capacity: int = 18 * 10**12  # bytes per cartridge
    write_pool: int = 4  # cartridges filled at once: consecutive files go round them
    buffer_bytes: int = 1 << 40  # the disk buffer that staged copies live in
    pin_s: float = 3600.0  # how long a stage request pins its files unless it says otherwise
    unread_s: float = 0.0  # a staged copy not read for this long is released (0: only when the buffer is full)
    time_scale: float = 1.0  # real seconds per simulated second (0: never sleep)

    def __post_init__(self) -> None:
        positive = ("drives", "rate", "capacity", "write_pool")
        for f in fields(self):
            value = getattr(self, f.name)
            if value < 0 or (f.name in positive and value <= 0) or value != value:
                what = "positive" if f.name in positive else "zero or more"
                raise ConfigError(f"tape library setting {f.name} must be {what}, not {value!r}")

    @classmethod
    def from_query(cls, query: str) -> LibrarySettings:
        """Settings from a URL query (``drives=3&time_scale=0``); ConfigError naming an unknown or bad one."""
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, raw in parse_qsl(query, keep_blank_values=True):
            if key not in known:
                raise ConfigError(f"unknown tape library setting {key!r} (known: {', '.join(known)})")
            kind = int if known[key].type in ("int", int) else float
            try:
                values[key] = kind(float(raw)) if kind is int and float(raw).is_integer() else kind(raw)
            except ValueError as exc:
                raise ConfigError(f"tape library setting {key} must be a number, not {raw!r}") from exc
        return cls(**values)

    def with_(self, **changes: Any) -> LibrarySettings:
        return replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def move(self, head: int, position: int) -> tuple[float, bool]:
        """Seconds from ``head`` to ``position`` and whether it takes a locate: a short gap ahead is read
        through (as drives do) when that is quicker than stopping and locating."""
        if position == head:
            return 0.0, False
        locate = self.locate(position - head)
        if position > head and (position - head) / self.rate <= locate:
            return (position - head) / self.rate, False
        return locate, True

    def locate(self, distance: int) -> float:
        """Seconds to move the head ``distance`` bytes along a cartridge (0: already there)."""
        if distance == 0:
            return 0.0
        return self.seek_s + self.wind_s * min(abs(distance), self.capacity) / self.capacity
