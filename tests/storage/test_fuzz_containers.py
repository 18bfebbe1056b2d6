"""The structure-aware fuzzer (``giod_bench.fuzz``): containers mutated in offsets, relation values, lengths,
metadata and footer, every checksum recomputed, read through every path in a child under an address-space
limit. Every outcome is valid data or a GiodError, never another exception or a signal.

``GIOD_FUZZ_CASES`` sets the number of cases (a few here; ``giod bench fuzz --cases N`` for long runs).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from giod_bench import fuzz

CASES = int(os.environ.get("GIOD_FUZZ_CASES", "12"))


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, Path]:
    root = tmp_path_factory.mktemp("fuzz")
    return {False: fuzz.base(root / "plain"), True: fuzz.base(root / "packed", compressed=True)}


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


def test_the_server_answers_a_crafted_dataset_with_a_4xx(bases: dict[bool, Path], child: fuzz.Child,
                                                         tmp_path: Path) -> None:
    # the case: offsets past the objects, uploaded, then every query on the dataset killed the server
    jets_offsets = fuzz.Mutation("offset", "reco", 0, 0, 3, 100_000_000)
    fuzz.apply(bases[False], tmp_path / "case", jets_offsets)
    outcome = child.run(tmp_path / "case", query=True)
    assert outcome["query"].startswith("GiodError: GiodError: HTTP 4"), outcome
    assert not fuzz.bad(outcome), outcome
