"""Sites: places that hold container files, the local and fsspec kinds, and the registry of kinds.

A site is addressed by relative, '/'-separated paths below its root. Files
are written through :meth:`Site.create`, which hands out a temporary file and
publishes it under its final name only when :meth:`PendingFile.publish` is
called, after the data reached stable storage. Readers and the catalog only
ever see complete files. The interface is ``giod.storage.kind``, files being
written ``giod.storage.pending``; this module is the front that names them
all, so callers import sites from one place.

Kinds are found by URL scheme through a small registry, so a remote kind is
imported only when it is used.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlsplit

from giod.errors import ConfigError, GiodError, NotFound, StorageError
from giod.storage import direct as direct_io
from giod.storage.kind import FileInfo, Site, SiteHealth, check_relpath
from giod.storage.pending import TMP_MARK, LocalPending, PendingFile, fsync_path, is_temporary, temporary_name

__all__ = ["TMP_MARK", "FileInfo", "FsspecSite", "LocalPending", "LocalSite", "PendingFile", "Site", "SiteHealth",
           "check_relpath", "check_site_url", "fsync_path", "is_temporary", "open_site", "register_site_kind",
           "temporary_name"]


class LocalSite(Site):
    """A directory on a local (or mounted) file system."""

    def __init__(self, name: str, url: str):
        super().__init__(name, url)
        root = url[len("file://") :] if url.startswith("file://") else url
        self.root = Path(root)

    def _full(self, path: str) -> Path:
        return self.root / check_relpath(path)

    def create(self, path: str, *, direct: bool = False) -> PendingFile:
        """A new file at ``path``; ``direct``: written past the page cache where the file system allows
        (for copies that arrive whole and are not read again soon, see ``giod.storage.direct``)."""
        try:
            if direct:
                final = self.root / check_relpath(path)
                tmp = temporary_name(final)
                fd = direct_io.open_direct(tmp)
                if fd is not None:
                    return direct_io.DirectPending(path, fd, tmp, final)
            return LocalPending(self.root, check_relpath(path))
        except OSError as exc:
            raise StorageError(f"cannot create {path} on site {self.name}: {exc}") from exc

    def open(self, path: str) -> BinaryIO:
        try:
            return open(self._full(path), "rb")
        except FileNotFoundError as exc:
            raise NotFound(f"file {path} is missing on site {self.name}") from exc
        except OSError as exc:
            raise StorageError(f"cannot open {path} on site {self.name}: {exc}") from exc

    def size(self, path: str) -> int:
        try:
            return self._full(path).stat().st_size
        except FileNotFoundError as exc:
            raise NotFound(f"file {path} is missing on site {self.name}") from exc

    def remove(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._full(path).unlink()
        # drop directories left empty, up to the root
        parent = self._full(path).parent
        while parent != self.root and parent.is_relative_to(self.root):
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent

    def walk(self) -> Iterator[FileInfo]:
        if not self.root.exists():
            return
        for dirpath, _dirs, files in os.walk(self.root):
            for f in files:
                full = Path(dirpath) / f
                try:
                    st = full.stat()
                except FileNotFoundError:
                    continue
                yield FileInfo(full.relative_to(self.root).as_posix(), st.st_size, st.st_mtime)

    def local_path(self, path: str) -> str | None:
        return str(self._full(path))

    def health(self) -> SiteHealth:
        root = self.root
        if not root.is_dir():
            if root.exists():
                return SiteHealth(False, f"{root} is not a directory")
            if root.parent.is_dir():
                usage = shutil.disk_usage(root.parent)
                return SiteHealth(True, "empty (directory not created yet)", usage.free, usage.total)
            return SiteHealth(False, f"directory {root} is missing")
        usage = shutil.disk_usage(root)
        return SiteHealth(True, "", usage.free, usage.total)

    def away(self) -> bool:
        return not self.root.is_dir()


class _FsspecPending(PendingFile):
    def __init__(self, site: FsspecSite, path: str):
        self.path = path
        self._site = site
        self._tmp = site._full(posixpath.join(posixpath.dirname(path) or ".",
                                              f".{posixpath.basename(path)}{TMP_MARK}{uuid.uuid4().hex}"))
        # file systems with folders (local://, sftp, hdfs) make none on writing; object stores need none
        site.fs.makedirs(posixpath.dirname(self._tmp), exist_ok=True)
        self._fh: Any = site.fs.open(self._tmp, "wb")

    def write(self, data: bytes | memoryview) -> int:
        # some back ends (fsspec-xrootd) take bytes only; the bytes go over a network anyway
        return int(self._fh.write(data if isinstance(data, bytes) else bytes(data)))

    def publish(self) -> None:
        try:
            self._fh.close()
            self._site.fs.mv(self._tmp, self._site._full(self.path))
        except Exception as exc:  # fsspec back ends raise many kinds
            self.discard()
            raise StorageError(f"cannot write {self.path} on site {self._site.name}: {exc}") from exc

    def discard(self) -> None:
        with contextlib.suppress(Exception):
            self._fh.close()
        with contextlib.suppress(Exception):
            self._site.fs.rm(self._tmp)


class FsspecSite(Site):
    """Any file system that fsspec knows (``memory://``, ``s3://``, ...).

    A file system that cannot be reached (a host that does not resolve or
    answer) is a StorageError, whatever the back end raised, so that callers
    can tell one site away from a bug.
    """

    def __init__(self, name: str, url: str):
        super().__init__(name, url)
        try:
            import fsspec
        except ImportError as exc:  # pragma: no cover - fsspec ships with uproot/dask
            raise ConfigError(f"site {name}: the fsspec package is needed for {url}") from exc
        try:
            # some back ends (ftp, sftp) connect as soon as the file system is made; no listing is kept, since
            # other processes (writers, gc) add and remove files: a listing kept would show what is gone
            self.fs, self.root = fsspec.core.url_to_fs(url, use_listings_cache=False)
        except ImportError as exc:
            raise ConfigError(f"site {name}: {url} needs a package that is not installed ({exc})") from exc
        except Exception as exc:
            raise StorageError(f"site {name} cannot be reached at {url}: {_why(exc)}") from exc

    def _full(self, path: str) -> str:
        return posixpath.join(self.root, path)

    @contextlib.contextmanager
    def _reaching(self, path: str) -> Iterator[None]:
        try:
            yield
        except GiodError:
            raise
        except Exception as exc:
            if _missing(exc):
                raise NotFound(f"file {path} is missing on site {self.name}") from exc
            raise StorageError(f"site {self.name}: {path or 'its root'} cannot be read: {_why(exc)}") from exc

    def create(self, path: str, *, direct: bool = False) -> PendingFile:
        return _FsspecPending(self, check_relpath(path))

    def open(self, path: str) -> BinaryIO:
        with self._reaching(path):
            return self.fs.open(self._full(check_relpath(path)), "rb")  # type: ignore[no-any-return]

    def size(self, path: str) -> int:
        with self._reaching(path):
            return int(self.fs.size(self._full(check_relpath(path))))

    def remove(self, path: str) -> None:
        full = self._full(check_relpath(path))
        try:
            self.fs.rm(full)
        except Exception as exc:
            if not _missing(exc):
                raise StorageError(f"cannot remove {path} on site {self.name}: {_why(exc)}") from exc

    def health(self) -> SiteHealth:
        try:
            self.fs.ls(self.root)
        except Exception as exc:  # noqa: BLE001 - fsspec back ends raise many kinds
            if _missing(exc):
                return SiteHealth(True, "empty (directory not created yet)")
            return SiteHealth(False, f"{type(exc).__name__}: {exc}")
        return SiteHealth(True, "")

    def walk(self) -> Iterator[FileInfo]:
        try:
            with self._reaching(""):
                found = self.fs.find(self.root, detail=True)
        except NotFound:
            return
        prefix = self.root.rstrip("/") + "/"
        for full, info in found.items():
            mtime = info.get("mtime") or info.get("created") or time.time()
            if hasattr(mtime, "timestamp"):
                mtime = mtime.timestamp()
            rel = full[len(prefix) :] if full.startswith(prefix) else full
            yield FileInfo(rel, int(info.get("size") or 0), float(mtime))


_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*", re.ASCII)
_HOSTLESS = ("memory", "file", "local")  # fsspec protocols whose URLs name no host
#: a credential in a URL's query (XRootD's ``authz``, an OAuth ``access_token``)
_TOKEN_PARAMETER = re.compile(r"(?:^|&)(?:authz|access_token|bearer_token)=", re.IGNORECASE)


def check_site_url(name: str, url: str) -> str:
    """``url`` if it has the form of a site URL, else ConfigError saying what is wrong.

    A directory (any path without ``://``), ``file://``, ``http(s)://HOST…``
    (a giod server), or a protocol fsspec knows with its host or bucket
    (``memory://`` names none). A URL may not carry a password or a token: it
    would be stored in the catalog; nor a ``.`` or ``..`` segment in its path.
    Nothing is contacted here.
    """
    if not url or any(ord(c) < 32 or ord(c) == 127 for c in url):
        raise ConfigError(f"site {name}: {url!r} is empty or holds control characters")
    if "://" not in url:
        return url
    scheme = url.split("://", 1)[0].lower()
    if not _SCHEME.fullmatch(scheme):
        raise ConfigError(f"site {name}: {url!r} does not start with a URL scheme")
    if scheme == "file":
        return url
    if scheme == "tape":  # a nearline site: a directory and its library's settings
        from giod.storage.tape.site import parse_tape_url

        parse_tape_url(url)
        return url
    if any(c.isspace() for c in url):
        raise ConfigError(f"site {name}: {url!r} holds spaces")
    try:
        parts = urlsplit(url)  # raises on an unbalanced '[' of an IPv6 address
    except ValueError as exc:
        raise ConfigError(f"site {name}: {url!r} is not a URL ({exc})") from exc
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number in range
    except ValueError as exc:
        raise ConfigError(f"site {name}: {url!r} has an invalid port") from exc
    if parts.password is not None or _TOKEN_PARAMETER.search(parts.query):
        what = "a password" if parts.password is not None else "a token"
        raise ConfigError(f"site {name}: {url!r} holds {what}, which would be stored in the catalog; "
                          "give credentials through the environment or the file system's own configuration")
    if any(segment in (".", "..") for segment in parts.path.split("/")):
        raise ConfigError(f"site {name}: {url!r} holds a '.' or '..' in its path; give the path itself")
    if scheme in XROOTD_SCHEMES:
        from giod.storage.xrootd import available

        reason = available()
        if reason is not None:
            raise ConfigError(f"site {name}: {reason}")
    elif scheme not in ("http", "https"):
        try:
            import fsspec

            fsspec.get_filesystem_class(scheme)
        except ImportError as exc:
            raise ConfigError(f"site {name}: {scheme}:// needs a package that is not installed ({exc})") from exc
        except ValueError as exc:
            raise ConfigError(f"site {name}: no file system known for {scheme}:// (expected a directory, "
                              "http(s)://HOST:PORT of a giod server, or a protocol of fsspec)") from exc
        if scheme in _HOSTLESS:
            return url
    if not parts.hostname:
        raise ConfigError(f"site {name}: {url!r} names no host")
    return url


#: how back ends that raise a bare OSError say that a file is missing (XRootD: kXR_NotFound)
_NOT_FOUND = ("[3011]",)


def _missing(exc: BaseException) -> bool:
    """Whether a back end's error says that the file is not there."""
    return isinstance(exc, FileNotFoundError) or (
        isinstance(exc, OSError) and any(mark in str(exc) for mark in _NOT_FOUND))


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


_KINDS: dict[str, Callable[[str, str], Site]] = {}

#: URL schemes of XRootD servers, served by ``giod.storage.xrootd``
XROOTD_SCHEMES = ("root", "roots", "xroot", "xroots")


def register_site_kind(scheme: str, factory: Callable[[str, str], Site]) -> None:
    """Register the factory that opens sites whose URL starts with ``scheme://``."""
    _KINDS[scheme] = factory


def open_site(name: str, url: str) -> Site:
    """Open the site ``name`` at ``url`` (a directory, ``file://``, a giod server, an XRootD server
    (``root://``), or an fsspec URL)."""
    scheme = url.split("://", 1)[0] if "://" in url else "file"
    if scheme in ("http", "https") and scheme not in _KINDS:
        from giod.storage.remote import RemoteSite  # imported only when a server is used

        register_site_kind("http", RemoteSite)
        register_site_kind("https", RemoteSite)
    if scheme == "tape" and scheme not in _KINDS:
        from giod.storage.tape.site import NearlineSite  # imported only when a nearline site is used

        register_site_kind("tape", NearlineSite)
    if scheme in XROOTD_SCHEMES and scheme not in _KINDS:
        from giod.storage.xrootd import XRootDSite  # imported only when an XRootD server is used

        for s in XROOTD_SCHEMES:
            register_site_kind(s, XRootDSite)
    if scheme in _KINDS:
        return _KINDS[scheme](name, url)
    if scheme == "file":
        return LocalSite(name, url)
    return FsspecSite(name, url)
