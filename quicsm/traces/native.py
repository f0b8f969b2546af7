"""The C extensions' ABI check: a build left over from other sources is set aside, not trusted.

After a pull over a C change without a rebuild, the old ``.so`` still imports but returns the old shapes,
and every read failed deep inside with "not enough values to unpack". Each extension exports ``ABI``, a
number bumped with any function's signature or return shape (the rule is beside the constants, in the C
file and here); :func:`load` imports it only when the numbers agree, and otherwise warns once, naming the
fix, and lets the caller use the pure-Python twins (the same results, slower).
"""

from __future__ import annotations

import importlib
import warnings
from types import ModuleType

__all__ = ["FIX", "SCAN_ABI", "StaleExtensionWarning", "load"]

SCAN_ABI = 3
"""``quicsm.traces._scan``'s ABI number: bump it together with ``SCAN_ABI`` in ``_scan.c`` when a function's
or ``QlogScanner`` method's signature or return shape changes (a new argument, another tuple element, a
column added or reordered)."""

FIX = "rebuild it: `pip install -e .` or `python3 setup.py build_ext --inplace`"

_warned: set[str] = set()


class StaleExtensionWarning(RuntimeWarning):
    """A built C extension does not match the Python code beside it; its pure-Python twin runs instead."""


def load(name: str, abi: int) -> ModuleType | None:
    """The extension ``name`` if it is built and its ``ABI`` is ``abi``; ``None`` (use the twin) if it is not
    built, silently, or built from other sources, with one :class:`StaleExtensionWarning` per extension."""
    try:
        module = importlib.import_module(name)
    except ImportError:  # no compiler at install time: the twins run
        return None
    built = getattr(module, "ABI", None)
    if built == abi:
        return module
    if name not in _warned:
        _warned.add(name)
        what = "has no ABI number" if built is None else f"has ABI {built}"
        warnings.warn(
            f"the C extension {name} {what} but this code needs {abi} (built from other sources): "
            f"using the pure-Python twin, slower; {FIX}",
            StaleExtensionWarning,
            stacklevel=2,
        )
    return None
