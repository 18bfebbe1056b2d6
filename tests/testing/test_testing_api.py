"""``giod.testing`` is public: its names resolve, its list is complete and sorted, and importing it is light."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import giod.testing

SRC = Path(__file__).resolve().parents[2] / "src"


def test_every_public_name_resolves_and_the_list_is_sorted() -> None:
    assert giod.testing.__all__ == sorted(giod.testing.__all__)
    for name in giod.testing.__all__:
        assert getattr(giod.testing, name) is not None, name
    assert giod.testing.synthetic.schema().name == "synthetic"
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        giod.testing.nothing  # the lookup is the test


def test_importing_it_loads_no_array_library() -> None:
    code = "import sys, giod.testing\nprint(' '.join(m for m in ('awkward', 'pyarrow', 'numpy') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(SRC)},
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == []
