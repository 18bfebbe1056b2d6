"""The name and path grammar: no name or path it admits escapes its directory."""

from __future__ import annotations

import posixpath

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from giod.errors import CatalogError, ConfigError, StorageError
from giod.names import MAX_NAME, check_container_path, check_name, check_path, dataset_of_path, is_name
from giod.storage.site import check_relpath

ROOT = "/site/root"

# every name the project's tests, demo, examples and NanoAOD import use
GOOD = ["qcd", "qcd_multijet", "Events", "demo", "syn", "run2026", "ttbar", "bench_x1", "select_3", "raw.tracker",
        "local", "site0", "ttbar-2024", "a", "Z" * MAX_NAME]
BAD = ["", "alpha/sub", "alpha/", "/alpha", "..", ".", ".hidden", "a..b", "alpha/../beta", "a" * (MAX_NAME + 1),
       "1qcd", "_qcd", "-qcd", "qcd alpha", "qcd\n", "qcd\x00", "qcd\\x", "q%2fcd",
       "\uff51cd",  # fullwidth q
       "q\u0441d",  # Cyrillic es, a look-alike of c
       "qcd\u200b",  # zero-width space
       "qcd\u202e",  # right-to-left override
       "\u212acd",  # Kelvin sign, which case-folds to K
       "q\u0301cd",  # combining accent
       "\u0661qcd", "qcd\u0661"]  # Arabic-Indic digit one


@pytest.mark.parametrize("name", GOOD)
def test_names_in_use_are_valid(name: str) -> None:
    assert check_name(name) == name


@pytest.mark.parametrize("name", BAD)
def test_unsafe_names_are_refused(name: str) -> None:
    assert not is_name(name)
    with pytest.raises(ConfigError, match="invalid site name"):
        check_name(name, "site")


def test_non_strings_are_refused() -> None:
    for value in (None, 3, b"qcd", ["qcd"]):
        assert not is_name(value)
        with pytest.raises(ConfigError):
            check_name(value)


def test_sites_confine_with_the_same_function() -> None:
    for path in ("qcd/../x", "../x", "/x", "qcd//x", "qcd/./x", "qcd\\..\\x", "qcd/\x00", ""):
        with pytest.raises(StorageError):
            check_path(path)
        with pytest.raises(StorageError):
            check_relpath(path)


def test_container_paths_stay_in_their_dataset() -> None:
    assert check_container_path("alpha", "alpha/0f/raw.parquet") == "alpha/0f/raw.parquet"
    for path in ("alpha/../beta/0f/raw.parquet", "beta/0f/raw.parquet", "alpha", "alpha/", "alphabet/x.parquet",
                 "./alpha/x.parquet", "/alpha/x.parquet", "alpha//x.parquet", "alpha/x/../../beta/y"):
        with pytest.raises(CatalogError):
            check_container_path("alpha", path)


# ------------------------------------------------------------------ properties

_PIECES = ["..", ".", "", "a", "alpha", "beta", ".a", "a.", "a..b", "%2e%2e", "\\", "\x00", "/", "\u2025", "\uff0e"]
components = st.one_of(st.sampled_from(_PIECES), st.text(alphabet="ab./\\-_%\x00\u2024", max_size=6))
paths = st.one_of(st.lists(components, min_size=1, max_size=6).map("/".join), st.text(max_size=30))
names = st.one_of(st.text(max_size=MAX_NAME + 3), st.text(alphabet="aZ09._-/\\ \n\u0430", min_size=1, max_size=12),
                  st.sampled_from(GOOD + BAD))


def _inside(path: str, directory: str) -> bool:
    full = posixpath.normpath(posixpath.join(directory, path))
    return full.startswith(directory + "/")


@settings(max_examples=400, deadline=None)
@given(names)
@example("..")
@example("alpha/sub")
def test_an_admitted_name_is_one_plain_directory(name: str) -> None:
    if not is_name(name):
        return
    assert name.isascii() and 1 <= len(name) <= MAX_NAME and name[0].isalpha()
    # one component, not "." or "..", not hidden: the directory named by it is a child of the root
    assert "/" not in name and "\\" not in name and not name.startswith(".") and ".." not in name
    assert posixpath.normpath(posixpath.join(ROOT, name)) == f"{ROOT}/{name}"
    assert check_path(name) == name


@settings(max_examples=600, deadline=None)
@given(paths)
@example("alpha/../../etc/passwd")
@example("alpha/%2e%2e/x")
def test_an_admitted_path_stays_in_the_site(path: str) -> None:
    try:
        check_path(path)
    except StorageError:
        return
    assert _inside(path, ROOT)
    assert "\x00" not in path and "\\" not in path


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(["alpha", "beta", "a.b", "qcd_multijet"]), paths)
@example("alpha", "alpha/../beta/x.parquet")
def test_an_admitted_container_path_stays_in_its_dataset(dataset: str, tail: str) -> None:
    for path in (tail, f"{dataset}/{tail}"):
        try:
            check_container_path(dataset, path)
        except CatalogError:
            continue
        assert _inside(path, f"{ROOT}/{dataset}")
        assert dataset_of_path(path) == dataset  # what the server authorises a file by
