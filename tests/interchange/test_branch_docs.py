"""NanoAOD branch titles are its documentation: kept as ``doc`` at import, written back at export.

Compared with uproot (and coffea) on the original CMS file.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest
import uproot

import giod
from giod.interchange import import_root, inspect_tree, root_names, write_root
from giod.schema import Schema

pytestmark = pytest.mark.rootdata


@pytest.fixture(scope="module")
def dataset(ttbar: Path, tmp_path_factory: pytest.TempPathFactory) -> giod.Dataset:
    fed = giod.open(str(tmp_path_factory.mktemp("docs") / "fed"), create=True)
    import_root(fed, ttbar, "ttbar")
    return fed.dataset("ttbar")


def _titles(path: Path | str) -> dict[str, str]:
    with uproot.open(path) as f:
        return {b.name: b.title for b in f["Events"].branches}


def test_titles_become_docs(ttbar: Path) -> None:
    schema = inspect_tree(ttbar).schema
    jet = schema.collection_type("Jet")
    assert jet.fields["pt"].doc == "pt"
    assert jet.fields["jetId"].doc.startswith("Jet ID flags bit1 is loose")
    assert schema.collections["Jet"].doc.startswith("slimmedJets, i.e. ak4 PFJets CHS")  # the counter's title
    assert schema.tags["genWeight"].doc == "generator weight"
    assert schema.tags["run"].doc == ""  # "run/i" is a leaf list, not documentation
    layout = inspect_tree(ttbar)
    titles = _titles(ttbar)
    for branch, to in layout.mapping.items():
        doc = schema.tags[to].doc if isinstance(to, str) else schema.collection_type(to[0]).fields[to[1]].doc
        assert doc == ("" if titles[branch] in ("", f"{branch}/i", f"{branch}/l") else titles[branch]), branch
    assert sum(bool(t) for t in titles.values()) > 900


def test_docs_travel_in_arrow_field_metadata(dataset: giod.Dataset) -> None:
    tags = dataset.schema.arrow_schema("tag")
    assert tags.field("genWeight").metadata == {b"doc": b"generator weight"}
    jet = dataset.schema.arrow_type("Jet").value_type
    assert jet.field("pt").metadata == {b"doc": b"pt"}


def test_export_titles_equal_the_original(dataset: giod.Dataset, ttbar: Path, tmp_path: Path) -> None:
    out = tmp_path / "back.root"
    sel = dataset.select(None)
    write_root(out, sel.iterate(), dataset.schema, names=root_names(sel))
    original, back = _titles(ttbar), _titles(out)
    assert set(back) == set(original)
    differ = {k: (v, back[k]) for k, v in original.items() if back[k] != v}
    assert not differ, list(differ.items())[:5]


def test_doc_change_is_harmless(dataset: giod.Dataset) -> None:
    data = dataset.schema.to_dict()
    data["types"]["Jet"]["fields"]["pt"] = {"type": "float32", "doc": "transverse momentum, GeV"}
    changes = dataset.federation.evolve_dataset("ttbar", Schema.from_dict(data))
    assert changes and all("doc" in c for c in changes), changes
    ds = dataset.federation.dataset("ttbar")
    assert ds.schema.collection_type("Jet").fields["pt"].doc == "transverse momentum, GeV"
    pt = ds.select(None).read(["Jet.pt"]).Jet.pt
    assert len(pt) == 200


def test_coffea_arrays_have_their_doc(dataset: giod.Dataset, ttbar: Path) -> None:
    if os.environ.get("CI") != "true":
        pytest.importorskip("coffea", reason="coffea is not installed (pip install 'giod[coffea]')")
    from coffea.nanoevents import NanoEventsFactory

    from giod.interchange import coffea as giod_coffea

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        original = NanoEventsFactory.from_root({str(ttbar): "Events"}, mode="virtual").events()
        events = giod_coffea.nanoevents(dataset.select(None))
        for path in ("Jet.jetId", "Muon.pt", "genWeight", "Jet"):
            a, b = original, events
            for name in path.split("."):
                a, b = getattr(a, name), getattr(b, name)
            assert b.__doc__ == a.__doc__, path
