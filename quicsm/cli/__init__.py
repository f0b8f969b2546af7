"""The ``quicsm`` command line: a thin click layer over the library."""

from quicsm.cli.main import cli, main

__all__ = ["cli", "main"]
