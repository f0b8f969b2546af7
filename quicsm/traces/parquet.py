"""Parquet storage of traces: one row per event; a trace's metadata in the ``meta`` struct column of its
first row (null on its other rows): key, cc, implementation and version as (dictionary) strings, sources
a list, labels a map. The store's version is in the Arrow schema metadata (``quicsm-trace v2``); v1
stores (metadata as JSON text in ``trace_meta``) still read.

Rows are written in row groups as traces arrive (streaming); a trace's rows are contiguous, so reading
back regroups them in order without a sort.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, BinaryIO

from quicsm.errors import InputError
from quicsm.files import atomic_output
from quicsm.traces.events import METRIC_FIELDS, Trace
from quicsm.traces.parquet_parts import Part, Splicer, encode_part

if TYPE_CHECKING:
    import numpy as np

    from quicsm.traces.columnar import SharedMeta, TraceColumns, TraceRecord
    from quicsm.traces.events import TraceMeta

__all__ = [
    "ROWS_PER_GROUP",
    "ObjectBatches",
    "SCHEMA",
    "StoreBatch",
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


STORE_VERSION = 2
"""Written; 1 and 2 are read."""


def _meta_type() -> Any:
    import pyarrow as pa

    text = pa.dictionary(pa.int32(), pa.string())
    return pa.struct(
        [
            ("key", text),
            ("cc", text),
            ("implementation", text),
            ("version", text),
            ("sources", pa.list_(pa.string())),
            ("labels", pa.map_(pa.string(), pa.string())),
        ]
    )


def _schema() -> Any:
    import pyarrow as pa

    fields = [
        pa.field("trace", pa.dictionary(pa.int32(), pa.string())),
        pa.field("meta", _meta_type()),
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


SCHEMA = _schema


def write_parquet(batches: Iterable[TraceColumns | StoreBatch], path: str) -> int:
    """Write trace batches (:class:`~quicsm.traces.columnar.TraceColumns`, trace objects through
    :class:`ObjectBatches`) or batches already in the store's schema (:class:`StoreBatch`, made on Dask
    workers), atomically. Row groups are encoded on other threads (:class:`_Encoders`)."""
    schema = _schema()
    with atomic_output(path) as fh, _Encoders(fh, schema, _writer_options(schema)) as put:
        out = _Writer(lambda table, _: put(table), schema)
        for _ in map(out.put, batches):  # not ``for item in``: it would hold a batch while the next is read
            pass
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
    output in the order given: the file one writer writes, byte for byte. At most as many groups as
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
        self.splicer: Splicer | None = None

    def __call__(self, table: Any) -> None:
        """Encode ``table`` (an Arrow table, or a :class:`Part` encoded already: spliced in its turn)."""
        self.pending.append(
            table if isinstance(table, Part) else self.pool.submit(encode_part, table, self.schema, self.options)
        )
        del table
        while len(self.pending) > self.threads:
            self._splice(self.pending.popleft())

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
                while self.pending:
                    self._splice(self.pending.popleft())
                if self.splicer is None or not self.splicer.close():
                    self._empty()
            elif isinstance(exc, Exception):  # the groups given before the caller's error come first
                for future in self.pending:
                    if not isinstance(future, Part) and isinstance(error := future.exception(), Exception):
                        raise error
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def _empty(self) -> None:
        """A store of no rows: the schema alone."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        with pq.ParquetWriter(pa.PythonFile(self.fh, mode="w"), self.schema, **self.options):
            pass


@dataclass(slots=True)
class StoreBatch:
    """Traces already in the store's schema (a Dask worker's): one row group of whole traces, encoded as
    the writer would encode it (a :class:`~quicsm.traces.parquet_parts.Part`), and its trace count. The
    worker does the encoding and sends the group's compressed Parquet bytes (the large fleet's 1.2 GB
    of qlogs: 5.8 MB); the writer only splices them: the same file."""

    part: Part
    traces: int


def store_batches(batches: Iterable[TraceColumns]) -> list[StoreBatch]:
    """Batches as the row groups :func:`write_parquet` would write (a Dask worker's share of ``parse``),
    each encoded as it is built: memory holds one group's table beside the encoded ones."""
    schema = _schema()
    options = _writer_options(schema)
    out: list[StoreBatch] = []
    w = _Writer(lambda table, traces: out.append(StoreBatch(encode_part(table, schema, options), traces)), schema)
    for _ in map(w.put, batches):
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
    """Each batch written as one row group (a batch holds whole traces: none is split). ``write`` takes
    each row group's table and the number of traces in it."""

    def __init__(self, write: Callable[[Any, int], None], schema: Any) -> None:
        self.write = write
        self.schema = schema
        self.n = 0

    def put(self, item: TraceColumns | StoreBatch) -> None:
        if isinstance(item, StoreBatch):
            self._emit(item.part, item.traces)
        elif len(item):
            for table, traces in _columns_tables(item, self.schema):
                self._emit(table, traces)

    def _emit(self, table: Any, traces: int) -> None:
        self.n += traces
        self.write(table, traces)


def meta_column(
    rows: int,
    firsts: Any,
    keys: list[str],
    ccs: list[str],
    tpl: list[Trace],
    of: list[int],
    which: Any = None,
) -> Any:
    """The ``meta`` column: trace i's key, cc and template ``tpl[of[i]]`` (the rest of its metadata) on its
    first row (``firsts[i]``), null on the others. The templates' parts are encoded once and gathered
    with NumPy: the only Python work per trace is its key and cc. ``which``: only these traces (their
    first rows ``firsts``) are in the column (a row group's slice of a batch); the dictionaries are the
    whole batch's, as a slice of the batch's column holds them."""
    import numpy as np
    import pyarrow as pa

    from quicsm.traces import arrow_arrays as arr
    from quicsm.traces.distinct import ranges

    first = np.asarray(firsts, np.int64)
    pick = np.arange(len(keys)) if which is None else np.asarray(which, np.int64)
    at = np.asarray(of, np.int64)[pick]
    later = np.ones(rows, bool)
    later[first] = False

    def texts(values: list[str], idx: Any, none: Any = None) -> Any:
        """Strings ``values[idx[i]]`` on trace i's first row (null where ``none``)."""
        full = np.zeros(rows, np.int32)
        full[first] = idx
        mask = later.copy()
        if none is not None:
            mask[first] |= none
        return arr.dictionary(full, pa.int32(), values, mask)

    def lists(parts: list[Any]) -> tuple[Any, Any]:
        """Offsets of trace i's list ``parts[of[i]]`` on its first row (empty on the others), and the index
        of each of their entries among the parts' entries in order."""
        count = np.asarray([len(p) for p in parts], np.int64)
        n = count[at]
        lengths = np.zeros(rows + 1, np.int32)
        lengths[first + 1] = n
        offsets = pa.Array.from_buffers(pa.int32(), rows + 1, [None, pa.py_buffer(np.cumsum(lengths, dtype=np.int32))])
        return offsets, ranges((np.cumsum(count) - count)[at], n)

    cc_ids: dict[str, int] = {}
    cc = np.asarray([cc_ids.setdefault(c, len(cc_ids)) for c in ccs], np.int64)
    src_offsets, src = lists([t.sources for t in tpl])
    lab_offsets, lab = lists([t.labels for t in tpl])
    impl, version = ([getattr(t, k) for t in tpl] for k in ("implementation", "version"))
    children = [
        texts(keys, pick),
        texts(list(cc_ids), cc[pick]),
        texts([v or "" for v in impl], at, np.asarray([v is None for v in impl], bool)[at]),
        texts([v or "" for v in version], at, np.asarray([v is None for v in version], bool)[at]),
        pa.ListArray.from_arrays(src_offsets, arr.taken([x for t in tpl for x in t.sources], src)),
        pa.MapArray.from_arrays(
            lab_offsets,
            arr.taken([k for t in tpl for k in t.labels], lab),
            arr.taken([v for t in tpl for v in t.labels.values()], lab),
        ),
    ]
    # from the validity bitmap: StructArray.from_arrays(mask=) inverts the mask with pyarrow.compute,
    # whose import is 50 ms of a one-shot parse
    valid = pa.py_buffer(np.packbits(~later, bitorder="little"))
    return pa.Array.from_buffers(_meta_type(), rows, [valid], null_count=rows - len(first), children=children)


def _columns_tables(tc: TraceColumns, schema: Any) -> Iterator[tuple[Any, int]]:
    """One batch of traces as Arrow tables of the store's schema, built from the columns (no row objects),
    each with the number of traces that end in it: the batch whole, or, for a batch over twice
    :data:`ROWS_PER_GROUP` rows (it holds a trace longer than that), its slices of
    :data:`ROWS_PER_GROUP` rows, built one at a time. A slice's dictionaries are the whole batch's: the
    groups are those ``write_table(whole, row_group_size=ROWS_PER_GROUP)`` writes, and memory holds one
    slice's columns, not the batch's."""
    import numpy as np
    import pyarrow as pa

    from quicsm.traces import arrow_arrays as arr
    from quicsm.traces.columnar import NULL
    from quicsm.traces.events import EVENT_KINDS

    ev = tc.events
    order = tc.order
    total = len(order)
    offsets = np.asarray(tc.offsets, np.int64)
    whole = total <= 2 * ROWS_PER_GROUP
    step = max(total, 1) if whole else ROWS_PER_GROUP

    def dictionary(ids: np.ndarray, field: str, names: list[str] = ev.names) -> Callable[[slice], Any]:
        """Ids into the string table (-1: null), as a dictionary column of each slice holding only the
        strings the batch uses (the table also holds every connection key); a remap by table position, no
        sort (by first appearance for a batch marked ``first_seen``)."""
        index_type = schema.field(field).type.index_type
        if ev.first_seen:
            used = _first_seen(ids)
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
        begins = np.arange(lo, hi)
        begins = begins[offsets[begins] >= start]  # traces whose first row is in the slice
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
        meta = meta_column(
            n, offsets[begins] - start, tc.keys, tc.ccs, tc.shared.templates, tc.shared.of, None if whole else begins
        )
        arrays = {
            "trace": arr.dictionary(trace_of, pa.int32(), trace_ids),
            "meta": meta,
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


def _in_order(order: Any) -> bool:
    """Whether a batch's rows are its events in table order (every batch of qlogs): its columns are then
    sliced, not gathered by ``order``."""
    import numpy as np

    return not len(order) or (order[0] == 0 and bool((np.diff(order) == 1).all()))


def _first_seen(ids: Any) -> Any:
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


def _open_store(path: str, source: BinaryIO | None = None) -> tuple[Any, int]:
    """The file (``source`` when it is open and seekable) and its store version (1: metadata as JSON
    text, 2: as columns)."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(source if source is not None and source.seekable() else path)
    except OSError as exc:
        if exc.errno is not None:  # the file system's error: said by errors.as_quicsm_error
            raise
        raise InputError(f"{path}: not a readable Parquet file ({exc})") from None
    except Exception as exc:  # pyarrow's several types for a file that is not Parquet
        raise InputError(f"{path}: not a readable Parquet file ({exc})") from None
    mark = (pf.schema_arrow.metadata or {}).get(b"quicsm")
    if mark is None:
        raise InputError(f"{path}: Parquet file was not written by quicsm (no quicsm schema metadata)")
    version = {b"quicsm-trace v1": 1, b"quicsm-trace v2": 2}.get(mark)
    if version is None:
        raise InputError(
            f"{path}: store version {mark.decode(errors='replace')!r} is not one this quicsm reads (v1, v2)"
        )
    return pf, version


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


SUMMARY_COLUMNS = ("trace", "meta", "t_us", "state", "kind", "prev", "recovery")
"""What state sequences and stays are made of; metrics, triggers and extras are not read for them."""


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

    pf, version = _open_store(path, source)
    meta = "trace_meta" if version == 1 else "meta"
    columns = None if metrics else [meta if c == "meta" else c for c in SUMMARY_COLUMNS]
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
            yield _table_columns(table, path, version, empty)
        table = later
        pa.default_memory_pool().release_unused()  # the allocator keeps freed groups otherwise (RSS)


def _refuse_nulls(table: Any, path: str, version: int) -> None:
    """Columns every row has, in a store quicsm wrote: a damaged or foreign one is refused, by both
    readers alike, rather than read with invented values (a time of 0, an empty state)."""
    for name in ("trace", "t_us", "kind", *(("trace_meta",) if version == 1 else ())):
        if name in table.column_names and table.column(name).null_count:
            raise InputError(f"{path}: bad Parquet trace file (a row without {name})")


def _trace_at(table: Any, row: int) -> Any:
    return table.column("trace")[row].as_py()


def _table_columns(table: Any, path: str, version: int, empty: bool) -> TraceColumns:
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
