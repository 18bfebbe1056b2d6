"""Event generation: physics sanity of the built-in generator, seeds, bad input, Pythia."""

from __future__ import annotations

import importlib

import awkward as ak
import numpy as np
import pytest

from giod.errors import ConfigError, MissingDependency
from giod.physics import pythia as pythia_module
from giod.physics.generator import generate, particle_gun
from giod.physics.particles import PDG


class Flat:
    """The mcparticles of all events as flat numpy columns, parents as global rows."""

    def __init__(self, events: ak.Array):
        mc = events.mcparticles
        self.n = np.asarray(ak.num(mc))
        self.event = np.repeat(np.arange(len(self.n)), self.n)
        start = np.cumsum(self.n) - self.n
        for name in mc.fields:
            setattr(self, name, ak.to_numpy(ak.flatten(mc[name])))
        self.parent = np.where(self.parent >= 0, self.parent + start[self.event], -1)
        self.pt = np.hypot(self.px, self.py)
        with np.errstate(divide="ignore"):
            self.eta = np.arcsinh(self.pz / self.pt)

    def top_ancestor(self) -> np.ndarray:
        top = np.arange(len(self.parent))
        while np.any(up := self.parent[top] >= 0):
            top[up] = self.parent[top[up]]
        return top


def test_seeds_reproduce_bit_identically() -> None:
    a = generate(40, seed=7, pthat_min=40.0, pileup=2.0)
    b = generate(40, seed=7, pthat_min=40.0, pileup=2.0)
    c = generate(40, seed=8, pthat_min=40.0, pileup=2.0)
    assert ak.array_equal(a, b, dtype_exact=True)
    assert not ak.array_equal(a.mcparticles.px, c.mcparticles.px)


def test_run_and_event_numbers() -> None:
    events = generate(5, seed=1, run=42, first_event=1000)
    assert events.run.tolist() == [42] * 5
    assert events.event.tolist() == [1000, 1001, 1002, 1003, 1004]


def test_outgoing_partons_balance(generated: ak.Array) -> None:
    partons = generated.mcparticles[generated.mcparticles.status == 3]
    assert ak.all(ak.num(partons) >= 2)
    scale = ak.to_numpy(ak.sum(np.hypot(partons.px, partons.py), axis=1))
    for c in ("px", "py"):
        assert np.all(np.abs(ak.to_numpy(ak.sum(partons[c], axis=1))) < 1e-5 * scale)


def test_jet_particles_carry_their_partons_momentum(generated: ak.Array) -> None:
    f = Flat(generated)
    top = f.top_ancestor()
    final = f.status == 1
    from_parton = final & (f.status[top] == 3)
    assert from_parton.sum() > 10 * len(f.n)
    partons = np.flatnonzero(f.status == 3)
    for c in ("px", "py", "pz"):
        hadrons = np.bincount(top[from_parton], weights=getattr(f, c)[from_parton], minlength=len(f.status))
        parton = getattr(f, c)[partons]
        assert np.allclose(hadrons[partons], parton, atol=2e-3, rtol=1e-4)


def test_charge_is_conserved_jet_by_jet(generated: ak.Array) -> None:
    f = Flat(generated)
    top = f.top_ancestor()
    final = f.status == 1
    from_parton = final & (f.status[top] == 3)
    charge = np.bincount(top[from_parton], weights=f.charge[from_parton], minlength=len(f.status))
    jets = charge[f.status == 3]
    assert set(np.round(jets).astype(int)) <= {-1, 0, 1}
    assert np.allclose(jets, np.round(jets))
    # The charged multiplicity is far larger, so alternation is what keeps the sum small.
    n_charged = np.bincount(top[from_parton & (f.charge != 0)], minlength=len(f.status))[f.status == 3]
    assert n_charged.mean() > 5


def test_pi0_decays_to_two_photons(generated: ak.Array) -> None:
    f = Flat(generated)
    pi0 = np.flatnonzero(f.pdg == PDG.PI0)
    assert len(pi0) > 0 and np.all(f.status[pi0] == 2)
    photons = np.flatnonzero((f.pdg == PDG.GAMMA) & (f.parent >= 0))
    assert np.all(f.pdg[f.parent[photons]] == PDG.PI0)
    assert np.array_equal(np.bincount(f.parent[photons], minlength=len(f.pdg))[pi0], np.full(len(pi0), 2))
    sums = {c: np.bincount(f.parent[photons], weights=getattr(f, c)[photons].astype(float),
                           minlength=len(f.pdg))[pi0] for c in ("px", "py", "pz", "e")}
    for c in ("px", "py", "pz"):
        assert np.allclose(sums[c], getattr(f, c)[pi0], atol=1e-4, rtol=1e-4)
    mass2 = sums["e"] ** 2 - sums["px"] ** 2 - sums["py"] ** 2 - sums["pz"] ** 2
    # float32 momenta: the mass is recovered to a few MeV only for slow pi0s.
    slow = f.e[pi0] < 5
    assert np.allclose(np.sqrt(np.maximum(mass2[slow], 0)), PDG.MASS[PDG.PI0], atol=5e-3)


def test_multiplicities_are_realistic(generated: ak.Array) -> None:
    f = Flat(generated)
    final = f.status == 1
    per_event = np.bincount(f.event[final], minlength=len(f.n))
    assert 100 < per_event.mean() < 800
    # Underlying event: dN_ch/deta of soft (parentless) particles in |eta| < 2.5 is 5-7.
    soft = final & (f.parent < 0) & (f.charge != 0) & (np.abs(f.eta) < 2.5)
    assert 5.0 < soft.sum() / len(f.n) / 5.0 < 7.0
    # Both neutral and charged hadrons, and photons.
    codes = set(np.abs(f.pdg[final]))
    assert {PDG.PI_PLUS, PDG.K_PLUS, PDG.PROTON, PDG.K_LONG, PDG.NEUTRON, PDG.GAMMA} <= codes
    # Energies are consistent with the masses.
    m2 = f.e[final].astype(float) ** 2 - f.px[final] ** 2 - f.py[final] ** 2 - f.pz[final] ** 2
    assert np.allclose(np.sqrt(np.maximum(m2, 0)), f.mass[final], atol=2e-2 * np.maximum(1, f.e[final]) ** 0.5)


def test_parton_spectrum_falls_steeply() -> None:
    events = generate(3000, seed=3, pthat_min=30.0)
    partons = events.mcparticles[events.mcparticles.status == 3]
    lead = ak.to_numpy(ak.max(np.hypot(partons.px, partons.py), axis=1))
    counts, _ = np.histogram(lead, bins=[30, 45, 67.5, 101.25, 151.9])
    assert np.all(np.diff(counts) < 0)
    # Roughly pT^-4..-5.5: each x1.5 in pT costs a factor 1.5^3..1.5^4.5 in events per bin.
    ratio = counts[1] / counts[2]
    assert 1.5**2.5 < ratio < 1.5**5
    assert np.mean(lead > 30.0) > 0.9


def test_pileup_adds_soft_interactions_spread_in_z() -> None:
    quiet = generate(200, seed=5, pthat_min=30.0)
    busy = generate(200, seed=5, pthat_min=30.0, pileup=20.0)
    f0, f1 = Flat(quiet), Flat(busy)
    extra = ((f1.status == 1) & (f1.charge != 0)).sum() - ((f0.status == 1) & (f0.charge != 0)).sum()
    per_interaction = extra / 200 / 20
    assert 30 < per_interaction < 60  # about 5.5 charged per unit eta over |eta| < 4
    vertices = np.unique(np.round(f1.vz[(f1.parent < 0) & (f1.status == 1)], 4))
    assert len(vertices) > 200 * 15
    assert 4.0 < np.std(vertices) < 6.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_events": -1}, "n_events"),
        ({"pthat_min": 0.0}, "pthat_min"),
        ({"pileup": -1.0}, "pileup"),
        ({"generator": "herwig"}, "unknown generator 'herwig'"),
    ],
)
def test_bad_arguments(kwargs: dict, message: str) -> None:
    args = {"n_events": 2, "seed": 1} | kwargs
    n = args.pop("n_events")
    with pytest.raises(ConfigError, match=message):
        generate(n, **args)


def test_particle_gun() -> None:
    events = particle_gun([PDG.GAMMA, -PDG.PI_PLUS], [10.0, 0.0], [0.0, 5.0], [1.0, -2.0],
                          vertex=np.array([[0, 0, 1.0], [0, 0, -1.0]]))
    mc = events.mcparticles
    assert ak.num(mc).tolist() == [1, 1]
    assert mc.charge.tolist() == [[0.0], [-1.0]]
    assert mc.vz.tolist() == [[1.0], [-1.0]]
    assert mc.e[1, 0] == pytest.approx(np.sqrt(25 + 4 + PDG.MASS[PDG.PI_PLUS] ** 2), rel=1e-6)
    with pytest.raises(ConfigError):
        particle_gun([22], [1.0, 2.0], [0.0], [0.0])


def test_missing_pythia_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def no_pythia(name: str, *args, **kwargs):
        if name == "pythia8mc":
            raise ImportError("No module named 'pythia8mc'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(pythia_module.importlib, "import_module", no_pythia)
    with pytest.raises(MissingDependency) as info:
        generate(2, seed=1, generator="pythia")
    assert str(info.value) == "Pythia 8 is not installed: pip install 'giod[pythia]'"


def test_pythia_events() -> None:
    pytest.importorskip("pythia8mc", reason="Pythia 8 (giod[pythia]) is not installed")
    a = generate(6, seed=4, pthat_min=50.0, generator="pythia")
    b = generate(6, seed=4, pthat_min=50.0, generator="pythia")
    assert ak.array_equal(a, b)
    f = Flat(a)
    assert np.array_equal(np.bincount(f.event[f.status == 3], minlength=6), np.full(6, 2))
    final = f.status == 1
    # The whole final state, beam remnants included, carries the beams' charge and momentum.
    charge = np.bincount(f.event[final], weights=f.charge[final], minlength=6)
    assert np.allclose(charge, 2.0)
    energy = np.bincount(f.event[final], weights=f.e[final].astype(float), minlength=6)
    pz = np.bincount(f.event[final], weights=f.pz[final].astype(float), minlength=6)
    assert np.allclose(energy, 13600.0, rtol=1e-4)
    assert np.allclose(pz, 0.0, atol=13600.0 * 1e-4)
    hard = f.status == 3
    assert np.all(f.pt[hard] > 45.0)
    assert len(generate(0, seed=4, generator="pythia")) == 0
    # Parents point to kept particles of the same event.
    has = f.parent >= 0
    assert np.array_equal(f.event[f.parent[has]], f.event[has])
    assert np.all(np.isin(f.status[f.parent[has]], [2, 3]))
