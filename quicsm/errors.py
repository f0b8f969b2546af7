"""Exception hierarchy of quicsm.

Every error a user can cause derives from :class:`QuicsmError`; the CLI turns it into a one-line
message and a non-zero exit instead of a traceback. Messages say where (file, line) and what to do.
"""

from __future__ import annotations

import gzip
import zlib

__all__ = [
    "QuicsmError",
    "InputError",
    "OutputError",
    "ParseError",
    "NoTransitionsError",
    "InferenceError",
    "RenderError",
    "PatchError",
    "TestbedError",
    "READER_ERRORS",
    "as_quicsm_error",
]


class QuicsmError(Exception):
    """Base class: something the user can fix."""


class InputError(QuicsmError):
    """An input file is missing, unreadable or of an unknown kind."""

    unexpected: bool = False
    """Set when a reader failed in a way it did not foresee (an exception turned into this message at the
    last moment): the user still gets one line, and tests/fuzz counts it as a bug in that reader."""


class OutputError(QuicsmError):
    """An output cannot be written (full disk, read-only place, a directory in the way, one of the run's
    own inputs); said naming the output, never the hidden temporary, and the old file is kept."""


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


READER_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    AttributeError,
    RecursionError,
    OverflowError,
    EOFError,
    OSError,
    zlib.error,
)
"""What a reader bug on bad input raises: turned into a one-line InputError marked ``unexpected`` (the
fuzz harness counts those as crashes: the reader should have said why itself)."""


def as_quicsm_error(exc: BaseException, where: str = "") -> QuicsmError | None:
    """The one map from a lower layer's exception to quicsm's (None: not one a user's input can cause).

    ``where`` names the input (a file, a URL, a worker). A gzip stream cut short or corrupt is said as
    such; any other exception a reader raised on bad input is an :class:`InputError` marked
    ``unexpected``. The parse stage, the Dask workers and the CLI all translate through here.
    """
    if isinstance(exc, QuicsmError):
        return exc
    prefix = f"{where}: " if where else ""
    if isinstance(exc, (EOFError, gzip.BadGzipFile, zlib.error)):
        return InputError(f"{prefix}truncated or corrupt gzip data ({str(exc)[:200]})")
    if isinstance(exc, OSError) and not isinstance(exc, (FileNotFoundError, IsADirectoryError)) and exc.strerror:
        return InputError(f"{prefix}cannot read ({exc.strerror})")
    if isinstance(exc, READER_ERRORS):
        err = InputError(f"{prefix}cannot read ({type(exc).__name__}: {str(exc)[:200]})")
        err.unexpected = True
        return err
    return None
