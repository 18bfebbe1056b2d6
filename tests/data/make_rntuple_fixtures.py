"""Make the RNTuple fixtures of tests/interchange from the CMS open-data NanoAOD TTree.

Writes, next to this script, from the first 20 events of
``shared/data/nanoAOD_2015_CMS_Open_Data_ttbar.root`` (the ``Events`` TTree):

- ``nanoaod_ttbar_importer.rntuple.root``: the tree converted by ROOT's own
  ``RNTupleImporter``: each counter group is an untagged collection
  ``_collection0…N`` with subfields ``Jet_pt``, ``Jet_eta``, …, beside the
  projected fields ``nJet``, ``Jet_pt``, … that ROOT adds for TTree users.
- ``nanoaod_ttbar_native.rntuple.root``: ROOT's native layout written with
  ``RNTupleModel``/``RNTupleWriter``: every counter group ``X`` of the tree
  as a field ``X`` holding a vector of records with subfields named without
  the ``X_`` prefix (``Jet`` with ``pt``, ``eta``, …; a group with a single
  branch named like it, such as ``LHEPdfWeight``, as a vector of numbers),
  and a few scalars.

It needs ROOT's Python bindings and uproot, which giod itself never needs.
Run it with a Python environment outside the repository, for instance::

    python3 -m venv /some/scratch/venv
    /some/scratch/venv/bin/pip install root uproot
    /some/scratch/venv/bin/python tests/data/make_rntuple_fixtures.py [path/to/ttbar.root]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parents[1] / ".." / "shared" / "data" / "nanoAOD_2015_CMS_Open_Data_ttbar.root"
N_EVENTS = 20
IMPORTER = HERE / "nanoaod_ttbar_importer.rntuple.root"
NATIVE = HERE / "nanoaod_ttbar_native.rntuple.root"
SCALARS = ("run", "luminosityBlock", "event", "genWeight", "MET_pt", "MET_phi")

_CXX = {  # numpy dtype -> C++ type
    "bool": "bool", "int8": "std::int8_t", "uint8": "std::uint8_t", "int16": "std::int16_t",
    "uint16": "std::uint16_t", "int32": "std::int32_t", "uint32": "std::uint32_t",
    "int64": "std::int64_t", "uint64": "std::uint64_t", "float32": "float", "float64": "double",
}  # fmt: skip


def _first_events(source: Path, scratch: Path):
    """The first N_EVENTS entries of the tree, copied into a TTree file of their own."""
    import ROOT

    src = ROOT.TFile.Open(str(source))
    out = ROOT.TFile(str(scratch / "first.root"), "RECREATE")
    small = src.Get("Events").CopyTree("", "", N_EVENTS)
    small.Write()
    out.Close()
    src.Close()
    return scratch / "first.root"


def write_importer_style(tree_file: Path) -> None:
    import ROOT

    IMPORTER.unlink(missing_ok=True)
    importer = ROOT.Experimental.RNTupleImporter.Create(str(tree_file), "Events", str(IMPORTER))
    importer.SetIsQuiet(True)
    importer.Import()


def _groups(tree):
    """counter -> {collection, members: [(member, branch, dtype)]} of the TTree, from uproot."""
    groups = {}
    for b in tree.branches:
        if b.count_branch is None:
            continue
        counter = b.count_branch.name
        coll = counter[1:]
        member = "" if b.name == coll else b.name.removeprefix(coll + "_")
        dtype = str(b.interpretation.content.to_dtype.base)
        groups.setdefault(counter, (coll, []))[1].append((member, b.name, dtype))
    return groups


def write_native(tree_file: Path) -> None:
    import ROOT
    import uproot

    with uproot.open(tree_file) as f:
        tree = f["Events"]
        groups = _groups(tree)
        arrays = tree.arrays(library="np")

    model = ROOT.RNTupleModel.Create()
    records = {}
    for coll, members in groups.values():
        if members[0][0] == "":  # LHEPdfWeight and the like: a vector of numbers
            model.MakeField[f"std::vector<{_CXX[members[0][2]]}>"](coll)
            continue
        struct = f"GiodFixture{coll}"
        body = " ".join(f"{_CXX[dtype]} {member};" for member, _, dtype in members)
        ROOT.gInterpreter.Declare(f"struct {struct} {{ {body} }};")
        model.MakeField[f"std::vector<{struct}>"](coll)
        records[coll] = struct
    for name in SCALARS:
        model.MakeField[_CXX[str(arrays[name].dtype)]](name)

    NATIVE.unlink(missing_ok=True)
    writer = ROOT.RNTupleWriter.Recreate(model, "Events", str(NATIVE))
    entry = writer.CreateEntry()
    for i in range(len(arrays["run"])):
        for coll, members in groups.values():
            vec = entry[coll]
            vec.clear()
            if coll not in records:
                for value in arrays[members[0][1]][i]:
                    vec.push_back(value.item())
                continue
            cls = getattr(ROOT, records[coll])
            columns = [(member, arrays[branch][i]) for member, branch, _ in members]
            for k in range(len(columns[0][1])):
                obj = cls()
                for member, values in columns:
                    setattr(obj, member, values[k].item())
                vec.push_back(obj)
        for name in SCALARS:
            entry[name] = arrays[name][i].item()
        writer.Fill(entry)
    del writer  # closes the file


def main() -> None:
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else SOURCE
    with tempfile.TemporaryDirectory() as scratch:
        first = _first_events(source, Path(scratch))
        write_importer_style(first)
        write_native(first)
    for path in (IMPORTER, NATIVE):
        print(f"{path.name}: {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
