"""``python -m giod``: the ``giod`` command, for environments whose scripts are not on the PATH."""

from giod.cli import main

main(prog_name="giod")
