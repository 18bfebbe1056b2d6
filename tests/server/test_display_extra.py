"""Without plotly the display's refusal names the extra that brings it."""

from __future__ import annotations

import pytest

import giod
from giod.server.routes import display


def test_a_missing_plotly_names_giod_display(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(package: str) -> None:
        raise ModuleNotFoundError(f"No module named {package!r}", name=package)

    monkeypatch.setattr(display.resources, "files", missing)
    monkeypatch.setattr(display, "_plotly", {})
    with pytest.raises(giod.MissingDependency, match=r"pip install 'giod\[display\]'$"):
        display._plotly_bundle()
