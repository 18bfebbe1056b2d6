"""Settings, declared once: name, default, help.

Values come from, in increasing priority: the defaults below, the file
``giod.toml`` in an embedded federation's directory (section ``[giod]``),
environment variables ``GIOD_<NAME>`` (upper case), and keyword arguments.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from giod.errors import ConfigError

CONFIG_FILE = "giod.toml"


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    help: str

    @property
    def env(self) -> str:
        return f"GIOD_{self.name.upper()}"

    def parse(self, value: Any, source: str) -> Any:
        kind = type(self.default)
        if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
            return value
        try:
            if kind is int:
                return int(str(value).replace("_", ""))
            if kind is bool:
                text = str(value).strip().lower()
                if text in ("1", "true", "yes", "on"):
                    return True
                if text in ("0", "false", "no", "off"):
                    return False
                raise ValueError(text)
            return kind(value)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{source}: {self.name} must be a {kind.__name__}, got {value!r}") from exc


SETTINGS: tuple[Setting, ...] = (
    Setting("database_events", 100_000, "events per database before the writer commits it"),
    Setting("database_bytes", 512 << 20, "uncompressed bytes per database before the writer commits it"),
    Setting("cluster_bytes", 16 << 20, "uncompressed bytes per cluster (Parquet row group) of a container"),
    Setting("container_format", "arrow", "container files: arrow (Arrow IPC file) or parquet"),
    Setting("compression", "zstd", "compression codec (zstd, lz4, none; snappy for Parquet only)"),
    Setting("compression_level", 1, "codec level (zstd: 1 fast … 22 small)"),
    Setting("byte_stream_split", True, "byte-stream-split encoding of float columns"),
    Setting("page_checksums", True, "CRC-32 per Parquet page, verified on read"),
    Setting("upload_quota_bytes", 64 << 30,
            "server: bytes one token may hold in uploads not yet committed (in progress or uploaded)"),
    Setting("lease_seconds", 600.0, "term of a writer's lease on the files it writes, renewed every third of it"),
)
BY_NAME = {s.name: s for s in SETTINGS}


def load(root: Path | None = None, environ: Mapping[str, str] | None = None, **overrides: Any) -> dict[str, Any]:
    """The effective settings (see module docstring for the order)."""
    env = os.environ if environ is None else environ
    values = {s.name: s.default for s in SETTINGS}
    if root is not None and (root / CONFIG_FILE).exists():
        path = root / CONFIG_FILE
        try:
            data = tomllib.loads(path.read_text()).get("giod", {})
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: {exc}") from exc
        for key, value in data.items():
            if key not in BY_NAME:
                raise ConfigError(f"{path}: unknown setting {key!r} (known: {', '.join(BY_NAME)})")
            values[key] = BY_NAME[key].parse(value, str(path))
    for s in SETTINGS:
        if s.env in env:
            values[s.name] = s.parse(env[s.env], s.env)
    for key, value in overrides.items():
        if value is None:
            continue
        if key not in BY_NAME:
            raise ConfigError(f"unknown setting {key!r} (known: {', '.join(BY_NAME)})")
        values[key] = BY_NAME[key].parse(value, "argument")
    return values
