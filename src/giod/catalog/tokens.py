"""Bearer tokens: issued, listed, revoked, removed and verified against the catalog.

A token's secret is ``giod_<id>_<43 random URL-safe characters>`` (256 bits
from ``secrets``). The catalog keeps only ``sha256:<hex>`` of the whole
secret. An unsalted fast hash is enough here, unlike for passwords: with 256
random bits nobody can guess a secret from its hash, and a precomputed table
cannot cover that space, so salt or a slow KDF (bcrypt, argon2) would add
nothing but tens of milliseconds of CPU to every authenticated request. The id in the
secret finds the row in one primary-key lookup; the hashes are then
compared with ``hmac.compare_digest``, so the time taken does not tell how
many leading characters of a guess were right.

Tokens are access control, not federation content: issuing or revoking one
is a plain transaction that does not bump the federation version, and a
revocation holds for every reader at once, whatever version it has pinned.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import secrets
import time

from sqlalchemy import Connection, delete, insert, select, union, update

from giod.catalog.engine import Transactions
from giod.catalog.records import TOKEN_SCOPES, TokenRecord, VersionRecord
from giod.catalog.rows import RowError, parse_rows, token_record
from giod.catalog.tables import containers, databases, dataset_schemas, datasets, tokens, versions
from giod.errors import AuthError, ConfigError, NotFound
from giod.names import check_name, is_name

__all__ = ["MAX_TOKEN_SECONDS", "TokenMethods"]

#: The longest a token may live: ten years. Longer is as good as never (leave out the expiry),
#: and a time far enough out is not a date any more.
MAX_TOKEN_SECONDS = 3650 * 86400

PREFIX = "giod"
_RANDOM_BYTES = 32  # -> 43 URL-safe characters
# ASCII only (no \d: it matches every Unicode digit); 18 digits keep the id within BIGINT.
_SECRET = re.compile(r"giod_([1-9][0-9]{0,17})_([A-Za-z0-9_-]{32,128})", re.ASCII)
_INVALID = "invalid token"  # the one message for malformed, unknown and wrong tokens
_DUMMY = "sha256:" + "0" * 64  # compared against when the id is unknown, to take the same time


def _digest(secret: str) -> str:
    return "sha256:" + hashlib.sha256(secret.encode("ascii")).hexdigest()


class TokenMethods(Transactions):
    """``create_token``, ``tokens``, ``revoke_token``, ``remove_token``, ``verify_token`` and the ownership
    lookups a server authorises by (``dataset_of_container``, ``datasets_of_schema``, ``dataset_names``,
    ``dataset_versions``) of ``Catalog``."""

    def create_token(
        self, scope: str, dataset: str | None = None, *, expires: float | None = None, note: str = ""
    ) -> tuple[TokenRecord, str]:
        """Issue a token; returns its record and its secret (shown this once, never stored).

        ``scope`` is ``read``, ``write`` or ``admin``; ``dataset`` restricts
        the token to one dataset by name (it need not exist yet, so that a
        writer can be given a token for the dataset it will create); admin
        tokens cover the whole federation. ``expires`` is a unix time at most
        :data:`MAX_TOKEN_SECONDS` from now. ConfigError for a dataset name outside
        the name grammar (``giod.names``), unless a dataset of that name exists
        from before the grammar.
        """
        if scope not in TOKEN_SCOPES:
            raise ConfigError(f"token scope {scope!r} is not one of {', '.join(TOKEN_SCOPES)}")
        if dataset is not None and not dataset:
            raise ConfigError("a token's dataset needs a name (or None for every dataset)")
        if dataset is not None and scope == "admin":
            raise ConfigError("admin tokens cover the whole federation: leave out the dataset")
        now = time.time()
        if expires is not None and not (math.isfinite(expires) and expires > now):
            raise ConfigError(f"a token's expiry must be a time in the future, not {expires!r}")
        if expires is not None and expires - now > MAX_TOKEN_SECONDS:
            raise ConfigError(
                f"a token's expiry may be at most {MAX_TOKEN_SECONDS // 86400} days from now "
                "(leave it out for a token that does not expire)"
            )
        random_part = secrets.token_urlsafe(_RANDOM_BYTES)

        def work(conn: Connection) -> tuple[TokenRecord, str]:
            if dataset is not None and not is_name(dataset):
                # a dataset named before the grammar keeps its name, and its holders need tokens for it
                known = select(datasets.c.id).where(datasets.c.name == dataset).limit(1)
                if conn.execute(known).first() is None:
                    check_name(dataset, "dataset")
            # The secret holds the id, known only after the insert: insert, then set the hash.
            row = {
                "note": note, "scope": scope, "dataset": dataset, "hash": _DUMMY,
                "created": now, "expires": expires,
            }  # fmt: skip
            new = int(conn.execute(insert(tokens).values(row).returning(tokens.c.id)).scalar_one())
            secret = f"{PREFIX}_{new}_{random_part}"
            conn.execute(update(tokens).where(tokens.c.id == new).values(hash=_digest(secret)))
            return TokenRecord(new, scope, dataset, note, now, expires, None), secret

        return self._run(work, write=True)

    def tokens(self) -> list[TokenRecord]:
        """Every token, revoked and expired ones included, by id; a row that does not parse is left out,
        with a warning (``giod token rm`` removes it)."""
        q = select(tokens).order_by(tokens.c.id)
        return list(parse_rows(self.url, self._read(lambda conn: conn.execute(q).all()), token_record))

    def revoke_token(self, token_id: int) -> None:
        """Revoke a token from now on; NotFound if there is none. Revoking twice keeps the first time."""

        def work(conn: Connection) -> None:
            found = conn.execute(select(tokens.c.revoked).where(tokens.c.id == token_id)).first()
            if found is None:
                raise NotFound(f"no token {token_id}")
            if found.revoked is None:
                conn.execute(update(tokens).where(tokens.c.id == token_id).values(revoked=time.time()))

        self._run(work, write=True)

    def remove_token(self, token_id: int) -> None:
        """Delete a token's row, whatever its state; NotFound if there is none.

        The secret is then unknown, as if never issued. Unlike a revocation,
        nothing is kept to list: remove tokens that are no longer of interest
        (revoked, expired, or a row that does not parse).
        """

        def work(conn: Connection) -> None:
            if conn.execute(delete(tokens).where(tokens.c.id == token_id)).rowcount == 0:
                raise NotFound(f"no token {token_id}")

        self._run(work, write=True)

    def verify_token(self, secret: str, *, now: float | None = None) -> TokenRecord:
        """The record of the valid token whose secret this is.

        AuthError for anything else, with one message for a malformed,
        unknown or wrong secret; only the holder of the right secret of a
        revoked or expired token learns that it was revoked or has expired.
        """
        if not isinstance(secret, str):
            raise AuthError(_INVALID)
        match = _SECRET.fullmatch(secret.strip())
        if match is None:
            raise AuthError(_INVALID)
        token_id = int(match.group(1))
        q = select(tokens).where(tokens.c.id == token_id)
        row = self._read(lambda conn: conn.execute(q).first())
        stored = _DUMMY if row is None else str(row.hash)
        same = hmac.compare_digest(stored.encode("ascii"), _digest(match.group(0)).encode("ascii"))
        if row is None or not same:
            raise AuthError(_INVALID)
        try:
            record = token_record(row)
        except RowError as exc:  # only the holder of the right secret learns this
            raise AuthError(f"token {token_id} cannot be read from the catalog: {exc}") from exc
        state = record.state(now)
        if state != "active":
            raise AuthError(f"token {record.id} {'was revoked' if state == 'revoked' else 'has expired'}")
        return record

    # -- what a restricted token may see: the datasets an object belongs to ----------

    def dataset_of_container(self, container_id: int) -> str:
        """The name of the dataset a container belongs to (deleted ones too); NotFound if unknown."""
        c, d, ds = containers, databases, datasets
        q = (
            select(ds.c.name)
            .select_from(c.join(d, d.c.id == c.c.database_id).join(ds, ds.c.id == d.c.dataset_id))
            .where(c.c.id == container_id)
        )
        name = self._read(lambda conn: conn.execute(q).scalar())
        if name is None:
            raise NotFound(f"no container {container_id}")
        return str(name)

    def datasets_of_schema(self, schema_id: int) -> set[str]:
        """The names of the datasets that have or had this schema (deleted ones too)."""
        q = (
            select(datasets.c.name)
            .join(dataset_schemas, dataset_schemas.c.dataset_id == datasets.c.id)
            .where(dataset_schemas.c.schema_id == schema_id)
            .distinct()
        )
        return set(self._read(lambda conn: conn.execute(q).scalars().all()))

    def dataset_names(self) -> set[str]:
        """Every dataset name the catalog holds, deleted ones included until purged."""
        q = select(datasets.c.name).distinct()
        return set(self._read(lambda conn: conn.execute(q).scalars().all()))

    def dataset_versions(self, name: str, limit: int = 100, *, after: int | None = None) -> list[VersionRecord]:
        """The latest ``limit`` versions that changed dataset ``name`` (any incarnation), newest first.

        A version changed it when it created, evolved or deleted it, or committed, extended or
        deleted one of its databases. ``after``: only versions above it.
        """
        d, db, c = datasets, databases, containers
        own = db.c.dataset_id.in_(select(d.c.id).where(d.c.name == name))
        touched = union(
            select(d.c.created_version.label("v")).where(d.c.name == name),
            select(d.c.deleted_version.label("v")).where(d.c.name == name, d.c.deleted_version.is_not(None)),
            select(dataset_schemas.c.version.label("v")).where(dataset_schemas.c.dataset_id.in_(
                select(d.c.id).where(d.c.name == name))),
            select(db.c.created_version.label("v")).where(own),
            select(db.c.deleted_version.label("v")).where(own, db.c.deleted_version.is_not(None)),
            select(c.c.created_version.label("v")).join(db, db.c.id == c.c.database_id).where(own),
            select(c.c.deleted_version.label("v")).join(db, db.c.id == c.c.database_id)
            .where(own, c.c.deleted_version.is_not(None)),
        ).subquery()
        q = select(versions).where(versions.c.version.in_(select(touched.c.v)))
        if after is not None:
            q = q.where(versions.c.version > after)
        q = q.order_by(versions.c.version.desc()).limit(limit)
        rows = self._read(lambda conn: conn.execute(q).all())
        return [VersionRecord(int(r.version), float(r.created), r.description) for r in rows]
