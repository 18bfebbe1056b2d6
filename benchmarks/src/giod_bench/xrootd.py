"""The XRootD peer of the remote-read benchmarks: an ``xrootd`` server on loopback, read with uproot.

XRootD is what HEP sites serve ROOT files with, so a giod server reading
through the same latency as an XRootD server is the fair comparison::

    with XRootDServer(directory) as xrd:
        pt = read_branch(xrd.url("events.root"), "events", "jet_pt")

The server is the ``xrootd`` program (Debian package ``xrootd-server``); the
client is uproot through ``fsspec-xrootd`` (PyPI, with the ``xrootd`` Python
bindings). ``xrootd`` refuses to run as root: as root it is started with
``-R nobody``, so the exported directory and everything above it must be
readable by others. The server only accepts connections from this host.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from giod.errors import ConfigError, MissingDependency, StorageError

#: The user a root process starts xrootd as.
UNPRIVILEGED_USER = "nobody"
_READY = "initialization completed"


def missing() -> str | None:
    """Why an XRootD server and client cannot be used here, or None when they can."""
    if shutil.which("xrootd") is None:
        return "the xrootd server is not installed (Debian package xrootd-server)"
    try:
        import fsspec_xrootd  # noqa: F401
        from XRootD import client  # noqa: F401
    except ImportError as exc:
        return f"the XRootD client for uproot is not installed (pip install fsspec-xrootd): {exc}"
    return None


class XRootDServer:
    """An ``xrootd`` serving ``directory`` on a free loopback port, as a context manager: read-only, or
    ``writable`` (then the directory must be writable by the server's user).

    The server computes CRC-32C checksums on request (``xrootd.chksum``) and,
    when ``xrdcp`` is installed and ``third_party`` is true, makes third-party copies (``ofs.tpc``).
    Paths in its URLs are relative to ``directory``
    (``root://127.0.0.1:PORT//events.root``), as on a site whose files live
    under a local root. Starting raises MissingDependency without the
    ``xrootd`` program, ConfigError when the directory is not readable by the
    server's user, StorageError when the server does not come up within
    ``timeout`` seconds.
    """

    def __init__(self, directory: str | os.PathLike[str], *, port: int | None = None, timeout: float = 30.0,
                 writable: bool = False, third_party: bool = True):
        self.directory = Path(directory).resolve()
        self.writable = writable
        self.third_party = third_party
        self.host = "127.0.0.1"
        self.port = 0
        self.requested_port = port
        self.timeout = timeout
        self._run: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    @property
    def log(self) -> Path:
        """The server's log file (removed with its working directory when it stops)."""
        if self._run is None:
            raise ConfigError("the XRootD server is not running")
        return self._run / "giod" / "log"

    def url(self, path: str | os.PathLike[str]) -> str:
        """The ``root://`` URL of ``path``: a file under the directory, absolute or relative to it."""
        absolute = (self.directory / path).resolve()
        if not absolute.is_relative_to(self.directory):
            raise ConfigError(f"{absolute} is not under the served directory {self.directory}")
        return f"root://{self.host}:{self.port}//{absolute.relative_to(self.directory).as_posix()}"

    def __enter__(self) -> XRootDServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        if self._process is not None:
            raise ConfigError("the XRootD server is already running")
        program = shutil.which("xrootd")
        if program is None:
            raise MissingDependency("the xrootd server is not installed (Debian package xrootd-server)")
        if not self.directory.is_dir():
            raise ConfigError(f"cannot serve {self.directory}: not a directory")
        as_root = os.geteuid() == 0
        if as_root:
            _check_readable_by_others(self.directory)
        run = self._run = Path(tempfile.mkdtemp(prefix="giod-xrootd-"))
        try:
            if as_root:
                shutil.chown(run, user=UNPRIVILEGED_USER)
            config = run / "xrootd.cfg"
            config.write_text(
                f"oss.localroot {self.directory}\n"
                f"all.export /{'' if self.writable else ' r/o'}\n"
                f"all.adminpath {run / 'admin'}\n"
                f"all.pidpath {run / 'admin'}\n"
                # xrootd cannot bind to one address: refuse every host but this one instead
                "xrd.allow host localhost\n"
                # giod's checksum, computed by the server on request (uploads and replicas checked in place)
                "xrootd.chksum max 4 crc32c\n"
                + (f"ofs.tpc pgm {xrdcp} --server\n" if self.third_party and (xrdcp := shutil.which("xrdcp")) else "")
            )
            config.chmod(0o644)
            attempts = 1 if self.requested_port is not None else 3
            for attempt in range(attempts):
                port = self.requested_port if self.requested_port is not None else _free_port()
                argv = [program, "-I", "v4", "-p", str(port), "-c", str(config), "-l", str(run / "log"), "-n", "giod"]
                if as_root:
                    argv[1:1] = ["-R", UNPRIVILEGED_USER]
                process = subprocess.Popen(
                    argv, cwd=run, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
                )
                try:
                    _wait_ready(process, self.log, port, self.timeout)
                except _PortTaken:
                    _stop(process)
                    if attempt + 1 < attempts:
                        continue
                    raise StorageError(f"xrootd could not listen on port {port}: it is taken") from None
                except BaseException:
                    _stop(process)
                    raise
                self._process, self.port = process, port
                return
        except BaseException:
            self._run = None
            shutil.rmtree(run, ignore_errors=True)
            raise

    def stop(self) -> None:
        """Stop the server and remove its working directory."""
        process, self._process = self._process, None
        if process is not None:
            _stop(process)
        if self._run is not None:
            shutil.rmtree(self._run, ignore_errors=True)
            self._run = None


class _PortTaken(Exception):
    pass


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(process: subprocess.Popen[bytes], log: Path, port: int, timeout: float) -> None:
    """Wait until the server's log says it is up and its port accepts a connection."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if process.poll() is not None:
            assert process.stderr is not None
            text += process.stderr.read().decode(errors="replace")
            if "already in use" in text.lower():
                raise _PortTaken
            raise StorageError(f"xrootd exited with status {process.returncode}: {_tail(text)}")
        if "xrootd giod@" in text and _READY in text.split("xrootd giod@", 1)[1]:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return
            except OSError:
                pass
        time.sleep(0.05)
    raise StorageError(f"xrootd did not start within {timeout:g} s: {_tail(log.read_text() if log.exists() else '')}")


def _tail(text: str, lines: int = 3) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:]) or "no output"


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stderr is not None:
        process.stderr.close()


def _check_readable_by_others(directory: Path) -> None:
    """The server runs as another user: the directory and its parents must let it through."""
    for d in [directory, *directory.parents]:
        mode = d.stat().st_mode
        need = stat.S_IXOTH | (stat.S_IROTH if d == directory else 0)
        if mode & need != need:
            raise ConfigError(
                f"xrootd runs as {UNPRIVILEGED_USER} and cannot read {directory}: "
                f"{d} has mode {stat.filemode(mode)} (chmod o+rx it)"
            )


def read_branch(url: str, tree: str, branch: str, *, library: str = "ak") -> Any:
    """One branch (or collection) of ``tree`` in the ROOT file at ``url`` (``root://…`` or a path), with uproot."""
    if url.startswith("root://"):
        reason = missing()
        if reason is not None:
            raise MissingDependency(reason)
    import uproot

    try:
        with uproot.open(url) as file:
            return file[tree][branch].array(library=library)
    except (OSError, KeyError) as exc:
        raise StorageError(f"cannot read {tree}/{branch} from {url}: {exc}") from exc
