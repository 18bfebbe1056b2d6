"""Bearer tokens in the catalog, on both backends: issue, verify, revoke, expire, scopes."""

from __future__ import annotations

import hashlib
import re
import time

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from giod.catalog import Catalog
from giod.catalog.records import TOKEN_SCOPES, TokenRecord
from giod.catalog.tables import tokens
from giod.errors import AuthError, ConfigError, NotFound

SECRET = re.compile(r"giod_(\d+)_[A-Za-z0-9_-]{32,}")


def _rows(catalog: Catalog) -> list[tuple]:
    with catalog._engine.connect() as conn:
        return [tuple(r) for r in conn.execute(select(tokens).order_by(tokens.c.id))]


def test_create_and_verify(catalog: Catalog) -> None:
    before = time.time()
    record, secret = catalog.create_token("read", note="analysis group")
    match = SECRET.fullmatch(secret)
    assert match is not None and int(match.group(1)) == record.id
    assert (record.scope, record.dataset, record.note, record.expires, record.revoked) == (
        "read", None, "analysis group", None, None,
    )  # fmt: skip
    assert before <= record.created <= time.time()
    assert catalog.verify_token(secret) == record
    assert catalog.verify_token(f"  {secret}\n") == record  # pasted with whitespace
    assert catalog.tokens() == [record]
    second, other = catalog.create_token("write", "qcd")
    assert second.id > record.id and other != secret
    assert catalog.verify_token(other) == second
    assert catalog.tokens() == [record, second]


def test_only_a_hash_is_stored(catalog: Catalog) -> None:
    record, secret = catalog.create_token("admin")
    (row,) = _rows(catalog)
    assert secret not in repr(row) and secret.rsplit("_", 1)[1] not in repr(row)
    assert ("sha256:" + hashlib.sha256(secret.encode()).hexdigest()) in row
    assert secret not in repr(record) and secret not in repr(catalog.tokens())


def test_tokens_do_not_bump_the_federation_version(catalog: Catalog) -> None:
    catalog.add_schema("events", "collections: {}\n", "sha256:t")
    version, log = catalog.version(), catalog.versions()
    record, secret = catalog.create_token("write", expires=time.time() + 3600)
    catalog.revoke_token(record.id)
    assert (catalog.version(), catalog.versions()) == (version, log)


def test_wrong_unknown_and_malformed_secrets_look_alike(catalog: Catalog) -> None:
    record, secret = catalog.create_token("read")
    random_part = secret.split("_", 2)[2]
    wrong = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    unknown = secret.replace(f"giod_{record.id}_", f"giod_{record.id + 1000}_", 1)
    for bad in (wrong, unknown, secret[:-20], "giod_0_" + "a" * 43, "Bearer " + secret, "", random_part,
                f"giod_{record.id}_", secret + secret[-1], secret[:-1] + "\udc80", secret.replace("_", "\uff3f")):
        with pytest.raises(AuthError) as info:
            catalog.verify_token(bad)
        assert str(info.value) == "invalid token", bad


def test_revoke(catalog: Catalog) -> None:
    keep, kept = catalog.create_token("read")
    record, secret = catalog.create_token("write", "qcd")
    catalog.revoke_token(record.id)
    with pytest.raises(AuthError, match=f"token {record.id} was revoked"):
        catalog.verify_token(secret)
    assert catalog.verify_token(kept) == keep  # only that one
    listed = {t.id: t for t in catalog.tokens()}
    first = listed[record.id].revoked
    assert first is not None and listed[record.id].state() == "revoked" and listed[keep.id].revoked is None
    catalog.revoke_token(record.id)  # again: keeps the first time
    assert {t.id: t for t in catalog.tokens()}[record.id].revoked == first
    with pytest.raises(NotFound, match="no token 999"):
        catalog.revoke_token(999)


def test_remove(catalog: Catalog) -> None:
    keep, kept = catalog.create_token("read")
    record, secret = catalog.create_token("write", "qcd")
    catalog.revoke_token(record.id)
    catalog.remove_token(record.id)  # a revoked token's row goes too
    assert catalog.tokens() == [keep] and len(_rows(catalog)) == 1
    with pytest.raises(AuthError, match="invalid token"):  # unknown now, like a token never issued
        catalog.verify_token(secret)
    assert catalog.verify_token(kept) == keep
    with pytest.raises(NotFound, match=f"no token {record.id}"):
        catalog.remove_token(record.id)
    catalog.remove_token(keep.id)  # an active one at once
    assert catalog.tokens() == []
    with pytest.raises(AuthError, match="invalid token"):
        catalog.verify_token(kept)


def test_expiry(catalog: Catalog) -> None:
    expires = time.time() + 3600
    record, secret = catalog.create_token("read", expires=expires)
    assert record.expires == expires and catalog.tokens()[0].expires == expires
    assert catalog.verify_token(secret) == record
    assert catalog.verify_token(secret, now=expires - 1) == record
    for later in (expires, expires + 86400):
        with pytest.raises(AuthError, match=f"token {record.id} has expired"):
            catalog.verify_token(secret, now=later)
    assert record.state(now=expires) == "expired" and record.state(now=expires - 1) == "active"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("root",), "scope 'root' is not one of read, write, admin"),
        (("Read",), "scope 'Read' is not one of"),
        (("read", ""), "needs a name"),
        (("admin", "qcd"), "admin tokens cover the whole federation"),
    ],
)
def test_create_refuses_bad_input(catalog: Catalog, args: tuple, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        catalog.create_token(*args)
    assert catalog.tokens() == []


@pytest.mark.parametrize("expires", [0.0, -1.0, float("nan"), float("inf")])
def test_create_refuses_bad_expiry(catalog: Catalog, expires: float) -> None:
    with pytest.raises(ConfigError, match="expiry must be a time in the future"):
        catalog.create_token("read", expires=expires)
    assert catalog.tokens() == []


@pytest.mark.parametrize("years", [10.01, 1e4, 1e12])
def test_create_refuses_an_expiry_past_ten_years(catalog: Catalog, years: float) -> None:
    with pytest.raises(ConfigError, match="at most 3650 days from now"):
        catalog.create_token("read", expires=time.time() + years * 365 * 86400)
    assert catalog.tokens() == []
    record, _ = catalog.create_token("read", expires=time.time() + 3649 * 86400)
    assert [t.id for t in catalog.tokens()] == [record.id]


def _token(scope: str, dataset: str | None = None) -> TokenRecord:
    return TokenRecord(1, scope, dataset, "", 0.0, None, None)


@pytest.mark.parametrize("held", TOKEN_SCOPES)
@pytest.mark.parametrize("needed", TOKEN_SCOPES)
def test_scopes_imply_the_weaker_ones(held: str, needed: str) -> None:
    implied = {"read": {"read"}, "write": {"read", "write"}, "admin": {"read", "write", "admin"}}
    token = _token(held)
    assert token.allows(needed, None) is (needed in implied[held])
    assert token.allows(needed, "qcd") is (needed in implied[held])


def test_a_dataset_token_reads_listings_and_its_own_data_only() -> None:
    reader, writer = _token("read", "qcd"), _token("write", "qcd")
    assert reader.allows("read", None)  # listings of datasets and sites
    assert reader.allows("read", "qcd") and not reader.allows("read", "ttbar")
    assert not reader.allows("write", "qcd")
    assert writer.allows("write", "qcd") and writer.allows("read", "qcd")
    assert not writer.allows("write", "ttbar") and not writer.allows("read", "ttbar")
    assert not writer.allows("write", None)  # federation-wide changes (adding a site)
    for token in (reader, writer, _token("admin", "qcd")):
        assert not token.allows("admin", None) and not token.allows("admin", "qcd")
    assert _token("admin").allows("admin", None)
    with pytest.raises(ConfigError, match="scope 'delete'"):
        reader.allows("delete", "qcd")


def test_verify_gives_the_dataset_restriction(catalog: Catalog) -> None:
    _, secret = catalog.create_token("write", "qcd")
    token = catalog.verify_token(secret)
    assert token.allows("write", "qcd") and not token.allows("write", "ttbar")


_NOT_STRINGS = st.one_of(st.none(), st.integers(), st.binary(), st.lists(st.text(max_size=3)))
_SHAPED = st.from_regex(r"\Agiod_[0-9]{1,25}_[A-Za-z0-9_-]{0,140}\Z")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.text(), _SHAPED, _NOT_STRINGS))
def test_malformed_secrets_raise_only_auth_error(catalog: Catalog, candidate: object) -> None:
    with pytest.raises(AuthError, match="^invalid token$"):
        catalog.verify_token(candidate)  # type: ignore[arg-type]


def test_any_changed_character_is_refused(catalog: Catalog) -> None:
    _, secret = catalog.create_token("read")

    @settings(max_examples=150, deadline=None)
    @given(st.integers(0, len(secret) - 1), st.characters())
    def check(i: int, c: str) -> None:
        assume(c != secret[i])
        with pytest.raises(AuthError, match="^invalid token$"):
            catalog.verify_token(secret[:i] + c + secret[i + 1 :])

    check()
