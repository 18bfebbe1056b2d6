"""Settings, declared once: name, default, help; and every other ``GIOD_*`` variable.

Values come from, in increasing priority: the defaults below, the file
``giod.toml`` in an embedded federation's directory (section ``[giod]``),
environment variables ``GIOD_<NAME>`` (upper case), and keyword arguments.

A few variables describe the process rather than a federation's settings
(which federation a command opens, the tokens it presents, the site a worker
runs at); they are read here too, each through one function, so that no
other module reads ``os.environ``.
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
    Setting("min_savings", 0.25, "Arrow containers: a codec stays only where it saves this share of the bytes "
            "(0: size first, every container compressed)"),
    Setting("byte_stream_split", True, "byte-stream-split encoding of float columns"),
    Setting("page_checksums", True, "CRC-32 per Parquet page, verified on read"),
    Setting("upload_quota_bytes", 64 << 30,
            "server: bytes one token may hold in uploads not yet committed (in progress or uploaded)"),
    Setting("lease_seconds", 600.0, "term of a writer's lease on the files it writes, renewed every third of it"),
    Setting("feed_streams_per_token", 16, "server: change-feed streams one token (or anonymous address) holds at once"),
    Setting("feed_streams", 256, "server: change-feed streams of all tokens at once (an unrestricted admin passes)"),
    Setting("feed_max_seconds", 3600.0, "server: the longest a change-feed stream lasts (its client reconnects)"),
    Setting("query_streams_per_token", 16, "server: query answers one token (or anonymous address) receives at once"),
    Setting("query_streams", 256, "server: query answers of all tokens at once (an unrestricted admin passes)"),
    Setting("tape_bulk_staging", True, "a job asks for all the nearline files it needs in one request, ordered by "
            "cartridge, and reads what is on disk first (false: one file at a time, in the job's order)"),
    Setting("third_party_fallback", True, "a copy between two XRootD servers that cannot be made server to server "
            "(third-party copy failed, or not offered) goes through this process, with a warning; false: it fails"),
    Setting("record_reads", True, "record when each database was last read (batched, at most once an hour per "
            "database and process), for tier rules by last read (giod rule add … --unread-for 30d)"),
    Setting("staging_wait_seconds", 86_400.0, "client: the longest a read waits while a giod server answers that "
            "the file is being staged from tape (then it fails; the staging goes on at the server)"),
    Setting("send_timeout_seconds", 60.0, "server: a client that takes nothing of a streamed answer for this long "
            "is disconnected"),
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


# ---------------------------------------------------------------- the process's own variables

FEDERATION_ENV = "GIOD_FEDERATION"  # the federation a command opens when none is named
DEFAULT_FEDERATION = "giod-data"  # ... and when that variable is unset too, in the current directory
TOKEN_ENV = "GIOD_TOKEN"  # noqa: S105 - the name of a variable, not a secret
SITE_ENV = "GIOD_SITE"  # the site a worker declares it runs at


def _variable(name: str, environ: Mapping[str, str] | None) -> str | None:
    value = (os.environ if environ is None else environ).get(name)
    return value or None  # set but empty: as if unset


def federation(environ: Mapping[str, str] | None = None) -> str | None:
    """``GIOD_FEDERATION``: the federation a command opens when it is not told which."""
    return _variable(FEDERATION_ENV, environ)


def default_federation(environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The federation opened when none is named, and why: ``GIOD_FEDERATION``, else ``./giod-data``."""
    named = federation(environ)
    if named is not None:
        return named, f"{FEDERATION_ENV}={named}"
    return DEFAULT_FEDERATION, f"{FEDERATION_ENV} is unset, so ./{DEFAULT_FEDERATION}"


def site_token_env(site: str) -> str:
    """The variable holding the token for one site: ``GIOD_TOKEN_<NAME>`` (upper case, ``_`` for others)."""
    return TOKEN_ENV + "_" + "".join(ch if ch.isascii() and ch.isalnum() else "_" for ch in site.upper())


def token(site: str | None = None, environ: Mapping[str, str] | None = None, *,
          fallback: bool = True) -> str | None:
    """The bearer token: ``GIOD_TOKEN_<SITE>`` for ``site``, else (``fallback``) ``GIOD_TOKEN``."""
    if site is not None:
        own = _variable(site_token_env(site), environ)
        if own is not None or not fallback:
            return own
    return _variable(TOKEN_ENV, environ)


def worker_site(environ: Mapping[str, str] | None = None) -> str | None:
    """``GIOD_SITE``: the site this worker says it runs at."""
    return _variable(SITE_ENV, environ)
