"""Exception hierarchy of quicsm.

Every error a user can cause derives from :class:`QuicsmError`; the CLI turns it into a one-line
message and a non-zero exit instead of a traceback. Messages say where (file, line) and what to do.
"""

from __future__ import annotations

__all__ = [
    "QuicsmError",
    "InputError",
    "ParseError",
    "NoTransitionsError",
    "InferenceError",
    "RenderError",
    "PatchError",
    "TestbedError",
]


class QuicsmError(Exception):
    """Base class: something the user can fix."""


class InputError(QuicsmError):
    """An input file is missing, unreadable or of an unknown kind."""

    unexpected: bool = False
    """Set when a reader failed in a way it did not foresee (an exception turned into this message at the
    last moment): the user still gets one line, and tests/fuzz counts it as a bug in that reader."""


class ParseError(QuicsmError):
    """A malformed record, raised only in strict mode (otherwise it is counted and reported)."""

    def __init__(self, path: str, line: int, reason: str) -> None:
        super().__init__(f"{path}:{line}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


class NoTransitionsError(QuicsmError):
    """The inputs held no state transition at all."""


class InferenceError(QuicsmError):
    """An inference engine could not build a model (bad options, failed external tool)."""


class RenderError(QuicsmError):
    """Graphviz is missing or failed."""


class PatchError(QuicsmError):
    """A patch set cannot be checked, applied, reverted or ported."""


class TestbedError(QuicsmError):
    """The testbed cannot run (no root, missing tool) or a run failed."""

    __test__ = False  # not a pytest test class
