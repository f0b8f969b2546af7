"""Where the testbed's own sources (Go server/client/relay, Rust quiche server) are.

A source checkout has them in ``testbed/`` beside the package. An installed quicsm carries a copy as
package data in ``quicsm/testbed/_src/`` (setup.py copies it at build time), so ``pip install`` then
``quicsm testbed run`` can build them too. The checkout wins when both exist.
"""

from __future__ import annotations

from pathlib import Path

from quicsm.errors import TestbedError

__all__ = ["PROGRAM_DIRS", "SHIPPED_DIR", "testbed_root"]

PROGRAM_DIRS = ("server", "client", "relay", "quiche-server", "quinn-server", "tcp", "chromium-quic")
"""Directories of ``testbed/`` an installed quicsm ships (their build files and sources)."""
SHIPPED_DIR = Path(__file__).resolve().parent / "_src"
_CHECKOUT_DIR = Path(__file__).resolve().parents[2] / "testbed"


def testbed_root(marker: str = "server/go.mod", candidates: tuple[Path, ...] | None = None) -> Path:
    """The first of (checkout ``testbed/``, installed copy) holding ``marker``; a one-line error otherwise."""
    dirs = candidates if candidates is not None else (_CHECKOUT_DIR, SHIPPED_DIR)
    for d in dirs:
        if (d / marker).is_file():
            return d
    raise TestbedError(
        f"testbed sources not found ({marker} in none of {', '.join(str(d) for d in dirs)}): "
        "reinstall quicsm (its wheel ships them as package data) or run from a source checkout"
    )
