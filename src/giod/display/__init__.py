"""The event display: one event as a scene for the web page, or as HSF Phoenix event data.

>>> import giod
>>> from giod.display import event_scene, phoenix_event
>>> ds = giod.open("giod-data")["qcd"]
>>> scene = event_scene(ds, 0)        # what ``/display`` draws
>>> data = phoenix_event(ds, 0)       # opens in Phoenix

Both find what to draw by role (:mod:`giod.display.content`), so simulated
events and NanoAOD imports work alike; the server's ``/display`` page and
``/api/v1/events/…`` routes serve them.
"""

from giod.display.content import EventContent, find_roles, load_event
from giod.display.phoenix import phoenix_event, phoenix_of
from giod.display.scene import detector_geometry, event_scene, scene_of

__all__ = ["EventContent", "detector_geometry", "event_scene", "find_roles", "load_event", "phoenix_event",
           "phoenix_of", "scene_of"]
