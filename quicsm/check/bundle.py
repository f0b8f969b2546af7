"""Baseline bundles (``.qsb``): what ``quicsm check`` compares new runs against.

A bundle is small enough to commit beside the code it guards: per connection its metadata and its
folded state sequence with the stay in each state (time shares follow from the stays), per set the
annotated model, and which quicsm and state view made it. No raw log line is kept. On disk it is
gzip-compressed JSON (``mtime`` 0, so the same inputs give the same bytes), declared once below as
msgspec structs: the reader validates from that declaration, and ``docs/check.md`` is held to it by a
test. Anything malformed is an :class:`~quicsm.errors.InputError` naming the file, where in it, and why.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import msgspec

from quicsm.compare.stays import Connection
from quicsm.errors import InputError, reading
from quicsm.formats import checked
from quicsm.inference.annotate import AnnotatedModel
from quicsm.traces.events import StateView, Trace
from quicsm.traces.states import INIT
from quicsm.version import __version__

__all__ = [
    "BUNDLE_FORMAT",
    "BUNDLE_SUFFIX",
    "BUNDLE_FORMAT_VERSION",
    "MAX_BUNDLE_BYTES",
    "Baseline",
    "BaselineSet",
    "BundleConnection",
    "BundleFile",
    "BundleSet",
    "BundleView",
    "bundle_bytes",
    "load_baseline",
    "make_baseline",
    "read_baseline",
    "save_baseline",
]

BUNDLE_SUFFIX = ".qsb"
BUNDLE_FORMAT = "quicsm-baseline"
BUNDLE_FORMAT_VERSION = 1
MAX_BUNDLE_BYTES = 256 << 20
"""Largest decompressed bundle read (a gzip bomb stops here; a 10,000-connection bundle is ~5 MB)."""

EXACT = 1 << 53
"""Largest count or duration a bundle holds: exact as a float (285 years in microseconds), so the
statistics never meet an integer they cannot convert (a 400-digit one stops at the reader)."""
NonNegative = Annotated[int, msgspec.Meta(ge=0, le=EXACT)]
Name = Annotated[str, msgspec.Meta(min_length=1)]


class BundleView(msgspec.Struct, forbid_unknown_fields=True):
    """How events became states (:class:`~quicsm.traces.events.StateView`); new runs are read the same way."""

    phases: bool = True
    recovery: bool = False


class BundleConnection(msgspec.Struct, forbid_unknown_fields=True):
    """One baseline connection: metadata and stays, no events."""

    id: Name
    """Connection id as ``quicsm parse`` gives it (``run-03/server.log.gz:0x5642cce6240``): the witness."""
    cc: str
    states: list[NonNegative]
    """Folded state sequence, as indices into the bundle's ``states`` table."""
    durations_us: list[NonNegative]
    """Stay in each of ``states`` in microseconds (time shares are these over their sum)."""
    events: NonNegative
    duration_us: NonNegative
    """First event to the connection's end."""
    implementation: str | None = None
    version: str | None = None
    labels: dict[str, str] = {}


class BundleSet(msgspec.Struct, forbid_unknown_fields=True):
    """One scenario's connections and the model learned from them."""

    name: Name
    origin: str
    connections: list[BundleConnection]
    model: dict[str, Any]
    """The set's annotated model, the documented model JSON (docs/model-format.md)."""


class BundleFile(msgspec.Struct, forbid_unknown_fields=True):
    """The whole bundle: ``format``/``format_version`` first, so a reader can refuse a newer one by name."""

    format: str
    format_version: int
    tool: str
    """``quicsm X.Y.Z`` that wrote it."""
    view: BundleView
    engine: Name
    """Model engine of every set's model; new runs' models are learned with the same."""
    states: list[Name]
    """State names the connections' ``states`` index."""
    sets: list[BundleSet]
    split_by: str | None = None
    """The label that split the inputs into sets (``--by``), matched against new runs' label values."""


class _Header(msgspec.Struct):
    format: Any = None
    format_version: Any = None


@dataclass(frozen=True, slots=True)
class BaselineSet:
    name: str
    origin: str
    rows: tuple[Connection, ...]
    model: AnnotatedModel


@dataclass(frozen=True, slots=True)
class Baseline:
    """A bundle in memory: each set's connections as compare's rows, with their model."""

    sets: tuple[BaselineSet, ...]
    view: StateView
    engine: str
    tool: str
    split_by: str | None = None
    source: str = "<baseline>"

    @property
    def connections(self) -> int:
        return sum(len(s.rows) for s in self.sets)


def make_baseline(
    sets: Sequence[tuple[str, str, Sequence[Connection]]],
    *,
    view: StateView = StateView(),
    engine: str = "dfg",
    split_by: str | None = None,
) -> Baseline:
    """A baseline of ``(name, origin, rows)`` sets, learning each set's model with ``engine``."""
    from quicsm.compare.comparison import learn_connections

    if not sets:
        raise InputError("a baseline needs at least one set of connections")
    out = []
    for name, origin, rows in sets:
        rows = tuple(r for r in rows if r.states)
        if not rows:
            raise InputError(f"set {name} ({origin}) holds no connection with a state; nothing to keep as baseline")
        out.append(BaselineSet(name, origin, rows, learn_connections(rows, engine, view)))
    return Baseline(tuple(out), view, engine, f"quicsm {__version__}", split_by)


def _to_file(b: Baseline) -> BundleFile:
    names = sorted({s for bs in b.sets for r in bs.rows for s in r.states})
    index = {s: i for i, s in enumerate(names)}
    sets = [
        BundleSet(
            bs.name,
            bs.origin,
            [
                BundleConnection(
                    r.id,
                    r.trace.cc,
                    [index[s] for s in r.states],
                    list(r.durations_us),
                    r.events,
                    r.duration_us,
                    r.trace.implementation,
                    r.trace.version,
                    dict(r.trace.labels),
                )
                for r in bs.rows
            ],
            _stable(bs.model.to_json()),
        )
        for bs in b.sets
    ]
    return BundleFile(
        BUNDLE_FORMAT,
        BUNDLE_FORMAT_VERSION,
        b.tool,
        BundleView(b.view.phases, b.view.recovery),
        b.engine,
        names,
        sets,
        b.split_by,
    )


def _stable(model: dict[str, Any]) -> dict[str, Any]:
    """The model without its timings (``meta`` keys ``*_seconds``, as diagrams leave them out): the
    same inputs give the same bundle bytes, as docs/check.md promises."""
    meta = model.get("meta")
    if isinstance(meta, dict):
        model = {**model, "meta": {k: v for k, v in meta.items() if not k.endswith("_seconds")}}
    return model


def bundle_bytes(b: Baseline) -> bytes:
    """The bundle as written: gzip (level 9, mtime 0) of its JSON."""
    return gzip.compress(msgspec.json.encode(_to_file(b)), compresslevel=9, mtime=0)


def save_baseline(b: Baseline, path: str) -> int:
    """Write ``b`` atomically to ``path`` (``-`` = stdout); returns its size in bytes."""
    from quicsm.files import write_output

    data = bundle_bytes(b)
    write_output(path, data)
    return len(data)


def _raw(path: str) -> bytes | bytearray:
    """The bundle's JSON bytes (gunzipped when gzip), at most MAX_BUNDLE_BYTES."""
    from quicsm.files import read_limited

    return read_limited(path, MAX_BUNDLE_BYTES, "a baseline bundle", starts=b"{")


def _fail(path: str, where: str, what: str) -> InputError:
    return InputError(f"{path}: {where}: {what}")


def read_baseline(data: bytes | bytearray, path: str = "<baseline>") -> Baseline:
    """Decode and check a bundle's bytes (gzip or plain JSON)."""
    if data[:2] == b"\x1f\x8b":
        with reading(path), gzip.GzipFile(fileobj=io.BytesIO(data)) as gz:
            data = gz.read(MAX_BUNDLE_BYTES + 1)
        if len(data) > MAX_BUNDLE_BYTES:
            raise InputError(f"{path}: larger than {MAX_BUNDLE_BYTES >> 20} MiB (decompressed); not a baseline bundle")
    head = checked(data, _Header, f"{path}: not a baseline bundle")
    if head.format != BUNDLE_FORMAT:
        raise _fail(
            path, "format", f"expected {BUNDLE_FORMAT!r}, got {str(head.format)[:40]!r} (not a baseline bundle)"
        )
    if not isinstance(head.format_version, int) or isinstance(head.format_version, bool) or head.format_version < 1:
        raise _fail(path, "format_version", f"expected a version number, got {str(head.format_version)[:40]!r}")
    if head.format_version > BUNDLE_FORMAT_VERSION:
        raise _fail(
            path,
            "format_version",
            f"{head.format_version} is newer than this quicsm reads ({BUNDLE_FORMAT_VERSION}); upgrade quicsm",
        )
    return _from_file(checked(data, BundleFile, path), path)


def _from_file(f: BundleFile, path: str) -> Baseline:
    if len(set(f.states)) != len(f.states):
        raise _fail(path, "states", "a state name appears twice")
    if not f.sets:
        raise _fail(path, "sets", "no set; a baseline holds at least one")
    view = StateView(f.view.phases, f.view.recovery)
    seen_sets: set[str] = set()
    sets = []
    for i, s in enumerate(f.sets):
        where = f"sets[{i}]"
        if s.name in seen_sets:
            raise _fail(path, f"{where}.name", f"set {s.name!r} appears twice")
        seen_sets.add(s.name)
        if not s.connections:
            raise _fail(path, f"{where}.connections", "empty; a set holds at least one connection")
        rows = []
        ids: set[str] = set()
        for j, c in enumerate(s.connections):
            cw = f"{where}.connections[{j}]"
            if c.id in ids:
                raise _fail(path, f"{cw}.id", f"connection {c.id!r} appears twice in set {s.name!r}")
            ids.add(c.id)
            if len(c.states) != len(c.durations_us):
                raise _fail(path, cw, f"{len(c.states)} states but {len(c.durations_us)} durations_us")
            if sum(c.durations_us) > EXACT:
                raise _fail(path, f"{cw}.durations_us", f"add up to more than {EXACT} microseconds (285 years)")
            if not c.states:
                raise _fail(path, f"{cw}.states", "empty; a connection has at least one state")
            bad = next((k for k in c.states if k >= len(f.states)), None)
            if bad is not None:
                raise _fail(path, f"{cw}.states", f"index {bad} out of range (the bundle names {len(f.states)} states)")
            names, durations = tuple(f.states[k] for k in c.states), tuple(c.durations_us)
            if len(names) > 1 and names[0] == INIT and durations[0] == 0:  # saved before Init was a marker only
                names, durations = names[1:], durations[1:]
            trace = Trace(c.id, c.cc, [], c.id.rpartition(":")[2], c.implementation, c.version, (), dict(c.labels))
            rows.append(Connection(trace, names, durations, c.events, c.duration_us, False, True))
        model = AnnotatedModel.from_json(s.model, source=f"{path}: {where}.model")
        if model.model.engine != f.engine:
            raise _fail(path, f"{where}.model.engine", f"{model.model.engine!r}, but the bundle says {f.engine!r}")
        if model.traces != len(rows):
            raise _fail(path, f"{where}.model.traces", f"{model.traces}, but the set holds {len(rows)} connections")
        missing = sorted({n for r in rows for n in r.states} - set(model.model.state_names()))
        if missing:
            raise _fail(path, f"{where}.model", f"has no node for state(s) {', '.join(missing)} its connections visit")
        sets.append(BaselineSet(s.name, s.origin, tuple(rows), model))
    return Baseline(tuple(sets), view, f.engine, f.tool, f.split_by, path)


def load_baseline(path: str) -> Baseline:
    """Read and check the bundle at ``path`` (``-`` = stdin)."""
    from quicsm.files import note_inputs

    name = "<stdin>" if path == "-" else path
    note_inputs([path])
    return read_baseline(_raw(path), name)
