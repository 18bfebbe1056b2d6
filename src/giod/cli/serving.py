"""``giod serve`` and ``giod token``: publishing a federation over HTTP, and who may use it."""

from __future__ import annotations

import click

from giod.cli.base import _number_id, _open, federation_option, hidden_alias, main
from giod.cli.tables import _table
from giod.errors import ConfigError


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (all interfaces: 0.0.0.0).")
@click.option("--port", default=8470, show_default=True, type=click.IntRange(0, 65535), help="Port (0: any free one).")
@click.option("--anonymous-read", is_flag=True, help="Let requests without a token read (never write).")
@click.option("--certfile", type=click.Path(exists=True, dir_okay=False), help="TLS certificate (PEM).")
@click.option("--keyfile", type=click.Path(exists=True, dir_okay=False), help="TLS private key (PEM).")
@federation_option
def serve(host: str, port: int, anonymous_read: bool, certfile: str | None, keyfile: str | None,
          federation: str) -> None:
    """Serve the federation over HTTP: catalog API, file ranges, queries, metrics.

    Example: giod serve --port 8470   (then giod.open("http://127.0.0.1:8470", token=…))
    """
    from giod.server.app import serve as run

    if bool(certfile) != bool(keyfile):
        raise ConfigError("TLS needs both --certfile and --keyfile")
    _open(federation).close()  # a missing federation is one clear error here, not a traceback later
    scheme = "https" if certfile else "http"

    def ready(bound: int) -> None:
        click.echo(f"giod serving {federation} at {scheme}://{host}:{bound}", err=True)  # the line scripts wait for
        # a server on every interface is browsed at an address of this host: the loopback one here
        near = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host  # noqa: S104 - compared, not bound
        click.echo(f"event display: {scheme}://{near}:{bound}/display", err=True)
        if anonymous_read:
            click.echo("anonymous reading is on: requests without a token can read every dataset (never write)",
                       err=True)

    run(federation, host=host, port=port, anonymous_read=anonymous_read, certfile=certfile, keyfile=keyfile,
        ready=ready)


@main.group()
def token() -> None:
    """Bearer tokens for `giod serve` (read / write / admin, per dataset)."""


_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def _duration(text: str) -> float:
    """Seconds in ``30d``, ``12h``, ``15m``, ``3600s`` or ``2w``."""
    import re

    from giod.catalog.tokens import MAX_TOKEN_SECONDS

    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text, re.ASCII)
    if match is None or float(match.group(1)) <= 0:
        raise ConfigError(f"--expires-in {text!r}: give a positive number and a unit s, m, h, d or w, e.g. 30d")
    seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    if seconds > MAX_TOKEN_SECONDS:
        raise ConfigError(f"--expires-in {text!r}: at most {MAX_TOKEN_SECONDS // 86400}d (ten years); "
                          "leave it out for a token that does not expire")
    return seconds


def _when(t: float | None) -> str:
    import datetime

    if t is None:
        return "never"
    try:
        return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):  # a row stored before expiries were bounded
        return f"not a date ({t!r})"


@token.command("create")
@click.option("--scope", metavar="read|write|admin", help="What the token may do; each scope implies the weaker ones.")
@click.option("--dataset", default=None, help="Restrict the token to this dataset (default: every dataset).")
@click.option("--expires-in", "expires_in", default=None, metavar="DURATION",
              help="Lifetime such as 30d, 12h or 3600s (default: no expiry).")
@click.option("--note", default="", help="Who or what the token is for.")
@federation_option
def token_create(scope: str | None, dataset: str | None, expires_in: str | None, note: str, federation: str) -> None:
    """Issue a token; its secret is printed once, alone on the last line.

    Example: giod token create --scope write --dataset qcd --expires-in 30d --note daq
    """
    import time

    if scope is None:
        raise ConfigError("give the token a scope: --scope read, write or admin")
    expires = None if expires_in is None else time.time() + _duration(expires_in)
    fed = _open(federation)
    rec, secret = fed.catalog.create_token(scope, dataset, expires=expires, note=note)
    where = "every dataset" if rec.dataset is None else f"dataset {rec.dataset}"
    click.echo(f"token {rec.id}: {rec.scope} on {where}, expires {_when(rec.expires)}" + (" UTC" if rec.expires else "")
               + (f" ({rec.note})" if rec.note else ""))
    if rec.dataset is not None and rec.dataset not in fed.datasets():
        click.echo(f"note: dataset {rec.dataset} does not exist (yet); the token covers it once it does")
    click.echo("the secret below is shown only this once; the catalog keeps only its hash:")
    click.echo(secret)


@token.command("ls")
@federation_option
def token_ls(federation: str) -> None:
    """List tokens (never their secrets)."""
    rows = [[t.id, t.scope, t.dataset or "all", t.state(), _when(t.created), _when(t.expires), t.note]
            for t in _open(federation).catalog.tokens()]
    _table("tokens", ["id", "scope", "dataset", "state", "created (UTC)", "expires (UTC)", "note"], rows)


hidden_alias(token, "list", token_ls)


@token.command("revoke")
@click.argument("token_id", metavar="ID")
@federation_option
def token_revoke(token_id: str, federation: str) -> None:
    """Revoke a token by its id: it stops working at once.

    Example: giod token revoke 3
    """
    number = _number_id(token_id, "token", "giod token ls")
    _open(federation).catalog.revoke_token(number)
    click.echo(f"token {number} revoked")


@token.command("rm")
@click.argument("token_id", metavar="ID")
@federation_option
def token_rm(token_id: str, federation: str) -> None:
    """Remove a token by its id: its row is deleted and its secret stops working.

    Example: giod token rm 3
    """
    number = _number_id(token_id, "token", "giod token ls")
    _open(federation).catalog.remove_token(number)
    click.echo(f"token {number} removed")
