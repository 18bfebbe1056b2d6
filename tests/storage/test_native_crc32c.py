"""CRC-32C through the fastest call that lets go of Python's lock: the crc32c package where it computes in
hardware, else google_crc32c's library, else google_crc32c itself; always google_crc32c's value."""

from __future__ import annotations

import ctypes
import sys
import types

import google_crc32c
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from giod.storage import checksum
from giod.storage.checksum import NATIVE_BYTES, Checksum, extend
from giod.storage.formats.arrow.frame import crc32c

_DATA = np.random.default_rng(7).integers(0, 256, size=4 * NATIVE_BYTES + 4099, dtype=np.uint8)


def _forms(view: np.ndarray) -> list[object]:
    """The same bytes as each caller hands them: bytes, numpy, memoryview, bytearray, an Arrow buffer."""
    return [view.tobytes(), view, memoryview(view), bytearray(view.tobytes()), pa.py_buffer(view)]


def test_the_native_call_is_there() -> None:
    # google_crc32c's C wheels carry the library: without it every large CRC would keep the lock again
    if google_crc32c.implementation != "c":
        pytest.skip("google_crc32c is its pure-Python fallback here: no C library to call")
    assert checksum._NATIVE is not None


@pytest.fixture(params=["fastest", "google's library"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each way a CRC-32C is computed here: the crc32c package (where installed), google_crc32c's library."""
    if request.param == "fastest" and checksum._FASTEST is None:
        pytest.skip("the crc32c package is not installed here, or computes in software")
    if request.param != "fastest":
        monkeypatch.setattr(checksum, "_FASTEST", None)
    return str(request.param)


def test_the_fastest_is_there() -> None:
    # a dependency of giod: without it every check of a read costs ~1.8 times as much
    crc32c = pytest.importorskip("crc32c")
    if not crc32c.hardware_based:
        pytest.skip("the crc32c package computes in software on this processor")
    assert checksum._FASTEST is crc32c.crc32c


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(min_value=0, max_value=len(_DATA)), st.integers(min_value=0, max_value=len(_DATA)),
       st.integers(min_value=0, max_value=2**32 - 1))
def test_the_same_value_as_google_crc32c(path: str, start: int, length: int, crc: int) -> None:
    view = _DATA[start:start + length]  # any address, any length, either side of NATIVE_BYTES
    want = int(google_crc32c.extend(crc, view))
    for form in _forms(view):
        assert extend(crc, form) == want


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=2 * NATIVE_BYTES), min_size=1, max_size=6))
def test_a_running_checksum_is_the_whole_one(cuts: list[int]) -> None:
    c, at = Checksum(), 0
    for n in cuts:
        c.update(memoryview(_DATA[at:at + n]))
        at += n
    assert c.hexdigest() == f"crc32c:{google_crc32c.value(_DATA[:at].tobytes()):08x}"
    assert crc32c(_DATA[:at]) == google_crc32c.value(_DATA[:at].tobytes())


def test_every_contiguous_buffer_takes_the_fastest(monkeypatch: pytest.MonkeyPatch) -> None:
    fastest = checksum._FASTEST
    if fastest is None:
        pytest.skip("the crc32c package is not installed here, or computes in software")
    calls: list[int] = []
    monkeypatch.setattr(checksum, "_FASTEST", lambda data, crc: (calls.append(len(data)), fastest(data, crc))[1])
    for form in _forms(_DATA[:5]):
        assert extend(0, form) == google_crc32c.value(_DATA[:5].tobytes())
    assert calls == [5] * 5
    with pytest.raises(ValueError, match="contiguous"):  # not the fastest's: google_crc32c refuses it
        extend(0, _DATA[:2 * NATIVE_BYTES:2])
    assert calls == [5] * 5


@pytest.mark.parametrize(("hardware", "value"), [(True, 0), (False, None)])
def test_a_crc32c_package_that_is_wrong_or_in_software_is_not_used(monkeypatch: pytest.MonkeyPatch,
                                                                   hardware: bool, value: int | None) -> None:
    fake = types.ModuleType("crc32c")
    right = google_crc32c.extend
    fake.hardware_based = hardware  # type: ignore[attr-defined]
    fake.crc32c = lambda data, crc=0: right(crc, data) if value is None else value  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "crc32c", fake)
    assert checksum._fastest() is None
    monkeypatch.setitem(sys.modules, "crc32c", None)  # not installed: ImportError
    assert checksum._fastest() is None


def test_large_buffers_take_the_native_call_small_ones_google_crc32c(monkeypatch) -> None:
    monkeypatch.setattr(checksum, "_FASTEST", None)
    calls: list[int] = []
    native = checksum._NATIVE
    monkeypatch.setattr(checksum, "_NATIVE", lambda crc, data, n: (calls.append(n), native(crc, data, n))[1])
    for form in _forms(_DATA[:NATIVE_BYTES]):
        extend(0, form)
    assert calls == [NATIVE_BYTES] * 5
    calls.clear()
    extend(0, _DATA[:NATIVE_BYTES - 1])
    assert calls == []
    with pytest.raises(ValueError, match="contiguous"):  # refused as google_crc32c refuses it, not misread
        extend(0, _DATA[:2 * NATIVE_BYTES:2])
    assert calls == []


def test_without_the_library_google_crc32c_gives_the_value(monkeypatch) -> None:
    def missing(*args: object, **kwargs: object) -> None:
        raise OSError("no such library")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    assert checksum._native() is None
    monkeypatch.setattr(checksum, "_NATIVE", None)
    monkeypatch.setattr(checksum, "_FASTEST", None)
    assert extend(3, _DATA) == google_crc32c.extend(3, _DATA)


def test_a_library_that_gives_another_value_is_not_used(monkeypatch) -> None:
    class Wrong:
        def __init__(self, *args: object) -> None:
            self.crc32c_extend = self

        def __call__(self, crc: int, data: object, n: int) -> int:
            return 0

    monkeypatch.setattr(ctypes, "CDLL", Wrong)
    assert checksum._native() is None


@pytest.mark.parametrize("n", [0, 1, NATIVE_BYTES - 1, NATIVE_BYTES, NATIVE_BYTES + 1])
def test_lengths_at_the_threshold(path: str, n: int) -> None:
    assert extend(0, _DATA[:n]) == google_crc32c.value(_DATA[:n].tobytes())


def test_without_the_crc32c_package_a_federation_is_written_and_read(tmp_path) -> None:
    """The crc32c package is a speed-up: a Python without it writes, checks and reads with google_crc32c."""
    import subprocess
    import textwrap

    code = textwrap.dedent("""
        import sys
        sys.modules["crc32c"] = None  # as if not installed
        import giod
        from giod.storage import checksum
        from giod.store.consistency import fsck
        from giod.testing import synthetic
        assert checksum._FASTEST is None
        with giod.open(sys.argv[1], create=True) as fed:
            ds = fed.create_dataset("qcd", synthetic.schema())
            with ds.writer(database_events=50) as w:
                w.append(synthetic.events(120, seed=3))
            got = ds.read(["hits"])
            print(len(got), len(fsck(fed.store, checksums=True).problems))
    """)
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "fed")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["120", "0"]
