"""Parquet storage of traces: one row per event, the trace id on each; the traces' metadata (key, cc,
implementation, version, sources, labels) once per trace in the Arrow schema's metadata ``quicsm-traces``
(in the file's footer, written when it closes; kept by Arrow tools that rewrite the file), as JSON
declared by :class:`StoreTraces`. The event rows carry no metadata: a row group is written as soon as
its rows are known, whatever is learnt of its traces later, and the writer encodes 8 columns fewer a
row. The store's version is in the Arrow schema metadata too (``quicsm-trace v3``); v2 stores
(metadata in a ``meta`` struct column on each trace's first row) and v1 stores (JSON text in
``trace_meta``) still read.

Rows are written in row groups as traces arrive (streaming); a trace's rows are contiguous, so reading
back regroups them in order without a sort.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, BinaryIO, Literal

import msgspec

from quicsm.errors import InputError
from quicsm.files import atomic_output
from quicsm.formats import checked
from quicsm.traces.events import METRIC_FIELDS, Trace
from quicsm.traces.parquet_parts import Part, Splicer, encode_part

if TYPE_CHECKING:
    import numpy as np

    from quicsm.traces.columnar import SharedMeta, TraceColumns, TraceRecord
    from quicsm.traces.events import TraceMeta

__all__ = [
    "ROWS_PER_GROUP",
    "GroupAhead",
    "ObjectBatches",
    "SCHEMA",
    "StoreBatch",
    "StoreTemplate",
    "StoreTraces",
    "first_seen",
    "group_table",
    "object_batches",
    "read_parquet",
    "store_batches",
    "write_parquet",
]

ROWS_PER_GROUP = 200_000
"""Rows per Parquet row group; the column readers (qlog_columns) close their batches where it closes them
(at the first trace that brings a batch to this many rows). A batch over twice this many rows (it holds
a trace longer than this) is written in row groups of this many rows, a trace then spanning several (the
readers join it): memory holds one group's Arrow columns, not the whole trace's of a 1 GB qlog."""


Dictionaries = dict[str, list[int]]
"""A group's dictionary values for ``state``, ``prev``, ``recovery``, ``trigger`` (ids into the batch's
names) and ``kind`` (into :data:`~quicsm.traces.events.EVENT_KINDS`), in dictionary order."""


@dataclass(slots=True)
class GroupAhead:
    """A row group of a batch still being read (a qlog trace longer than two groups: a 1 GB qlog's one
    connection), built and handed over while the rest is read, so it is encoded meanwhile
    (:class:`~quicsm.traces.qlog_columns.QlogBatcher`'s ``ahead``). The writer holds such groups until the
    batch's end says whether they stand: a batch of no rows (its traces' metadata) keeps them; a batch
    with rows (the whole batch again: the rest broke what the groups assumed, as a time going back)
    replaces them. The file is the one the whole batch makes either way."""

    table: Any
    transitions: bool
    """Whether a row is a transition (what :func:`~quicsm.traces.select.keep_traces` counts)."""


STORE_VERSION = 3
"""Written; 1, 2 and 3 are read."""
TRACES_KEY = b"quicsm-traces"
"""The Arrow schema metadata entry holding a v3 store's :class:`StoreTraces`: ``N:`` then the base64 of
the JSON (N bytes) compressed as one zstd frame (:func:`_pack`)."""


def _schema() -> Any:
    import pyarrow as pa

    fields = [
        pa.field("trace", pa.dictionary(pa.int32(), pa.string())),
        pa.field("t_us", pa.int64()),
        pa.field("state", pa.dictionary(pa.int32(), pa.string())),
        pa.field("kind", pa.dictionary(pa.int8(), pa.string())),
        pa.field("prev", pa.dictionary(pa.int32(), pa.string())),
        *(pa.field(k, pa.int64()) for k in METRIC_FIELDS),
        pa.field("recovery", pa.dictionary(pa.int8(), pa.string())),
        pa.field("trigger", pa.dictionary(pa.int32(), pa.string())),
        pa.field("extra", pa.string()),
    ]
    return pa.schema(fields, metadata={b"quicsm": f"quicsm-trace v{STORE_VERSION}".encode()})


class StoreTemplate(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Metadata that traces share (usually their input file's): what is not a trace's own id, key or cc."""

    implementation: str | None = None
    version: str | None = None
    sources: list[str] = []
    """Input files the traces came from."""
    labels: dict[str, str] = {}


class StoreTraces(msgspec.Struct, kw_only=True):
    """A v3 store's trace metadata (:data:`TRACES_KEY`), trace by trace in row order, as
    columns: trace i is ``ids[i]`` (the id on its rows), ``keys[i]``, ``ccs[i]`` and
    ``templates[shared[i]]``. One JSON text read once per file: no column on 10^6 event rows that is set
    on a few, and it is written at the end, when every trace's cc is known."""

    format: Literal["quicsm-trace-store"]
    v: Literal[3]
    """Store version (``quicsm-trace v3`` in the Arrow schema metadata)."""
    ids: list[str]
    keys: list[str]
    ccs: list[str]
    shared: list[int]
    """Per trace, its entry of ``templates``."""
    templates: list[StoreTemplate]


class TraceIndex:
    """The traces' metadata gathered batch by batch in row order, each distinct template once
    (:class:`StoreTraces` when the store closes)."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.keys: list[str] = []
        self.ccs: list[str] = []
        self.shared: list[int] = []
        self.templates: list[StoreTemplate] = []
        self._seen: dict[tuple[Any, ...], int] = {}

    def add(self, tc: TraceColumns | TraceIndex) -> None:
        """A batch's traces, or another index's (a Dask worker's batch), after these."""
        if isinstance(tc, TraceIndex):
            self._add(tc.ids, tc.keys, tc.ccs, tc.shared, tc.templates)
        else:
            self._add(tc.ids, tc.keys, tc.ccs, tc.shared.of, tc.shared.templates)

    def _add(self, ids: list[str], keys: list[str], ccs: list[str], of: list[int], templates: list[Any]) -> None:
        """Traces whose shared metadata is ``templates[of[i]]`` (Traces or StoreTemplates), each template
        looked up once, not once a trace."""
        mine: dict[int, int] = {}
        for j in of:
            if j not in mine:
                t = templates[j]
                sig = (t.implementation, t.version, tuple(t.sources), tuple(t.labels.items()))
                if (at := self._seen.get(sig)) is None:
                    at = self._seen[sig] = len(self.templates)
                    self.templates.append(
                        StoreTemplate(
                            implementation=sig[0], version=sig[1], sources=list(sig[2]), labels=dict(t.labels)
                        )
                    )
                mine[j] = at
        self.shared.extend(mine[j] for j in of)
        self.ids += ids
        self.keys += keys
        self.ccs += ccs

    def encode(self) -> bytes:
        """The value of :data:`TRACES_KEY`."""
        return _pack(
            msgspec.json.encode(
                StoreTraces(
                    format="quicsm-trace-store",
                    v=3,
                    ids=self.ids,
                    keys=self.keys,
                    ccs=self.ccs,
                    shared=self.shared,
                    templates=self.templates,
                )
            )
        )


def _pack(text: bytes) -> bytes:
    """``text`` compressed for the footer: zstd at level 1 (a 30th of the JSON of 2,000 qlogs' traces, in
    under a millisecond), base64 because a key-value's value is a Thrift string (UTF-8 to some readers),
    behind its length, which the decompressor needs."""
    import base64

    import pyarrow as pa

    return b"%d:%s" % (len(text), base64.b64encode(pa.Codec("zstd", 1).compress(text, asbytes=True)))


def _unpack(value: bytes) -> bytes:
    """:func:`_pack`'s ``text``."""
    import base64

    import pyarrow as pa

    size, _, data = value.partition(b":")
    return pa.Codec("zstd").decompress(base64.b64decode(data, validate=True), int(size), asbytes=True)


SCHEMA = _schema


def write_parquet(batches: Iterable[TraceColumns | StoreBatch | GroupAhead], path: str) -> int:
    """Write trace batches (:class:`~quicsm.traces.columnar.TraceColumns`, trace objects through
    :class:`ObjectBatches`, groups of a batch handed over ahead of it: :class:`GroupAhead`) or batches
    already in the store's schema (:class:`StoreBatch`, made on Dask workers), atomically. Row groups are
    encoded on other threads (:class:`_Encoders`)."""
    schema = _schema()
    with atomic_output(path) as fh, _Encoders(fh, schema, _writer_options(schema)) as put:
        out = _Writer(put, schema)
        for _ in map(out.put, batches):  # not ``for item in``: it would hold a batch while the next is read
            pass
        put.final = schema.with_metadata({**schema.metadata, TRACES_KEY: out.index.encode()})
    return out.n


def _writer_options(schema: Any) -> dict[str, Any]:
    """The Parquet writer's settings. Dictionary pages only for the dictionary columns (numbers rarely
    repeat: trying costs time and space), statistics only for time: half the encoding time, a smaller
    file. zstd level 1 writes as fast as its fast level -3 and the store is smaller: 0.38 against 2.7 MB
    for 2,000 quic-go qlogs of 0.11 MB, 5.7 against 15.3 MB for 200 of 6.2 MB, 1.2 against 1.7 MB for
    traces/ (its default, 3, is 15% slower than -3 on a 300 MB log)."""
    dictionary = [f.name for f in schema if str(f.type).startswith("dictionary")]
    return {"use_dictionary": dictionary, "write_statistics": ["t_us"], "compression": "zstd", "compression_level": 1}


ENCODERS = 2
"""Threads encoding row groups at once (pyarrow encodes and compresses without the GIL) when a second core
is idle at the start (:func:`quicsm.fleet.machine.spare_core`), else one: with the second core busy,
two took 1.02x the CPU and 35 MiB more of the 1 GB qlog's peak for no wall time (n=5, load 4). The file
is the same bytes either way."""


class _Encoders:
    """Row groups encoded on up to :data:`ENCODERS` threads while the caller reads and builds the next, each as
    a Parquet part of its own (:func:`~quicsm.traces.parquet_parts.encode_part`), and spliced into the
    output in the order given: the file one writer writes, byte for byte, opened with ``final`` (the schema
    with the metadata known at the end, set before the block is left). At most as many groups as
    threads wait or are encoded. An encoder's error (a full disk) is raised in the caller, at a later group or at
    the end, and before any error the caller met after that group was given (the order one thread meets
    them in); every encoder has finished when the block is left, so the file is closed (or removed)
    after its last write."""

    def __init__(self, fh: IO[bytes], schema: Any, options: dict[str, Any]) -> None:
        from collections import deque
        from concurrent.futures import ThreadPoolExecutor

        from quicsm.fleet.machine import spare_core

        self.fh, self.schema, self.options = fh, schema, options
        self.threads = ENCODERS if spare_core() else 1
        self.pool = ThreadPoolExecutor(self.threads, thread_name_prefix="quicsm-parquet-writer")
        self.pending: deque[Any] = deque()
        self.held: list[Any] = []
        self.splicer: Splicer | None = None
        self.final = schema

    def __call__(self, table: Any, hold: bool = False) -> None:
        """Encode ``table`` (an Arrow table, or a :class:`Part` encoded already: spliced in its turn);
        ``hold``: kept aside, after the groups given before it, until :meth:`keep` or :meth:`drop`."""
        item = table if isinstance(table, Part) else self.pool.submit(encode_part, table, self.schema, self.options)
        del table
        (self.held if hold else self.pending).append(item)
        del item
        while len(self.pending) + sum(not isinstance(h, Part) for h in self.held) > self.threads:
            if self.pending:
                self._splice(self.pending.popleft())
            else:  # the oldest held group's table let go once encoded: held groups cost their bytes only
                at = next(i for i, h in enumerate(self.held) if not isinstance(h, Part))
                self.held[at] = self.held[at].result()

    def keep(self) -> None:
        """The held groups stand: spliced in their turn."""
        self.pending.extend(self.held)
        self.held.clear()

    def drop(self) -> None:
        """The held groups are not written (their batch comes whole instead)."""
        for h in self.held:
            if not isinstance(h, Part) and not h.cancel():
                h.exception()  # (wait: its table is let go; an error here is met again on the batch)
        self.held.clear()

    def _splice(self, item: Any) -> None:
        part = item if isinstance(item, Part) else item.result()
        del item
        if self.splicer is None:
            self.splicer = Splicer(self.fh)
        self.splicer.add(part)

    def __enter__(self) -> _Encoders:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        try:
            if exc is None:
                if self.held:
                    raise ValueError("row groups ahead of a batch that did not come")
                while self.pending:
                    self._splice(self.pending.popleft())
                if self.splicer is None:  # a store of no rows: the schema alone
                    self.splicer = Splicer(self.fh)
                self.splicer.close(encode_part(None, self.final, self.options))
            elif isinstance(exc, Exception):  # the groups given before the caller's error come first
                for future in (*self.pending, *self.held):
                    if not isinstance(future, Part) and isinstance(error := future.exception(), Exception):
                        raise error
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)


@dataclass(slots=True)
class StoreBatch:
    """Traces already in the store's schema (a Dask worker's): one row group of whole traces, encoded as
    the writer would encode it (a :class:`~quicsm.traces.parquet_parts.Part`), the number of traces that
    end in it, and the metadata of the batch's traces (on its first group; None on the others). The
    worker does the encoding and sends the group's compressed Parquet bytes (the large fleet's 1.2 GB
    of qlogs: 5.8 MB); the writer only splices them: the same file."""

    part: Part
    traces: int
    index: TraceIndex | None


def store_batches(batches: Iterable[TraceColumns | GroupAhead]) -> list[StoreBatch]:
    """Batches as the row groups :func:`write_parquet` would write (a Dask worker's share of ``parse``),
    each encoded as it is built: memory holds one group's table beside the encoded ones. (Read without
    groups ahead: a worker's encoding runs in turn with its reading either way.)"""
    schema = _schema()
    options = _writer_options(schema)
    out: list[StoreBatch] = []

    def put(tc: TraceColumns | GroupAhead) -> None:
        if isinstance(tc, GroupAhead):
            raise TypeError("store_batches takes batches read without groups ahead")
        if len(tc):
            index = TraceIndex()
            index.add(tc)
            for k, (table, traces) in enumerate(_columns_tables(tc, schema)):
                out.append(StoreBatch(encode_part(table, schema, options), traces, None if k else index))

    for _ in map(put, batches):  # not ``for item in``: it would hold a batch while the next is built
        pass
    return out


class ObjectBatches:
    """Trace objects (or a trace file's lines) gathered into column batches
    (:class:`~quicsm.traces.columnar.ColumnBuilder`) that end where the store has always ended its row
    groups for objects (at the trace that brings a group to :data:`ROWS_PER_GROUP` rows; an empty trace
    counted as one), so a store made from them is the one the objects made; empty traces are left out.
    A trace's ``meta`` (its file's) goes over its own."""

    def __init__(self) -> None:
        self._fresh()

    def _fresh(self) -> None:
        from quicsm.traces.columnar import ColumnBuilder

        self.build = ColumnBuilder()
        self.metas: list[TraceMeta | None] = []
        self.rows = 0

    def add(self, t: TraceRecord, meta: TraceMeta | None = None) -> TraceColumns | None:
        self.rows += max(1, len(t.events))
        if t.events:
            self.build.add(t)
            self.metas.append(meta)
        return self.flush() if self.rows >= ROWS_PER_GROUP else None

    def flush(self) -> TraceColumns | None:
        build, metas = self.build, self.metas
        self._fresh()
        if not metas:
            return None
        tc = build.finish()
        if any(metas):
            tc.shared.templates = [m.apply(t) if m else t for t, m in zip(tc.shared.templates, metas)]
            tc.ccs = [m.cc if m and m.cc else cc for cc, m in zip(tc.ccs, metas)]
        return tc


def object_batches(traces: Iterable[Trace]) -> Iterator[TraceColumns]:
    """:class:`ObjectBatches` of ``traces``, in order."""
    gather = ObjectBatches()
    for t in traces:
        if (tc := gather.add(t)) is not None:
            yield tc
    if (tc := gather.flush()) is not None:
        yield tc


class _Writer:
    """Each batch written as one row group, or several for a batch of a trace longer than a group
    (``write`` takes each group's table or encoded part); its traces' metadata gathered in ``index``."""

    def __init__(self, write: _Encoders, schema: Any) -> None:
        self.write = write
        self.schema = schema
        self.index = TraceIndex()
        self.n = 0

    def put(self, item: TraceColumns | StoreBatch | GroupAhead) -> None:
        if isinstance(item, GroupAhead):
            self.write(item.table, hold=True)
            return
        if self.write.held:  # the batch the held groups were ahead of
            if isinstance(item, StoreBatch) or len(item.order):  # whole: the groups did not stand
                self.write.drop()
            else:  # its traces' metadata: the groups stand, unless --where kept none of its traces
                if len(item):
                    self.write.keep()
                else:
                    self.write.drop()
                self.index.add(item)
                self.n += len(item)
                return
        if isinstance(item, StoreBatch):
            if item.index is not None:
                self.index.add(item.index)
            self.n += item.traces
            self.write(item.part)
        elif len(item):
            self.index.add(item)
            for table, traces in _columns_tables(item, self.schema):
                self.n += traces
                self.write(table)


def _columns_tables(tc: TraceColumns, schema: Any, used: Dictionaries | None = None) -> Iterator[tuple[Any, int]]:
    """One batch of traces as Arrow tables of the store's schema, built from the columns (no row objects),
    each with the number of traces that end in it: the batch whole, or, for a batch over twice
    :data:`ROWS_PER_GROUP` rows (it holds a trace longer than that), its slices of
    :data:`ROWS_PER_GROUP` rows, built one at a time. A slice's dictionaries are the whole batch's: the
    groups are those ``write_table(whole, row_group_size=ROWS_PER_GROUP)`` writes, and memory holds one
    slice's columns, not the batch's. ``used``: a ``first_seen`` batch's dictionaries given (the rows of
    one group of a batch still being read, :class:`GroupAhead`): one table, whose dictionaries are those."""
    import numpy as np
    import pyarrow as pa

    from quicsm.traces import arrow_arrays as arr
    from quicsm.traces.columnar import NULL
    from quicsm.traces.events import EVENT_KINDS

    ev = tc.events
    order = tc.order
    total = len(order)
    given = used
    offsets = np.asarray(tc.offsets, np.int64)
    whole = total <= 2 * ROWS_PER_GROUP or used is not None
    step = max(total, 1) if whole else ROWS_PER_GROUP

    def dictionary(ids: np.ndarray, field: str, names: list[str] = ev.names) -> Callable[[slice], Any]:
        """Ids into the string table (-1: null), as a dictionary column of each slice holding only the
        strings the batch uses (the table also holds every connection key); a remap by table position, no
        sort (by first appearance for a batch marked ``first_seen``)."""
        index_type = schema.field(field).type.index_type
        if given is not None:
            used = np.asarray(given[field], np.int64)
        elif ev.first_seen:
            used = first_seen(ids)
        else:
            used = np.flatnonzero(np.bincount(ids[ids >= 0], minlength=len(names))) if len(ids) else ids[:0]
        if not len(used):  # no value in the batch (a qlog's prev, recovery and trigger)
            none = pa.dictionary(index_type, pa.string())
            return lambda part: pa.nulls(part.stop - part.start, none)
        remap = np.zeros(len(names) + 1, index_type.to_pandas_dtype())
        remap[used] = np.arange(len(used))
        values = [names[i] for i in used.tolist()]
        nulls = bool(ids.min() < 0)
        return lambda part: arr.dictionary(
            np.take(remap, ids[part]), index_type, values, ids[part] < 0 if nulls else None
        )

    trace_ids = tc.ids
    trace_index = None
    if ev.first_seen and len(set(trace_ids)) < len(trace_ids):  # one dictionary entry per distinct id
        index: dict[str, int] = {}
        trace_index = np.asarray([index.setdefault(i, len(index)) for i in trace_ids], np.int32)
        trace_ids = list(index)
    ordered = _in_order(order)

    def taken(values: np.ndarray) -> np.ndarray:
        return values[:total] if ordered else values[order]

    if ev.first_seen:
        kind = dictionary(taken(ev.kind), "kind", list(EVENT_KINDS))
    else:
        kind = lambda part: arr.dictionary(ev.kind[order[part]], pa.int8(), list(EVENT_KINDS))  # noqa: E731
    texts = {
        name: dictionary(taken(ids), name)
        for name, ids in (("state", tc.state), ("prev", ev.prev), ("recovery", ev.recovery), ("trigger", ev.trigger))
    }
    for start in range(0, total, step):
        part = slice(start, min(start + step, total))
        rows: Any = part if ordered else order[part]
        n = part.stop - part.start
        # the traces in the slice: those that end after its start and begin before its end
        if whole:
            lo, hi = 0, len(tc)
        else:
            lo = int(np.searchsorted(offsets[1:], start, side="right"))
            hi = int(np.searchsorted(offsets[:-1], part.stop, side="left"))
        bounds: np.ndarray = np.minimum(np.maximum(offsets[lo : hi + 1], start), part.stop)
        trace_of = np.repeat(np.arange(lo, hi, dtype=np.int32), np.diff(bounds))
        if trace_index is not None:
            trace_of = trace_index[trace_of]
        metrics = np.ascontiguousarray(ev.metrics[rows].T)  # one contiguous row per metric (take on .T copies it whole)
        if ev.extra:
            extra: list[str | None] = [None] * n
            at = {r: i for i, r in enumerate(order[part].tolist())}
            for r, fields in ev.extra.items():
                if r in at:
                    extra[at[r]] = json.dumps([list(p) for p in fields], separators=(",", ":"))
            extras = pa.array(extra, pa.string())
        else:
            extras = pa.nulls(n, pa.string())
        arrays = {
            "trace": arr.dictionary(trace_of, pa.int32(), trace_ids),
            "t_us": arr.ints(ev.t_us[rows], pa.int64()),
            "state": texts["state"](part),
            "kind": kind(part),
            "prev": texts["prev"](part),
            **{k: arr.ints(metrics[j], pa.int64(), metrics[j] == NULL) for j, k in enumerate(METRIC_FIELDS)},
            "recovery": texts["recovery"](part),
            "trigger": texts["trigger"](part),
            "extra": extras,
        }
        del metrics
        ends = int(np.count_nonzero((offsets[1:] > start) & (offsets[1:] <= part.stop)))
        yield pa.table(arrays, schema=schema), ends


def group_table(tc: TraceColumns, used: Dictionaries) -> Any:
    """The rows of ``tc`` (a ``first_seen`` batch's, in order) as one row group's table whose dictionaries
    are ``used`` (:class:`GroupAhead`)."""
    return next(_columns_tables(tc, _schema(), used))[0]


def _in_order(order: Any) -> bool:
    """Whether a batch's rows are its events in table order (every batch of qlogs): its columns are then
    sliced, not gathered by ``order``."""
    import numpy as np

    return not len(order) or (order[0] == 0 and bool((np.diff(order) == 1).all()))


def first_seen(ids: Any) -> Any:
    """The ids (>= 0) found in ``ids``, in order of first appearance: a value first appears where a run of
    equal values starts, so only the runs' first values are sorted (states change seldom)."""
    import numpy as np

    if not len(ids):
        return ids[:0]
    runs = ids[np.r_[0, np.flatnonzero(ids[1:] != ids[:-1]) + 1]]
    used, first = np.unique(runs[runs >= 0], return_index=True)
    return used[np.argsort(first, kind="stable")]


def read_parquet(path: str) -> Iterator[Trace]:
    """Traces back from :func:`write_parquet`'s file, empty ones too; InputError (one line) for a damaged
    or foreign file."""
    for batch in _one_line_errors(path, _read_parquet_columns(path, True, empty=True)):
        yield from batch.traces()


def _one_line_errors(path: str, items: Iterator[Any]) -> Iterator[Any]:
    try:
        yield from items
    except InputError:
        raise
    except Exception as exc:  # pyarrow's errors, and wrong shapes/types in rows or trace_meta
        raise InputError(f"{path}: bad Parquet trace file ({type(exc).__name__}: {str(exc)[:200]})") from None


def _open_store(path: str, source: BinaryIO | None = None) -> tuple[Any, int, _Footer | None]:
    """The file (``source`` when it is open and seekable), its store version (1: metadata as JSON
    text, 2: as columns, 3: in the footer) and a v3 store's metadata."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(source if source is not None and source.seekable() else path)
    except OSError as exc:
        if exc.errno is not None:  # the file system's error: said by errors.as_quicsm_error
            raise
        raise InputError(f"{path}: not a readable Parquet file ({exc})") from None
    except Exception as exc:  # pyarrow's several types for a file that is not Parquet
        raise InputError(f"{path}: not a readable Parquet file ({exc})") from None
    marks = pf.schema_arrow.metadata or {}
    mark = marks.get(b"quicsm")
    if mark is None:
        raise InputError(f"{path}: Parquet file was not written by quicsm (no quicsm schema metadata)")
    version = {b"quicsm-trace v1": 1, b"quicsm-trace v2": 2, b"quicsm-trace v3": 3}.get(mark)
    if version is None:
        raise InputError(
            f"{path}: store version {mark.decode(errors='replace')!r} is not one this quicsm reads (v1, v2, v3)"
        )
    if version < 3:
        return pf, version, None
    raw = marks.get(TRACES_KEY)
    if raw is None:
        raise InputError(f"{path}: bad Parquet trace file (no {TRACES_KEY.decode()} in its schema metadata)")
    try:
        text = _unpack(raw)
    except Exception as exc:  # binascii's, int's, the decompressor's
        raise InputError(f"{path}: bad Parquet trace file ({TRACES_KEY.decode()}: {exc})") from None
    return pf, version, _Footer(checked(text, StoreTraces, f"{path}: {TRACES_KEY.decode()}"), path)


class _Footer:
    """A v3 store's :class:`StoreTraces`, handed out batch by batch in row order."""

    def __init__(self, doc: StoreTraces, path: str) -> None:
        n = len(doc.ids)
        if not (len(doc.keys) == len(doc.ccs) == len(doc.shared) == n) or not all(
            0 <= j < len(doc.templates) for j in doc.shared
        ):
            raise InputError(f"{path}: bad Parquet trace file ({TRACES_KEY.decode()}: lists out of step)")
        self.doc = doc
        self.at = 0
        self.shells = [
            Trace("", "", [], "", t.implementation, t.version, tuple(t.sources), t.labels) for t in doc.templates
        ]

    def take(self, ids: list[str]) -> tuple[tuple[list[str], list[str], list[str]], SharedMeta]:
        """The metadata of the next traces, whose rows hold ``ids``: the ids, keys and ccs, and the
        templates the batch uses."""
        from quicsm.traces.columnar import SharedMeta

        lo, hi, doc = self.at, self.at + len(ids), self.doc
        if hi > len(doc.ids):
            raise ValueError(f"{TRACES_KEY.decode()} has {len(doc.ids)} traces, the rows more")
        if doc.ids[lo:hi] != ids:
            at = lo + next(i for i, (a, b) in enumerate(zip(doc.ids[lo:hi], ids)) if a != b)
            raise ValueError(f"{TRACES_KEY.decode()} differs from the rows' traces at trace {at}")
        self.at = hi
        used: dict[int, int] = {}
        of = [used.setdefault(j, len(used)) for j in doc.shared[lo:hi]]
        return (ids, doc.keys[lo:hi], doc.ccs[lo:hi]), SharedMeta([self.shells[j] for j in used], of)


def _shell(m: dict[str, Any]) -> Trace:
    """A trace without events from its metadata (a decoded v1 text, or a v2 ``meta`` row)."""
    labels = m.get("labels") or {}
    return Trace(
        id=m.get("id", ""),
        cc=m["cc"],
        events=[],
        key=m.get("key", ""),
        implementation=m.get("implementation"),
        version=m.get("version"),
        sources=tuple(m.get("sources") or ()),
        labels=dict(labels),
    )


SUMMARY_COLUMNS = ("trace", "t_us", "state", "kind", "prev", "recovery")
"""What state sequences and stays are made of (and, in v1 and v2 stores, the metadata column); metrics,
triggers and extras are not read for them."""


def read_parquet_columns(path: str, *, metrics: bool = True, source: BinaryIO | None = None) -> Iterator[TraceColumns]:
    """The store read back as column batches (one per row group; a trace split across groups is joined),
    without a Python object per event: what summaries and inference read. Empty traces are left out,
    as :func:`quicsm.traces.parse_inputs` leaves them out. ``metrics=False`` reads only
    :data:`SUMMARY_COLUMNS` (metrics come back unknown, no triggers or extras): enough for summaries,
    and the rest of the file is never decompressed. ``source``: the file already open (read from there,
    not opened again). InputError (one line) for a damaged file."""
    yield from _one_line_errors(path, _read_parquet_columns(path, metrics, source=source))


def _read_parquet_columns(
    path: str, metrics: bool, *, empty: bool = False, source: BinaryIO | None = None
) -> Iterator[TraceColumns]:
    import numpy as np
    import pyarrow as pa

    pf, version, footer = _open_store(path, source)
    meta = {1: ("trace_meta",), 2: ("meta",)}.get(version, ())
    columns = None if metrics else [*SUMMARY_COLUMNS, *meta]
    groups = pf.num_row_groups
    table: Any = pf.read_row_group(0, columns=columns) if groups else None
    for g in range(groups):
        later = pf.read_row_group(g + 1, columns=columns) if g + 1 < groups else None
        if later is not None and table.num_rows and later.num_rows and _trace_at(table, -1) == _trace_at(later, 0):
            # the group's last trace goes on in the next one (stores written row by row, or by other
            # tools): its rows move there. quicsm's columnar writer ends groups at trace boundaries.
            idx = _ints(table.column("trace").combine_chunks().indices, -1)
            other = np.flatnonzero(idx != idx[-1])
            last = int(other[-1]) + 1 if len(other) else 0
            later = pa.concat_tables([table.slice(last), later]).unify_dictionaries().combine_chunks()
            table = table.slice(0, last)
        if table.num_rows:
            yield _table_columns(table, path, version, empty, footer)
        table = later
        pa.default_memory_pool().release_unused()  # the allocator keeps freed groups otherwise (RSS)
    if footer is not None and footer.at != len(footer.doc.ids):
        raise ValueError(f"{TRACES_KEY.decode()} has {len(footer.doc.ids)} traces, the rows {footer.at}")


def _refuse_nulls(table: Any, path: str, version: int) -> None:
    """Columns every row has, in a store quicsm wrote: a damaged or foreign one is refused, by both
    readers alike, rather than read with invented values (a time of 0, an empty state)."""
    for name in ("trace", "t_us", "kind", *(("trace_meta",) if version == 1 else ())):
        if name in table.column_names and table.column(name).null_count:
            raise InputError(f"{path}: bad Parquet trace file (a row without {name})")


def _trace_at(table: Any, row: int) -> Any:
    return table.column("trace")[row].as_py()


def _table_columns(table: Any, path: str, version: int, empty: bool, footer: _Footer | None) -> TraceColumns:
    import numpy as np

    from quicsm.traces.columnar import NULL, EventColumns, SharedMeta, TraceColumns
    from quicsm.traces.events import EVENT_KINDS

    n = table.num_rows
    cols = {name: table.column(name).combine_chunks() for name in table.column_names}
    names: list[str] = []
    index: dict[str, int] = {}

    def ids(field: str) -> np.ndarray:
        """A dictionary column as ids into ``names`` (-1 for null)."""
        arr = cols[field]
        values = [index.setdefault(v, len(index)) for v in arr.dictionary.to_pylist()]
        names.extend(list(index)[len(names) :])
        return np.asarray(values + [-1], np.int32)[_ints(arr.indices, len(values))]

    kind_names = cols["kind"].dictionary.to_pylist()
    kind_map = np.asarray([EVENT_KINDS.index(k) if k in EVENT_KINDS else -1 for k in kind_names] + [-1], np.int8)
    kind = kind_map[_ints(cols["kind"].indices, len(kind_names))]
    if (kind < 0).any() and not set(kind_names) <= {*EVENT_KINDS, "none"}:
        raise InputError(f"{path}: bad Parquet trace file (unknown event kind in {kind_names})")
    trace_idx = _ints(cols["trace"].indices, -1)
    starts = np.flatnonzero(np.r_[True, trace_idx[1:] != trace_idx[:-1]]) if n else np.zeros(0, np.int64)
    _refuse_nulls(table, path, version)
    if version == 1:
        texts = cols["trace_meta"].dictionary.to_pylist()
        shells = [_shell(json.loads(texts[i])) for i in _ints(cols["trace_meta"].indices, 0)[starts].tolist()]
        ids_keys_ccs = ([t.id for t in shells], [t.key for t in shells], [t.cc for t in shells])
        stored = SharedMeta(shells, list(range(len(shells))))
    elif footer is not None:
        ids_keys_ccs, stored = footer.take(_texts(cols["trace"], starts, "id"))
    else:
        ids_keys_ccs, stored = _stored_meta(cols, starts)
    real = kind >= 0  # "none" rows stand for empty traces: left out
    counts = np.add.reduceat(real.astype(np.int64), starts) if n else np.zeros(0, np.int64)
    keep_trace = counts >= 0 if empty else counts > 0
    offsets = np.zeros(int(keep_trace.sum()) + 1, np.int64)
    np.cumsum(counts[keep_trace], out=offsets[1:])
    if n and all(k in cols for k in METRIC_FIELDS):
        metrics = np.stack([_ints(cols[k], NULL) for k in METRIC_FIELDS], axis=1)
    else:  # not read (summaries): one read-only "unknown" broadcast over the rows
        metrics = np.broadcast_to(np.int64(NULL), (n, len(METRIC_FIELDS)))
    extra: dict[int, tuple[tuple[str, str], ...]] = {}
    if "extra" in cols and cols["extra"].null_count < n:
        for r, text in enumerate(cols["extra"].to_pylist()):
            if text:
                extra[r] = tuple((k, v) for k, v in json.loads(text))
    zeros = np.zeros(n, np.int32)
    state = ids("state")
    if ((state < 0) & (kind >= 0)).any():  # only the placeholder rows of empty traces have none
        raise InputError(f"{path}: bad Parquet trace file (an event without a state)")
    ev = EventColumns(
        line=np.zeros(n, np.int64),
        src=zeros,
        conn=zeros,
        cc=zeros,
        t_us=_ints(cols["t_us"], 0),
        prev=ids("prev"),
        state=state,
        kind=np.maximum(kind, 0),
        metrics=metrics,
        trigger=ids("trigger") if "trigger" in cols else np.full(n, -1, np.int32),
        recovery=ids("recovery"),
        names=names,
        extra=extra,
    )
    kept = np.flatnonzero(keep_trace).tolist()
    tid, key, tcc = ([part[i] for i in kept] for part in ids_keys_ccs)
    return TraceColumns(
        ev,
        np.flatnonzero(real),
        offsets,
        tid,
        key,
        tcc,
        state,
        SharedMeta(stored.templates, [stored.of[i] for i in kept]),
    )


def _stored_meta(cols: dict[str, Any], starts: np.ndarray) -> tuple[tuple[list[str], list[str], list[str]], SharedMeta]:
    """The v2 metadata of a batch's traces (on their first rows, ``starts``): ids, keys and ccs, and the
    rest kept once per distinct value (found on the columns' value ids, not per trace in Python)."""
    import numpy as np

    from quicsm.traces.columnar import SharedMeta

    meta = cols["meta"]
    if _nulls(meta)[starts].any():
        raise ValueError("a trace without its metadata")
    field = meta.field
    owned = (
        _texts(cols["trace"], starts, "id"),
        _texts(field("key"), starts, "key"),
        _texts(field("cc"), starts, "cc"),
    )
    labels = field("labels")
    value = _value_ids(labels.values.field("value"))
    signature = np.hstack(
        [
            _value_ids(field("implementation"))[starts, None],
            _value_ids(field("version"))[starts, None],
            _segments(field("sources"), starts, _value_ids(field("sources").values)),
            _segments(
                labels, starts, _value_ids(labels.values.field("key")) * (int(value.max(initial=0)) + 2) + value + 1
            ),
        ]
    )
    _, first, of = np.unique(signature, axis=0, return_index=True, return_inverse=True)
    templates = [_shell(meta[j].as_py()) for j in starts[first].tolist()]
    return owned, SharedMeta(templates, of.reshape(-1).tolist())


def _nulls(arr: Any) -> np.ndarray:
    """Per entry of an Arrow array, whether it is null (from its validity bitmap)."""
    import numpy as np

    bits = arr.buffers()[0]
    if bits is None or not arr.null_count:
        return np.zeros(len(arr), bool)
    return np.unpackbits(np.frombuffer(bits, np.uint8), bitorder="little")[arr.offset : arr.offset + len(arr)] == 0


def _texts(col: Any, starts: np.ndarray, name: str) -> list[str]:
    """The strings of a dictionary column at rows ``starts`` (none of them null)."""
    values = col.dictionary.to_pylist()
    idx = _ints(col.indices, -1)[starts]
    if (idx < 0).any():
        raise ValueError(f"a trace without its {name}")
    return [values[i] for i in idx.tolist()]


def _value_ids(arr: Any) -> np.ndarray:
    """Per entry, an id of its value (equal values, equal ids; -1 for null)."""
    import numpy as np
    import pyarrow as pa

    ids: dict[object, int] = {None: -1}
    if pa.types.is_dictionary(arr.type):
        remap = [ids.setdefault(v, len(ids) - 1) for v in arr.dictionary.to_pylist()]
        return np.asarray(remap + [-1], np.int64)[_ints(arr.indices, len(remap))]
    return np.asarray([ids.setdefault(v, len(ids) - 1) for v in arr.to_pylist()], np.int64)


def _segments(lists: Any, starts: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Per row in ``starts``, its list's length and entries' ids (into ``lists.values``) padded with -2:
    equal rows, equal lists."""
    import numpy as np

    bounds = _ints(lists.offsets, 0)
    lengths = bounds[starts + 1] - bounds[starts]
    out = np.full((len(starts), int(lengths.max(initial=0)) + 1), -2, np.int64)
    out[:, 0] = lengths
    heads = np.cumsum(lengths) - lengths
    at = np.arange(int(lengths.sum())) - np.repeat(heads, lengths)
    out[np.repeat(np.arange(len(starts)), lengths), at + 1] = ids[np.repeat(bounds[starts], lengths) + at]
    return out


def _ints(arr: Any, fill: int) -> Any:
    """An Arrow integer array as int64 NumPy values, ``fill`` where null (no float round trip)."""
    import numpy as np

    bufs = arr.buffers()
    start, n = arr.offset, len(arr)
    if bufs[1] is None or n == 0:
        return np.full(n, fill, np.int64)
    values = np.frombuffer(bufs[1], arr.type.to_pandas_dtype(), count=start + n)[start:].astype(np.int64)
    if arr.null_count:
        values[_nulls(arr)] = fill
    return values
