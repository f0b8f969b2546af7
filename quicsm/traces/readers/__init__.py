"""Input readers: one module of this package per family of input kinds; a new format is one module here.

Each module registers a :class:`ReaderSpec`: the kinds it reads, for a kind :mod:`quicsm.traces.sniff`
does not know the file names it takes and a test of a file's first bytes, and the :class:`Reader` that
turns files into :class:`~quicsm.traces.columnar.TraceColumns`. :func:`quicsm.traces.parse.read_inputs`
opens every input once (:func:`quicsm.traces.inputs.open_input`, which asks :func:`kind_of`), finds its
reader with :func:`spec_for` and hands it the stream; a reader may gather consecutive files of its family
into one batch, and is flushed when a file of another family comes, so traces keep input order.

Readers yield columns only: no consumer of traces switches on how an input was stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO, NamedTuple, Protocol

from quicsm.errors import InputError
from quicsm.plugins import Registry
from quicsm.traces.events import TraceMeta
from quicsm.traces.report import ParseReport
from quicsm.traces.sniff import kind_by_name, sniff_bytes

if TYPE_CHECKING:
    from quicsm.traces.columnar import TraceColumns

__all__ = ["ReadContext", "Reader", "ReaderSpec", "Source", "kind_of", "name_kind", "register", "spec_for", "suffixes"]


class Source(NamedTuple):
    """One input file as its reader sees it."""

    path: str
    kind: str
    scope: str
    """The trace-id scope of the file (text-log keys are scoped so two runs' connections never merge)."""
    meta: TraceMeta
    """What every trace of the file gets: the sidecar ``meta.json`` and the command line."""


@dataclass(frozen=True, slots=True)
class ReadContext:
    """What every reader of one :func:`~quicsm.traces.parse.read_inputs` call shares."""

    report: ParseReport
    """Counts, and problem records with file and line (an error at the first under ``report.strict``)."""
    on_bytes: Callable[[int], None] | None = None
    """Progress: called with the bytes read."""
    metrics: bool = True
    """Read metric columns too (``False``: stays are enough, e.g. a store's metric columns are skipped)."""
    ahead: bool = False
    """Row groups of a long trace may come ahead of its batch (:class:`~quicsm.traces.parquet.GroupAhead`):
    for the store writer only."""


class Reader(Protocol):
    """Files of one family into column batches of whole traces, in file order."""

    def read(self, stream: BinaryIO, src: Source) -> Iterable[TraceColumns]:
        """One file (``stream``: its bytes, gunzipped; a ``BytesIO`` when it was small enough to be read
        whole): the batches that filled up meanwhile."""
        ...

    def flush(self) -> Iterable[TraceColumns]:
        """What was gathered and not given yet (the end, or a file of another family next)."""
        ...


@dataclass(frozen=True, slots=True)
class ReaderSpec:
    """A family of input kinds and its reader (the registry's entry)."""

    name: str
    kinds: tuple[str, ...]
    reader: Callable[[ReadContext], Reader]
    """Makes the reader of one :func:`~quicsm.traces.parse.read_inputs` call."""
    suffixes: tuple[str, ...] = ()
    """File names of a kind :mod:`quicsm.traces.sniff` does not know (``.gz`` added): a directory's files
    of that kind are read, and a name tells the kind when the content does not."""
    sniff: Callable[[bytes], bool] | None = None
    """Whether a file's first bytes (gunzipped) are of this kind: asked before the built-in sniffing."""
    urls: bool = True
    """Whether the reader takes a URL's stream (else only local files)."""
    whole: int | Callable[[], int] = 0
    """A plain file smaller than this many bytes (or than what this function says at the time) comes to the
    reader read whole (a ``BytesIO``, from one more ``read`` after the sniffed head), as a file smaller than
    the head always does; a larger one as a stream from its first byte."""


_SPECS: Registry[ReaderSpec] = Registry(__name__, __path__)


def register(spec: ReaderSpec) -> ReaderSpec:
    """Called by each module of this package when imported."""
    for kind in spec.kinds:
        _SPECS.register(kind, spec)
    return spec


def spec_for(kind: str) -> ReaderSpec:
    spec = _SPECS.load().get(kind)
    if spec is None:
        raise InputError(f"no reader for inputs of kind {kind!r}")
    return spec


_added_at: tuple[tuple[int, int, int], tuple[ReaderSpec, ...]] = ((-1, -1, -1), ())


def _added() -> tuple[ReaderSpec, ...]:
    """The specs of kinds the built-in sniffing does not know, in registration order (asked twice for
    every input file: kept while the registry's table, its registrations and its size stay the same, so a
    table swapped back, as a test fixture does, is read again)."""
    global _added_at
    items = _SPECS.load()
    key = (id(items), _SPECS.version, len(items))
    if _added_at[0] != key:
        _added_at = (key, tuple({id(s): s for s in items.values() if s.sniff or s.suffixes}.values()))
    return _added_at[1]


def suffixes() -> tuple[str, ...]:
    """The file names of registered kinds that :data:`quicsm.traces.inputs.INPUT_SUFFIXES` does not list."""
    return tuple(x + gz for s in _added() for x in s.suffixes for gz in ("", ".gz"))


def name_kind(path: str) -> str:
    """The kind a file's name suggests (for stdin, URLs, and when the content says nothing)."""
    name = path.rsplit("/", 1)[-1].lower().removesuffix(".gz")
    for spec in _added():
        if name.endswith(spec.suffixes):
            return spec.kinds[0]
    return kind_by_name(path)


def kind_of(head: bytes, path: str) -> str:
    """The kind of a file whose first bytes (gunzipped) are ``head``: its content decides, its name only
    breaks ties."""
    if not head:
        return name_kind(path)
    for spec in _added():
        if spec.sniff is not None and spec.sniff(head):
            return spec.kinds[0]
    return sniff_bytes(head, "") or name_kind(path)  # the name asked only when the content says nothing
