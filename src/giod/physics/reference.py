"""Published CMS performance figures, kept as data (``cms_reference.yaml`` beside this module).

The validation (:mod:`giod.physics.validation`) compares giod's numbers with
these and draws them on its plots. Each entry carries its source paper and
whether it is quoted in the text (``abstract``) or read off a figure
(``figure``, good to about 20 %).
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import yaml

__all__ = ["RESOLUTION_FACTOR", "cms_reference", "citation"]

#: The issue's target: giod's resolutions within this factor of CMS's, either way.
RESOLUTION_FACTOR = 1.5


@functools.cache
def cms_reference() -> dict[str, Any]:
    """The reference figures, parsed."""
    text = resources.files("giod.physics").joinpath("cms_reference.yaml").read_text(encoding="utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def citation(key: str) -> str:
    """The short citation of a source (``tracker``, ``jets``) for plot legends."""
    return {"tracker": "CMS, JINST 9 (2014) P10009", "jets": "CMS, JINST 12 (2017) P02014"}[key]
