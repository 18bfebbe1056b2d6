"""An empty selection (no text, or only white space) is refused wherever a selection enters, never read as
"every event"; leaving the selection out (``None``) still means every event."""

from __future__ import annotations

from pathlib import Path

import pytest

import giod
from giod.errors import ExpressionError
from giod.server.app import ServerThread, create_app
from giod.testing import synthetic

EVENTS = 120
BLANK = ["", " ", "   ", "\t", "\n", " \t\r\n "]


@pytest.fixture(scope="module")
def fed_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("empty") / "fed"
    with giod.open(path, create=True) as fed:
        with fed.create_dataset("qcd", synthetic.schema()).writer(database_events=60) as w:
            w.append(synthetic.events(EVENTS, seed=5))
    return path


@pytest.mark.parametrize("text", BLANK)
def test_a_blank_selection_is_an_expression_error(fed_dir: Path, text: str) -> None:
    ds = giod.open(fed_dir).dataset("qcd")
    with pytest.raises(ExpressionError, match="empty expression"):
        ds.select(text)


def test_no_selection_is_every_event(fed_dir: Path) -> None:
    ds = giod.open(fed_dir).dataset("qcd")
    assert len(ds.select()) == len(ds.select(None)) == EVENTS


def test_a_server_refuses_a_blank_selection(fed_dir: Path) -> None:
    local = giod.open(fed_dir)
    token = local.catalog.create_token("read", note="tests")[1]
    with ServerThread(create_app(str(fed_dir))) as url:
        remote = giod.open(url, token=token).dataset("qcd")
        with pytest.raises(ExpressionError, match="empty expression"):
            remote.select(" ").read(["ht"])
        with pytest.raises(ExpressionError, match="empty expression"):
            remote.query("", columns=["ht"])
