"""Sites as replication sees them: their URLs when registered, their health, their tokens.

A site URL is one of

- a local directory (an absolute path or ``file://``), created when registered;
- a site of another giod server: ``http(s)://host:port/files/<site>``, or
  ``http(s)://host:port`` (its nearest site) or ``http(s)://host:port?site=<site>``,
  both turned into the first form when the site is registered;
- any fsspec URL whose protocol fsspec knows (``memory://``, ``s3://``, …).

Tokens for remote sites are never stored in the catalog: a site named
``caltech`` takes its token from ``GIOD_TOKEN_CALTECH``, else from ``GIOD_TOKEN``.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

from giod import config
from giod.errors import ConfigError, GiodError, IntegrityError, NotFound
from giod.names import check_name
from giod.storage.remote import Endpoint
from giod.storage.site import Site, SiteHealth, check_site_url

__all__ = ["SiteHealth", "normalize_site_url", "probe", "site_gone", "site_token"]


def site_token(name: str) -> str | None:
    """The token for the site ``name``: ``GIOD_TOKEN_<NAME>``, else ``GIOD_TOKEN`` (None: no token)."""
    return config.token(name)


def normalize_site_url(name: str, url: str, *, cwd: Path | None = None) -> str:
    """The URL to register for a new site (see the module docstring); ConfigError when unusable.

    A relative local path is taken relative to ``cwd`` (default: the current
    directory), as a shell user means it, and the directory is created.
    """
    check_name(name, "site")  # before a directory is made for it
    if not url.strip():
        raise ConfigError(f"site {name}: give a directory or a URL")
    check_site_url(name, url)
    scheme = url.split("://", 1)[0].lower() if "://" in url else "file"
    if scheme in ("http", "https"):
        return _server_site(name, url)
    if scheme == "tape":
        return _tape_site(name, url, cwd)
    if scheme == "file":
        raw = url[len("file://"):] if url.startswith("file://") else url
        path = Path(raw).expanduser()
        if not path.is_absolute():
            path = (cwd or Path.cwd()) / path
        path = path.resolve()
        if path.exists() and not path.is_dir():
            raise ConfigError(f"site {name}: {path} exists and is not a directory")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"site {name}: cannot create {path}: {exc.strerror or exc}") from exc
        return str(path)
    try:
        import fsspec

        fsspec.get_filesystem_class(scheme)
    except (ImportError, ValueError) as exc:
        raise ConfigError(f"site {name}: no file system known for {scheme}:// ({exc})") from exc
    return url


def _tape_site(name: str, url: str, cwd: Path | None) -> str:
    """A nearline site's URL with its directory made absolute (and created); its settings kept."""
    parts = urlsplit(url)
    path = (cwd or Path.cwd()) / Path(unquote(parts.netloc + parts.path)).expanduser()
    path = path.resolve()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"site {name}: cannot create {path}: {exc.strerror or exc}") from exc
    return f"tape://{quote(str(path))}" + (f"?{parts.query}" if parts.query else "")


def _server_site(name: str, url: str) -> str:
    parts = urlsplit(url)
    if not parts.netloc:
        raise ConfigError(f"site {name}: {url!r} names no server")
    base = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if path.startswith("/files/") and path.count("/") == 2 and not parts.query:
        return base + path
    if path:
        raise ConfigError(f"site {name}: {url!r} is neither http(s)://host:port[?site=NAME] "
                          "nor http(s)://host:port/files/NAME")
    wanted = parse_qs(parts.query).get("site", [None])[0]
    endpoint = Endpoint(base, site_token(name))
    try:
        listing = endpoint.json("GET", "/api/v1/sites", what=f"listing the sites of {base}")
    finally:
        endpoint.close()
    names = [str(s["name"]) for s in sorted(listing, key=lambda s: (int(s.get("distance", 0)), str(s["name"])))]
    if wanted is None:
        if not names:
            raise NotFound(f"site {name}: the server at {base} has no site")
        wanted = names[0]
    elif wanted not in names:
        raise NotFound(f"site {name}: the server at {base} has no site {wanted!r} (it has {', '.join(names)})")
    return f"{base}/files/{quote(wanted, safe='')}"


def probe(site: Site) -> SiteHealth:
    """Ask a site whether it is there (``Site.health``: a directory, a server that answers, a file system)."""
    return site.health()


def site_gone(site: Site, exc: GiodError) -> bool:
    """Whether an error reading a file says the whole site is away, not that the file is damaged.

    A server that does not answer, or a local site whose directory vanished
    (an unmounted disk), takes none of its replicas with it: they are not
    marked bad. A missing file (NotFound) or a checksum, size or page CRC
    mismatch (IntegrityError) on a site that is there is damage.
    """
    if site.away():
        return True
    return not isinstance(exc, (IntegrityError, NotFound))
