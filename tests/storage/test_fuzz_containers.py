"""The structure-aware fuzzer (``giod_bench.fuzz``): containers mutated in offsets, relation values, lengths,
metadata and footer, every checksum recomputed, read through every path in a child under an address-space
limit, for Arrow containers (uncompressed and compressed) and Parquet ones (pages changed in their data,
levels, header sizes and counts, footer; page CRCs recomputed). Every outcome is valid data or a GiodError,
never another exception or a signal.

``GIOD_FUZZ_CASES`` sets the number of cases (a few here; ``giod bench fuzz --cases N`` for long runs).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import giod
from giod.errors import GiodError
from giod.storage.formats.arrow.served import served_ranges
from giod_bench import crafted, fuzz

CASES = int(os.environ.get("GIOD_FUZZ_CASES", "12"))


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, Path]:
    root = tmp_path_factory.mktemp("fuzz")
    return {False: fuzz.base(root / "plain"), True: fuzz.base(root / "packed", compressed=True)}


@pytest.fixture(scope="module")
def parquet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fuzz.base(tmp_path_factory.mktemp("fuzz-parquet") / "parquet", container_format="parquet")


@pytest.fixture(scope="module")
def child() -> Iterator[fuzz.Child]:
    c = fuzz.Child()
    yield c
    c.close()


mutations = st.builds(fuzz.Mutation, kind=st.sampled_from(fuzz.KINDS), container=st.sampled_from(fuzz.CONTAINERS),
                      batch=st.integers(0, 3), which=st.integers(0, 1 << 16), at=st.integers(0, 1 << 20),
                      value=st.sampled_from(fuzz.VALUES) | st.integers(-(1 << 31), (1 << 31) - 1))


@settings(max_examples=CASES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(m=mutations, compressed=st.booleans())
def test_mutated_containers_are_read_right_or_refused(bases: dict[bool, Path], child: fuzz.Child,
                                                      tmp_path_factory: pytest.TempPathFactory,
                                                      m: fuzz.Mutation, compressed: bool) -> None:
    case = tmp_path_factory.getbasetemp() / "fuzz-case"
    fuzz.apply(bases[compressed], case, m)
    outcome = child.run(case)
    assert not fuzz.bad(outcome), (m, compressed, outcome)


@settings(max_examples=CASES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(m=mutations, compressed=st.booleans(),
       columns=st.sampled_from([("hits.x",), ("tracks",), ("jets.pt", "ht"), ("nonexistent",), ("a.b.c",)]))
@example(m=fuzz.Mutation(kind="footer", container="reco", batch=3, which=38806, at=1048156, value=3000),
         compressed=False, columns=("tracks",))  # a footer pyarrow's verifier refuses with an OSError
def test_the_servers_planned_read_of_a_mutated_container_is_planned_or_refused(
        bases: dict[bool, Path], tmp_path_factory: pytest.TempPathFactory, m: fuzz.Mutation, compressed: bool,
        columns: tuple[str, ...]) -> None:
    """``GET …?columns=`` plans from the stored file's footer and metadata: a crafted one is a GiodError (the
    server then answers the Range as asked), never another exception (a 500)."""
    case = tmp_path_factory.getbasetemp() / "fuzz-served"
    fuzz.apply(bases[compressed], case, m)
    for path in sorted(case.rglob("*.arrow")):
        data = path.read_bytes()
        try:
            ranges, _ = served_ranges(lambda a, b: data[a:b], len(data), columns, 1 << 20)
        except GiodError:
            continue
        assert all(0 <= a < b <= len(data) for a, b in ranges), (m, path.name)


@settings(max_examples=max(3, CASES // 3), deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(m=mutations, compressed=st.booleans())
def test_a_remote_client_reads_mutated_containers_right_or_refuses_them(
        bases: dict[bool, Path], child: fuzz.Child, tmp_path_factory: pytest.TempPathFactory, m: fuzz.Mutation,
        compressed: bool) -> None:
    """Another site's reader: the server sends the crafted bytes as stored (their checksums agree), and the
    giod client's own reads (the gather across databases, a selection, single events) check them."""
    case = tmp_path_factory.getbasetemp() / "fuzz-remote"
    fuzz.apply(bases[compressed], case, m)
    outcome = child.run(case, query=True)
    assert "remote" in outcome and not fuzz.bad(outcome), (m, compressed, outcome)


def test_the_remote_path_gathers_the_databases(bases: dict[bool, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The fuzzer's remote path reaches the gather (two databases, each buffer received into the joined
    column), so that the cases above check it, and reads the pristine dataset whole."""
    import awkward as ak

    from giod.storage.formats.arrow import gather

    files: list[int] = []
    run = gather.Gather.run

    def counted(self: gather.Gather, *args: object) -> object:
        files.append(len(self.files))
        return run(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(gather.Gather, "run", counted)
    checked: list[int] = []

    def valid(arr: ak.Array) -> None:
        assert not ak.validity_error(arr)
        checked.append(len(arr))

    fuzz._remote(bases[False], valid)
    assert files and set(files) == {2}
    assert checked[:2] == [2 * fuzz.EVENTS, 2 * fuzz.EVENTS]


parquet_mutations = st.builds(fuzz.Mutation, kind=st.sampled_from(fuzz.PARQUET_KINDS),
                              container=st.sampled_from(fuzz.CONTAINERS), batch=st.just(0),
                              which=st.integers(0, 1 << 16), at=st.integers(0, 1 << 20),
                              value=st.sampled_from(fuzz.VALUES) | st.integers(-(1 << 31), (1 << 31) - 1))


@settings(max_examples=CASES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(m=parquet_mutations)
def test_mutated_parquet_containers_are_read_right_or_refused(parquet: Path, child: fuzz.Child,
                                                              tmp_path_factory: pytest.TempPathFactory,
                                                              m: fuzz.Mutation) -> None:
    case = tmp_path_factory.getbasetemp() / "fuzz-parquet-case"
    fuzz.apply(parquet, case, m)
    outcome = child.run(case)
    assert not fuzz.bad(outcome), (m, outcome)


@pytest.mark.parametrize("container_format", ["arrow", "parquet"])
def test_a_footer_that_renames_a_column_is_refused(container_format: str, child: fuzz.Child, tmp_path: Path
                                                   ) -> None:
    # found by the fuzzer in a Parquet footer: a member renamed (every checksum made to agree) passed every
    # structural check, and navigation, the display and copy failed on a field that was not there
    root = fuzz.base(tmp_path / "fed", container_format=container_format)
    with giod.open(root) as fed:
        rec = fed.dataset("qcd").databases()[0].container("reco")
        assert rec is not None
        path = Path(crafted.local_file(fed, rec))
    data = bytearray(path.read_bytes())
    before = crafted.seal(data) if container_format == "arrow" else \
        crafted.Sealed(rec.checksum, rec.size, tuple(rec.cluster_entries), ())
    assert data.count(b"tracks") >= 1
    data[:] = data.replace(b"tracks", b"trackz")  # the names in the schema, not the data: same length
    sealed = crafted.seal(data, before) if container_format == "arrow" else crafted.seal_parquet(data, before)
    path.write_bytes(data)
    crafted.recatalog(f"sqlite:///{root / 'catalog.sqlite'}", rec.path, sealed)
    outcome = child.run(root)
    assert not fuzz.bad(outcome), outcome
    for name in ("read", "navigate", "display", "copy"):
        assert outcome[name].startswith("GiodError: IntegrityError") and "trackz" in outcome[name], outcome


def _crafted_parquet(root: Path, container: str, change: Callable[[bytearray], None]) -> None:
    """``change`` the bytes of one Parquet container of the federation at ``root``, the catalog made to agree."""
    with giod.open(root) as fed:
        rec = fed.dataset("qcd").databases()[0].container(container)
        assert rec is not None and rec.format == "parquet"
        path = Path(crafted.local_file(fed, rec))
    data = bytearray(path.read_bytes())
    change(data)
    path.write_bytes(data)
    before = crafted.Sealed(rec.checksum, rec.size, tuple(rec.cluster_entries), ())
    crafted.recatalog(f"sqlite:///{root / 'catalog.sqlite'}", rec.path, crafted.seal_parquet(data, before))


def _no_utf8_name(data: bytearray) -> None:
    start, n = crafted.parquet_footer(data)
    data[start:start + n] = data[start:start + n].replace(b"tracks", b"trac\xffs")


def test_a_parquet_name_that_is_no_utf8_is_refused(parquet: Path, child: fuzz.Child, tmp_path: Path) -> None:
    # pyarrow raised UnicodeDecodeError on opening the file
    root = tmp_path / "fed"
    shutil.copytree(parquet, root)
    _crafted_parquet(root, "reco", _no_utf8_name)
    outcome = child.run(root)
    assert not fuzz.bad(outcome), outcome
    assert outcome["read"].startswith("GiodError: IntegrityError"), outcome


def test_parquet_levels_that_make_a_row_group_short_are_refused(parquet: Path, child: fuzz.Child,
                                                                 tmp_path: Path) -> None:
    # a byte of the repetition levels of a raw.calo page, its CRC made to agree: the row group decoded to 57
    # events of 60, which awkward refused with a ValueError
    fuzz.apply(parquet, tmp_path / "fed", fuzz.Mutation("levels", "raw.calo", 1, 53744, 958012, 7))
    outcome = child.run(tmp_path / "fed")
    assert not fuzz.bad(outcome), outcome
    assert outcome["read"].startswith("GiodError: IntegrityError"), outcome


def test_a_buffer_before_its_batch_is_refused_by_the_reads_of_a_few_events(bases: dict[bool, Path],
                                                                            child: fuzz.Child, tmp_path: Path
                                                                            ) -> None:
    # found by giod bench fuzz: a buffer offset of -2 passed the check of the buffers' ends, and the reads of a
    # few events of a compressed batch (iterate, event) sliced the file at -2: IndexError
    fuzz.apply(bases[True], tmp_path / "fed", fuzz.Mutation("span", "raw.calo", 7, 18042, 897285, -2))
    outcome = child.run(tmp_path / "fed")
    assert not fuzz.bad(outcome), outcome


@pytest.mark.parametrize(("container", "batch", "which", "at"), [("reco", 5, 45708, 148435),
                                                                  ("raw.tracker", 6, 46984, 391671)])
def test_a_buffer_far_before_its_batch_is_refused_by_whole_reads(bases: dict[bool, Path], child: fuzz.Child,
                                                                  tmp_path: Path, container: str, batch: int,
                                                                  which: int, at: int) -> None:
    # found by giod bench fuzz --cases 500 --seed 2026: a compressed buffer at offset -2**31 passed the check of
    # the buffers' ends, and the length prefixes of a whole batch were read at it: IndexError
    fuzz.apply(bases[True], tmp_path / "fed", fuzz.Mutation("span", container, batch, which, at, -(1 << 31)))
    outcome = child.run(tmp_path / "fed")
    assert not fuzz.bad(outcome), outcome


def test_the_server_answers_a_crafted_dataset_with_a_4xx(bases: dict[bool, Path], child: fuzz.Child,
                                                         tmp_path: Path) -> None:
    # the case: offsets past the objects, uploaded, then every query on the dataset killed the server
    jets_offsets = fuzz.Mutation("offset", "reco", 0, 0, 3, 100_000_000)
    fuzz.apply(bases[False], tmp_path / "case", jets_offsets)
    outcome = child.run(tmp_path / "case", query=True)
    assert outcome["query"].startswith("GiodError: GiodError: HTTP 4"), outcome
    assert not fuzz.bad(outcome), outcome
