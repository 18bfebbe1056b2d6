"""The form of a site URL: any text is either accepted as it is or refused with one ConfigError."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from giod.errors import ConfigError
from giod.storage.site import FsspecSite, check_site_url

_SCHEMES = st.sampled_from(["http", "https", "ftp", "sftp", "memory", "file", "s3", "nofs", "HTTP", "1x", ""])
_PARTS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)


@settings(max_examples=300, deadline=None)
@given(scheme=_SCHEMES, host=_PARTS, rest=_PARTS)
def test_any_text_is_accepted_unchanged_or_refused_with_a_config_error(scheme: str, host: str, rest: str) -> None:
    url = f"{scheme}://{host}/{rest}"
    try:
        accepted = check_site_url("s", url)
    except ConfigError as exc:
        assert str(exc).startswith("site s: ")
        return
    assert accepted == url
    assert not any(ord(c) < 32 for c in url)
    if scheme == "file":  # a path: any characters but control characters
        return
    parts = urlsplit(url)
    assert parts.password is None and not any(c.isspace() for c in url)
    if scheme.lower() not in ("memory", "file"):
        assert parts.hostname


@settings(max_examples=100, deadline=None)
@given(path=_PARTS.filter(lambda p: "://" not in p))
def test_a_directory_is_any_path_without_control_characters(path: str) -> None:
    if not path or any(ord(c) < 32 or ord(c) == 127 for c in path):
        with pytest.raises(ConfigError):
            check_site_url("s", path)
    else:
        assert check_site_url("s", path) == path


def test_a_file_system_that_cannot_be_reached_is_a_storage_error() -> None:
    from giod.errors import StorageError

    with pytest.raises(StorageError, match="site far cannot be reached at ftp://nosuchhost.invalid/x: gaierror"):
        FsspecSite("far", "ftp://nosuchhost.invalid/x")
