"""Phoenix's run and event numbers are the file's, or absent: never invented.

An imported file without run/event branches (uproot-HZZ.root) exports no
``run number`` or ``event number``; one with them (the CMS NanoAOD ttbar file)
exports its own. Phoenix's loader (from npm, in node) builds both and shows
what it was given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import uproot

import giod
from giod.display import phoenix_event
from giod.interchange import import_root

pytestmark = [pytest.mark.node, pytest.mark.rootdata, pytest.mark.slow]  # installs Phoenix from npm



def _file(name: str) -> Path:
    from tests.interchange.conftest import open_data

    return open_data(name)


@pytest.fixture(scope="module")
def fed(tmp_path_factory: pytest.TempPathFactory) -> giod.Federation:
    fed = giod.open(tmp_path_factory.mktemp("phoenix") / "fed", create=True)
    import_root(fed, _file("uproot-HZZ.root"), "hzz")
    import_root(fed, _file("nanoAOD_2015_CMS_Open_Data_ttbar.root"), "ttbar")
    return fed


def test_no_run_or_event_branches_none_invented(fed: giod.Federation, phoenix_build: Any) -> None:
    data = phoenix_event(fed.dataset("hzz"), 3)
    ((key, event),) = data.items()
    assert key == "hzz entry 3" and event["entry"] == 3
    assert "run number" not in event and "event number" not in event
    built = phoenix_build(data)[key]
    assert built["collections"]  # Phoenix built the event
    assert not any("Run" in m["label"] or "Event" in m["label"] for m in built["metadata"]), built["metadata"]


def test_the_files_run_and_event(fed: giod.Federation, phoenix_build: Any) -> None:
    with uproot.open(_file("nanoAOD_2015_CMS_Open_Data_ttbar.root")) as f:
        run = int(f["Events"]["run"].array(library="np", entry_stop=8)[7])
        event = int(f["Events"]["event"].array(library="np", entry_stop=8)[7])
    data = phoenix_event(fed.dataset("ttbar"), 7)
    ((key, exported),) = data.items()
    assert (exported["run number"], exported["event number"]) == (run, event)
    built = phoenix_build(data)[key]
    assert {"label": "Run / Event", "value": f"{run} / {event}"} in built["metadata"]
