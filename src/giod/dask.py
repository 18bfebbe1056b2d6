"""``giod.dask.from_selection``, where users import it from: the code is ``giod.distributed.arrays``."""

from giod.distributed.arrays import from_selection

__all__ = ["from_selection"]
