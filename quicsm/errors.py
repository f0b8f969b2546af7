"""Exception hierarchy of quicsm, and the one map from other layers' exceptions to it.

Every error a user can cause derives from :class:`QuicsmError`; the CLI turns it into a one-line
message and a non-zero exit instead of a traceback (exit 2 for :class:`OptionError`, as click's own
usage errors). Messages say where (file, line) and what to do::

    QuicsmError
    ├── InputError          an input is missing, unreadable, damaged or of an unknown kind
    │   └── (unexpected)    a reader failed in a way it did not foresee (the fuzzer's crashes)
    ├── OutputError         an output cannot be written
    ├── OptionError         an unknown engine, option or option value (exit 2)
    ├── ParseError          a malformed record under --strict (file:line: reason)
    ├── NoTransitionsError  inputs without a single state transition
    ├── InferenceError      an engine could not build a model
    ├── RenderError         Graphviz missing or failing
    ├── PatchError          a patch set cannot be checked, applied, reverted or ported
    └── TestbedError        the testbed cannot run, or a run failed

A lower layer's exception (OSError, zlib, a reader's ValueError) becomes one of these only in
:func:`as_quicsm_error`, at the boundary where the input it concerns is known: a reader's loop
(``with reading(path):``), a Dask task, the CLI. Each condition has one wording.
"""

from __future__ import annotations

import gzip
import zlib

__all__ = [
    "QuicsmError",
    "InputError",
    "OptionError",
    "OutputError",
    "ParseError",
    "NoTransitionsError",
    "InferenceError",
    "RenderError",
    "PatchError",
    "TestbedError",
    "READER_ERRORS",
    "as_quicsm_error",
    "reading",
    "truncated",
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


class OptionError(QuicsmError):
    """An unknown engine, option or option value: a usage error, whichever verb or library call met it."""


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


def truncated(detail: object) -> str:
    """The one wording of a gzip stream cut short or corrupt (an error, or a problem in the parse report)."""
    return f"truncated or corrupt gzip data ({str(detail)[:200] or 'unexpected end'})"


def as_quicsm_error(exc: BaseException, where: str = "", *, readers: bool = True) -> QuicsmError | None:
    """The one map from a lower layer's exception to quicsm's (None: not one a user's input can cause).

    ``where`` names the input being read (a file, a URL); without it, the exception's own file name. A
    gzip stream cut short or corrupt is said as such everywhere. Reading an input (``where`` given, or
    ``readers``: a reader's loop, a Dask task), a missing file, a directory and an I/O error are said as
    such too; with ``readers``, any other exception a reader raises on bad input is an
    :class:`InputError` marked ``unexpected``. At the CLI (neither), the rest is a bug and keeps its
    traceback.
    """
    if isinstance(exc, QuicsmError):
        return exc
    at = where or getattr(exc, "filename", None) or ""
    prefix = f"{at}: " if at else ""
    if isinstance(exc, (EOFError, gzip.BadGzipFile, zlib.error)):
        return InputError(prefix + truncated(exc))
    if not (readers or where):  # the CLI: an OSError here may be a write, or a bug
        return None
    if isinstance(exc, FileNotFoundError):
        return InputError(f"{prefix}no such file")
    if isinstance(exc, IsADirectoryError):
        return InputError(f"{prefix}is a directory")
    if isinstance(exc, OSError) and exc.strerror:
        return InputError(f"{prefix}cannot read ({exc.strerror})")
    if readers and isinstance(exc, READER_ERRORS):
        err = InputError(f"{prefix}cannot read ({type(exc).__name__}: {str(exc)[:200]})")
        err.unexpected = True
        return err
    return None


class reading:
    """Read ``where`` inside this block: what a lower layer raises leaves it as :func:`as_quicsm_error`
    says (httpx's ``map_httpcore_exceptions``: one map, used at every boundary). A class, not a
    generator context manager: it wraps every input file twice (20,000 files: ~0.1 s of generator set-up)."""

    __slots__ = ("where",)

    def __init__(self, where: str) -> None:
        self.where = where

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is None or not isinstance(exc, Exception):
            return
        err = as_quicsm_error(exc, self.where)
        if err is None or err is exc:
            return
        raise err from exc
