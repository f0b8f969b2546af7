"""Instrumentation: patch sets that add quicsm log lines to congestion-control senders, and the engine.

``patchset`` loads and validates sets, ``targets`` knows the code bases (registry), ``detection`` finds
sender files and ranks sets by content, ``engine`` checks, applies, reverts and reports, ``placement``
finds where a change goes in another version and ``porter`` writes the ported set, ``appliers`` wraps
git apply / GNU patch, ``diff`` reads and writes unified diffs.
"""

from __future__ import annotations

from quicsm.instrumentation.detection import detect
from quicsm.instrumentation.engine import apply, check, revert, status
from quicsm.instrumentation.patchset import PatchSet, find_patch_set, load_patch_set, shipped_patch_sets
from quicsm.instrumentation.porter import plan_port, port

__all__ = [
    "PatchSet",
    "apply",
    "check",
    "detect",
    "find_patch_set",
    "load_patch_set",
    "plan_port",
    "port",
    "revert",
    "shipped_patch_sets",
    "status",
]
