"""docs/schema.md must stay true: its example model, code and tables are checked here."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from giod.schema import Schema
from giod.schema.definitions import DTYPES, widens

DOC = Path(__file__).resolve().parents[2] / "docs" / "schema.md"


def blocks(language: str) -> list[str]:
    text = DOC.read_text()
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


OLD_E = '      e: {type: float32, default: 0.0, aliases: [energy], doc: "deposited energy, GeV"}'
OLD_TRACK_FIELDS = "    fields: {pt: float32, eta: float32, phi: float32, charge: int8}"
OLD_SEED = "      seed: {to: hits}                    # one-to-one: an index, or -1 for none"


@pytest.fixture
def model_text() -> str:
    return blocks("yaml")[0]


def test_full_example_loads_and_runs(
    model_text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = Schema.from_yaml(model_text)
    assert Schema.from_yaml(schema.to_yaml()) == schema
    (tmp_path / "model.yaml").write_text(model_text)
    code = blocks("python")[0]
    expected = [line.split("# ", 1)[1] for line in code.splitlines() if line.startswith("# ")]
    out = io.StringIO()
    monkeypatch.chdir(tmp_path)
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(DOC), "exec"), {})
    printed = out.getvalue().splitlines()
    assert printed[0] == expected[0]
    assert printed[1] == "reco Jet"
    assert printed[2] == schema.fingerprint[:12]


def test_evolution_example(model_text: str) -> None:
    snippet = blocks("yaml")[1]
    lines = {line.strip().split(":")[0]: line for line in snippet.splitlines() if line.strip()}
    v2_text = model_text
    for old, new in (
        (OLD_E, lines["edep"]),
        (OLD_TRACK_FIELDS, lines["fields"]),
        (OLD_SEED, lines["seed"] + "\n" + lines["jet"]),
    ):
        assert old in v2_text
        v2_text = v2_text.replace(old, new)
    assert v2_text.count("edep") == 1 and v2_text.count("jet: {to: jets}") == 1
    v1, v2 = Schema.from_yaml(model_text), Schema.from_yaml(v2_text)
    reported = DOC.read_text().split("`v2.check_evolution(v1)` returns")[1]
    expected = re.search(r"```text\n(.*?)```", reported, flags=re.DOTALL)
    assert expected is not None
    assert v2.check_evolution(v1) == expected.group(1).splitlines()


def test_widening_table_matches_the_code() -> None:
    rows = re.findall(r"^\| `(\w+)` \| (.+) \|$", DOC.read_text(), flags=re.MULTILINE)
    table = {old: set(re.findall(r"`(\w+)`", targets)) for old, targets in rows if old in DTYPES}
    assert set(table) == set(DTYPES)
    for old in DTYPES:
        assert table[old] == {new for new in DTYPES if widens(old, new)}, old
