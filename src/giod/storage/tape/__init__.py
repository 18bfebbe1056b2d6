"""The nearline tier: a simulated tape library (``library``, ``settings``) and the site in front of it (``site``)."""

from giod.storage.tape.library import FileState, RequestState, TapeLibrary, cartridge_label
from giod.storage.tape.settings import LibrarySettings
from giod.storage.tape.site import SCHEME, NearlineSite, parse_tape_url

__all__ = ["SCHEME", "FileState", "LibrarySettings", "NearlineSite", "RequestState", "TapeLibrary",
           "cartridge_label", "parse_tape_url"]
