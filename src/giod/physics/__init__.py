"""Physics: event generation, the CMS-like detector and its fast simulation.

>>> from giod.physics import Detector, generate
>>> from giod.physics.simulate import simulate
>>> events = simulate(generate(1000, seed=1, pthat_min=50.0), Detector.load(), seed=2)

(``simulate`` is not re-exported here: it would hide the module of the same
name.) The data model these events follow is ``model.yaml`` beside this
module; :func:`model_text` returns it for registering a dataset.
"""

from giod.physics.detector import Detector
from giod.physics.generator import BuiltinTune, generate, particle_gun
from giod.physics.layout import model_text

__all__ = ["BuiltinTune", "Detector", "generate", "model_text", "particle_gun"]
