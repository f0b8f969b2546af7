"""The columnar data path for text logs: contract records as NumPy columns, traces as row ranges.

The C scanner (``_scan.scan_columns``) writes every contract line (any field order, ``inf``, extra
fields) straight into integer columns, with connection keys, controllers, states and triggers interned
once per file; only lines the contract refuses (and the rare controller name that is not ASCII) go
through the Python reader, which reports them. Traces are then cut out of the
columns with array operations, following exactly the rules of the oracle in tests/traces/oracle.py
(keys scoped to the file, ``from=Init`` restarts a key, ``ev=close`` ends one, traces come out in the
order the builder finishes them). No Python object is made per event unless a caller asks for
:class:`~quicsm.traces.events.Trace` objects; the Parquet store and the sequence summary that
inference learns from are written from the columns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, BinaryIO

import numpy as np

from quicsm.errors import truncated
from quicsm.traces import native
from quicsm.traces.contract import TAG_BYTES, ContractError, parse_payload
from quicsm.traces.distinct import PackedSequences, ranges, stable_argsort, unique_inverse
from quicsm.traces.events import EVENT_KINDS, METRIC_FIELDS, StateView, Trace, TraceEvent, TraceMeta
from quicsm.traces.logscan import BINARY_INPUT, ScanState, find_tagged_py, scan_windows
from quicsm.traces.report import ParseReport
from quicsm.traces.states import INIT, canonical_state
from quicsm.traces.visits import stays

__all__ = [
    "BATCH_FILES",
    "MAX_CONN_EVENTS",
    "BATCH_ROWS",
    "ColumnBuilder",
    "ColumnReader",
    "columns_of",
    "EventColumns",
    "LogSource",
    "TraceColumns",
    "SharedMeta",
    "TraceCutter",
    "intern",
    "stay_sequences",
    "available",
    "scan_columns_py",
    "scan_files_py",
]

NULL = np.iinfo(np.int64).min
"""A metric the record did not carry."""
_CLOSE = EVENT_KINDS.index("close")


Fallback = list[tuple[int, int, bytes]]
"""Rows a scanner leaves to the Python reader: (row, line, payload)."""
Side = list[tuple[int, int, int, tuple[tuple[str, str], ...] | None]]
"""What a scanned row has beyond the columns: (row, event kind, recovery id or -1, extra fields or None)."""


def scan_columns_py(
    buf: bytearray, start: int, cut: int, tag: bytes, lineno: int, table: dict[bytes, int], names: list[str]
) -> tuple[tuple[bytes, ...], Fallback, int, Side]:
    """The pure-Python twin of the C ``scan_columns``: every tagged line goes to the Python reader, so
    the columns are the same, only slower. Its rows are the placeholders the C scanner leaves for the
    Python reader (no string: -1, time 0, no metric), which a line that breaks the contract keeps until
    it is dropped."""
    hits, end = find_tagged_py(buf, start, cut, lineno)
    n = len(hits)
    line = np.fromiter((h[0] for h in hits), np.int64, n).tobytes()
    i32, i64 = np.full(n, -1, np.int32).tobytes(), bytes(8 * n)
    raw = (line, i32, i32, i64, i32, i32, np.full(7 * n, NULL, np.int64).tobytes(), i32)
    return raw, [(i, ln, payload) for i, (ln, payload) in enumerate(hits)], end, []


def scan_files_py(
    buf: bytes, bounds: bytes, tag: bytes, table: dict[bytes, int], names: list[str]
) -> tuple[tuple[bytes, ...], Fallback, bytes, Side]:
    """The twin of the C ``scan_files``: whole files joined in ``buf`` (file ``i`` at ``bounds[i]`` to
    ``bounds[i + 1]``, int64), each scanned from its line 1; a ninth column numbers each row's file; and
    each file's line count."""
    edges = np.frombuffer(bounds, np.int64).tolist()
    parts: list[tuple[bytes, ...]] = []
    fallback: Fallback = []
    side: Side = []
    lines, src, rows = [], [], 0
    for i, (a, b) in enumerate(zip(edges, edges[1:])):
        raw, fb, end, sd = _scan_columns(buf, a, b, tag, 1, table, names)
        fallback.extend((rows + r, ln, payload) for r, ln, payload in fb)
        side.extend((rows + r, kind, recovery, extra) for r, kind, recovery, extra in sd)
        n = len(raw[0]) // 8
        parts.append(raw)
        src.append(np.full(n, i, np.int32).tobytes())
        rows += n
        lines.append(end - 1 + (b > a and buf[b - 1] != 10))
    cols = tuple(b"".join(p[j] for p in parts) for j in range(8)) + (b"".join(src),)
    return cols, fallback, np.asarray(lines, np.int64).tobytes(), side


_c = native.load("quicsm.traces._scan", native.SCAN_ABI)
_scan_columns: Any = _c.scan_columns if _c is not None else scan_columns_py
_scan_files: Any = _c.scan_files if _c is not None else scan_files_py


def available() -> bool:
    """Whether the C scanner is built (without it, :func:`scan_columns_py` fills the same columns)."""
    return _scan_columns is not scan_columns_py


@dataclass(slots=True)
class EventColumns:
    """Contract records in log order, of one or more files. String columns are ids into ``names`` (-1: none)."""

    line: np.ndarray
    src: np.ndarray
    """Per row: the index of its file among the batch's sources (a batch holds many small files)."""
    conn: np.ndarray
    cc: np.ndarray
    t_us: np.ndarray
    prev: np.ndarray
    state: np.ndarray
    """Canonical state after the record; -1 where the record named none (update, metrics, close)."""
    kind: np.ndarray
    """Index into :data:`~quicsm.traces.events.EVENT_KINDS`."""
    metrics: np.ndarray
    """``(rows, 7)`` in :data:`~quicsm.traces.events.METRIC_FIELDS` order; :data:`NULL` where absent."""
    trigger: np.ndarray
    recovery: np.ndarray
    names: list[str]
    extra: dict[int, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    """Fields the contract does not name, by row (rare: only records the Python reader parsed)."""
    problems: list[Problem] = field(default_factory=list)
    """Problems met while reading these records, not reported yet."""
    first_seen: bool = False
    """A store writes this batch's string dictionaries in order of first appearance, as it writes trace
    objects (qlog batches: their stores stay the bytes the object path wrote), not in table order."""

    def __len__(self) -> int:
        return len(self.t_us)

    def take(self, rows: np.ndarray) -> EventColumns:
        """These rows (in this order), sharing the string table."""
        where = {int(r): i for i, r in enumerate(rows.tolist())} if self.extra else {}
        arrays: dict[str, Any] = {k: getattr(self, k)[rows] for k in _ARRAYS}
        extra = {where[r]: v for r, v in self.extra.items() if r in where}
        return EventColumns(**arrays, names=self.names, extra=extra)  # problems stay with the batch that reported them


_ARRAYS = ("line", "src", "conn", "cc", "t_us", "prev", "state", "kind", "metrics", "trigger", "recovery")
_SCANNED = ("line", "conn", "cc", "t_us", "prev", "state", "metrics", "trigger")
"""The columns the scanner fills, in the order of its chunks."""


@dataclass(frozen=True, slots=True)
class Problem:
    """A problem record of a batch: reported when the batch is cut, in file and line order, so the first
    one reported (the error under ``--strict``) is the first problem in the file."""

    src: int
    line: int
    reason: str
    kind: str

    @property
    def order(self) -> tuple[int, int, int]:
        # said of the whole file, after its other problems: binary input (reported at line 1), then a
        # gzip stream that broke without the reader noticing (line 0)
        return (self.src, 2 if self.line == 0 else self.kind == "binary input", self.line)


@dataclass(frozen=True, slots=True)
class LogSource:
    """One text log of a batch: its path, trace-id scope and the metadata every trace of it gets."""

    path: str
    scope: str
    meta: TraceMeta

    def template(self) -> Trace:
        m = self.meta
        return Trace("", "", [], "", m.implementation, m.version, (self.path,), dict(m.labels))


class _Columns:
    """Growing per-window column chunks, the batch's string table and its files."""

    def __init__(self) -> None:
        self.table: dict[bytes, int] = {}
        self.names: list[str] = []
        self.reset()

    def reset(self) -> None:
        """Start the next batch (the string table stays: a file goes on in it)."""
        self.chunks: list[list[np.ndarray]] = []
        self.src: list[np.ndarray] = []
        """Per chunk: per row, the index of its file among the batch's sources."""
        self.kind: list[tuple[int, int]] = []
        self.recovery: list[tuple[int, int]] = []
        self.extra: dict[int, tuple[tuple[str, str], ...]] = {}
        self.dropped: list[int] = []
        self.problems: list[Problem] = []
        self.rows = 0

    def intern(self, text: str | None) -> int:
        return intern(self.table, self.names, text)


def intern(table: dict[bytes, int], names: list[str], text: str | None) -> int:
    """The id of ``text`` in a string table (the C scanner's: UTF-8 bytes -> id, ``names`` by id), added
    when new; -1 for None."""
    if text is None:
        return -1
    key = text.encode("utf-8", "surrogatepass")
    hit = table.get(key)
    if hit is None:
        hit = table[key] = len(names)
        names.append(text)
    return hit


BATCH_ROWS = 1 << 17
"""Records per batch: memory holds one batch and the open connections' records, whatever the file size.
Batches run on from file to file, so most are full: at 2^18, parse -o x.parquet of 4 x 300 MB logs
peaked at 208 MB, at 2^17 at 156 MB, in the same time."""
BATCH_FILES = 1 << 13
"""Files per batch at most: a batch's memory is mostly per trace and per file when files are small
(10^6 files of ~1 KB: 2 KB a file; 75,000 of them held 140 MB, 8,192 hold 16 MB)."""
MAX_CONN_EVENTS = 1 << 20
"""Records one connection of a text log may hold (1 Mi, about 100 MB of columns): a file whose open
connection goes past it is not read further (reported), so a log of one endless connection (a gzip of
valid lines) stops in bounded memory and time instead of carrying ever more records from batch to batch."""
JOIN_BYTES = 1 << 20
"""Small files read whole are joined up to this size and scanned in one call (:meth:`ColumnReader.add`)."""


def _views(raw: tuple[bytes, ...]) -> list[np.ndarray]:
    """The scanner's raw columns as arrays (line, conn, cc, t_us, prev, state, metrics, trigger[, src])."""
    types = (np.int64, np.int32, np.int32, np.int64, np.int32, np.int32, np.int64, np.int32, np.int32)
    cols = [np.frombuffer(r, t) for r, t in zip(raw, types)]
    cols[6] = cols[6].reshape(-1, 7)
    return cols


class ColumnReader:
    """Text logs read one after the other into column batches of whole traces.

    Fixed costs are paid once per run, not per file: one window buffer, one string table per batch, one
    cutter. Small files read whole are joined and scanned in one call (:meth:`add`); larger ones are
    streamed in windows (:meth:`read`). A batch gathers files until it holds ``batch_rows`` records or
    ``batch_files`` files; a file larger than that is cut inside, the records of its connections
    still open carried to the next batch. Each file's traces come out in the order the oracle in tests/traces/oracle.py gives them,
    files in the order read.
    """

    def __init__(
        self,
        report: ParseReport,
        on_bytes: Callable[[int], None] | None = None,
        *,
        chunk: int | None = None,
        batch_rows: int = BATCH_ROWS,
        batch_files: int = BATCH_FILES,
        max_events: int = MAX_CONN_EVENTS,
    ) -> None:
        self.report, self.on_bytes, self.chunk = report, on_bytes, chunk
        self.mapped = _c is not None
        """Plain files scanned in their mapping (the C scanner reads it; the Python twin reads windows)."""
        self.batch_rows, self.batch_files, self.max_events = batch_rows, batch_files, max_events
        self.acc = _Columns()
        self.st = ScanState()
        self.cutter = TraceCutter(report)
        self.sources: list[LogSource] = []
        """The files of the batch being gathered; the last one may still be read."""
        self.joined: list[bytes] = []
        """Small files read whole, not scanned yet (the last of :attr:`sources`)."""
        self.joined_bytes = 0

    def _problem(self, path: str, line: int, reason: str, kind: str) -> None:
        self.acc.problems.append(Problem(len(self.sources) - 1, line, reason, kind))

    def add(self, data: bytes, path: str, scope: str, meta: TraceMeta) -> list[TraceColumns]:
        """A small log read whole: joined with the next ones, scanned with them in one call. Returns the
        batches that filled up (mostly none)."""
        self.sources.append(LogSource(path, scope, meta))
        self.joined.append(data)
        self.joined_bytes += len(data)
        return self._scan_joined() if self.joined_bytes >= JOIN_BYTES else []

    def _scan_joined(self) -> list[TraceColumns]:
        files, self.joined, self.joined_bytes = self.joined, [], 0
        if not files:
            return []
        acc, report = self.acc, self.report
        first = len(self.sources) - len(files)
        bounds = np.zeros(len(files) + 1, np.int64)
        np.cumsum([len(d) for d in files], out=bounds[1:])
        raw, fallback, lines, side = _scan_files(b"".join(files), bounds.tobytes(), TAG_BYTES, acc.table, acc.names)
        cols = _views(raw)
        src = cols.pop() + first
        report.bytes += int(bounds[-1])
        report.lines += int(np.frombuffer(lines, np.int64).sum())
        self._add_chunk(cols, fallback, side, src)
        for i, data in enumerate(files):  # binary sniffing: a NUL byte, and no contract line in the file
            if b"\x00" in data and not (src == first + i).any():
                acc.problems.append(Problem(first + i, 1, BINARY_INPUT, "binary input"))
        if self.on_bytes is not None:
            self.on_bytes(int(bounds[-1]))
        full = acc.rows >= self.batch_rows or len(self.sources) >= self.batch_files
        return [self._emit(file_done=True)] if full else []

    def read(self, stream: BinaryIO, path: str, scope: str, meta: TraceMeta) -> Iterator[TraceColumns]:
        """Scan one log; yields the batches that filled up meanwhile (the rest waits for more files or :meth:`flush`)."""
        yield from self._scan_joined()
        acc, st = self.acc, self.st
        self.sources.append(LogSource(path, scope, meta))
        st.next_file()
        windows = scan_windows(
            stream, path, self.report, self.on_bytes, st, chunk=self.chunk, problem=self._problem, mapped=self.mapped
        )
        for buf, start, cut in windows:
            raw, fallback, st.lineno, side = _scan_columns(buf, start, cut, TAG_BYTES, st.lineno, acc.table, acc.names)
            cols = _views(raw)
            rows = len(cols[0])
            st.hits += rows
            if not rows:
                continue
            self._add_chunk(cols, fallback, side, np.full(rows, len(self.sources) - 1, np.int32))
            if acc.rows >= self.batch_rows:
                yield self._emit(file_done=False)
                if self.cutter.longest_open > self.max_events:  # as if the file ended here
                    why = f"a connection with more than {self.max_events} records: the rest of the file is not read"
                    self._problem(path, st.lineno, why, "connection too long")
                    self.report.lines += st.lineno - 1
                    windows.close()
                    break
        gz = getattr(stream, "error", None)
        if gz is not None and not getattr(stream, "error_raised", True):  # a gzip stream that broke unnoticed
            self._problem(path, 0, truncated(gz), "truncated input")
        if acc.rows >= self.batch_rows or len(self.sources) >= self.batch_files:
            yield self._emit(file_done=True)

    def flush(self) -> Iterator[TraceColumns]:
        """The batch gathered so far (every file read is complete)."""
        yield from self._scan_joined()
        if self.acc.rows or self.acc.problems or self.cutter.carry is not None:
            yield self._emit(file_done=True)
        self.sources = []

    def _emit(self, *, file_done: bool) -> TraceColumns:
        acc, sources = self.acc, self.sources
        ended = len(sources) if file_done else len(sources) - 1
        ev = _finish(acc, self.report, self.cutter.carry)
        # the chunks are let go before the cut: memory holds the batch once, not twice
        if file_done:  # nothing goes on: a fresh string table, so it never grows with the run
            self.acc, self.sources = _Columns(), []
        else:
            acc.reset()
            self.sources = sources[-1:]
        return self.cutter.cut(ev, sources, ended)

    def _add_chunk(self, cols: list[np.ndarray], fallback: Fallback, side: Side, src: np.ndarray) -> None:
        """Scanned rows into the batch, those the C scanner left to the Python reader parsed first, with the
        event kinds, recoveries and extra fields the scanner read beside the columns."""
        acc = self.acc
        for row, kind, recovery, extra in side:
            at = acc.rows + row
            if kind:
                acc.kind.append((at, kind))
            if recovery >= 0:
                acc.recovery.append((at, recovery))
            if extra:
                acc.extra[at] = extra
        if fallback:
            cols = [c.copy() for c in cols]
            self._parse_fallback(cols, fallback, src)
        if len(src):
            self.acc.chunks.append(cols)
            self.acc.src.append(src)
            self.acc.rows += len(src)

    def _parse_fallback(self, cols: list[np.ndarray], fallback: Fallback, src: np.ndarray) -> None:
        """Rows the C scanner left to the Python reader: parse, fill the row, or report and drop it."""
        acc = self.acc
        line, conn, cc, t_us, prev, state, metrics, trigger = cols
        for row, lineno, payload in fallback:
            at = acc.rows + row
            try:
                rec = parse_payload(payload.decode("utf-8"))
            except (UnicodeDecodeError, ContractError) as exc:
                bad = isinstance(exc, UnicodeDecodeError)
                reason = (
                    "contract line is not UTF-8 text (binary garbage?)" if bad else f"malformed contract line: {exc}"
                )
                acc.problems.append(
                    Problem(int(src[row]), lineno, reason, "not UTF-8" if bad else "malformed contract line")
                )
                acc.dropped.append(at)
                continue
            ev = rec.event
            conn[row] = acc.intern(rec.conn)
            cc[row] = acc.intern(rec.cc)
            t_us[row] = ev.t_us
            prev[row] = acc.intern(ev.prev)
            state[row] = acc.intern(ev.state) if ev.state else -1
            metrics[row] = [NULL if v is None else v for v in (getattr(ev, k) for k in METRIC_FIELDS)]
            trigger[row] = acc.intern(ev.trigger)
            if ev.kind != "transition":
                acc.kind.append((at, EVENT_KINDS.index(ev.kind)))
            if ev.recovery is not None:
                acc.recovery.append((at, acc.intern(ev.recovery)))
            if ev.extra:
                acc.extra[at] = ev.extra


def _finish(acc: _Columns, report: ParseReport, head: EventColumns | None) -> EventColumns:
    """The batch's records as columns, after ``head`` (those carried from the last batch): each column
    made in one copy."""
    heads = [] if head is None else [head]
    old = 0 if head is None else len(head)

    def cat(i: int, dtype: Any, shape: tuple[int, ...] = ()) -> np.ndarray:
        parts = [getattr(h, _SCANNED[i]) for h in heads] + [c[i] for c in acc.chunks]
        if len(parts) == 1:
            return parts[0]
        return np.concatenate(parts) if parts else np.zeros((0, *shape), dtype)

    line, conn, cc = cat(0, np.int64), cat(1, np.int32), cat(2, np.int32)
    t_us, prev, state = cat(3, np.int64), cat(4, np.int32), cat(5, np.int32)
    metrics, trigger = cat(6, np.int64, (7,)), cat(7, np.int32)
    srcs = [h.src for h in heads] + acc.src
    src = (srcs[0] if len(srcs) == 1 else np.concatenate(srcs)) if srcs else np.zeros(0, np.int32)
    kind = np.zeros(len(line), np.int8)
    recovery = np.full(len(line), -1, np.int32)
    if head is not None:
        kind[:old], recovery[:old] = head.kind, head.recovery
    for at, k in acc.kind:
        kind[old + at] = k
    for at, r in acc.recovery:
        recovery[old + at] = r
    # C rows carry the names as written: map every name to its canonical form (idempotent on canonical ones)
    canon = np.arange(max(len(acc.names), 1), dtype=np.int32)
    named = np.bincount(np.concatenate([state, prev]) + 1, minlength=1)[1:]  # ids in use (-1: none)
    for i in np.flatnonzero(named).tolist():  # (np.unique would import numpy.ma: 17 ms of parse's start-up)
        canon[i] = acc.intern(canonical_state(acc.names[i]))
    state = np.where(state >= 0, canon[np.maximum(state, 0)], -1).astype(np.int32)
    prev = np.where(prev >= 0, canon[np.maximum(prev, 0)], -1).astype(np.int32)
    extra = {**(head.extra if head is not None else {}), **{old + r: v for r, v in acc.extra.items()}}
    arrays: dict[str, Any] = dict(
        line=line,
        src=src,
        conn=conn,
        cc=cc,
        t_us=t_us,
        prev=prev,
        state=state,
        kind=kind,
        metrics=metrics,
        trigger=trigger,
        recovery=recovery,
    )
    if acc.dropped:
        keep = np.ones(len(line), bool)
        keep[old + np.asarray(acc.dropped)] = False
        renum = np.cumsum(keep) - 1
        extra = {int(renum[r]): v for r, v in extra.items()}
        arrays = {k: a[keep] for k, a in arrays.items()}
    report.records += len(arrays["line"]) - old
    return EventColumns(**arrays, names=acc.names, extra=extra, problems=acc.problems)


@dataclass(slots=True)
class SharedMeta:
    """Trace metadata kept once per distinct value (what a store's traces or a batch's files share):
    trace ``i`` is its own id, key and cc over ``templates[of[i]]`` (whose id, key and cc are not used)."""

    templates: list[Trace]
    of: list[int]


@dataclass(slots=True)
class TraceColumns:
    """Traces cut from columns: ``order`` lists the rows trace by trace, in output order; trace ``i`` is
    ``order[offsets[i]:offsets[i + 1]]``, its events in time order, its metadata (but id, key and cc)
    ``shared.templates[shared.of[i]]``."""

    events: EventColumns
    order: np.ndarray
    offsets: np.ndarray
    ids: list[str]
    keys: list[str]
    ccs: list[str]
    state: np.ndarray
    """Per row: the state with the builder's filling (update/metrics/close rows keep the last state)."""
    shared: SharedMeta

    def __len__(self) -> int:
        return len(self.ids)

    def traces(self) -> Iterator[Trace]:
        """The traces as objects (what the object path yields for the same file)."""
        ev = self.events
        names = ev.names
        name = [None, *names]  # id + 1: -1 is None
        rows = self.order
        t = ev.t_us[rows].tolist()
        state = [names[s] if s >= 0 else "" for s in self.state[rows].tolist()]
        kind = [EVENT_KINDS[k] for k in ev.kind[rows].tolist()]
        prev = [name[p + 1] for p in ev.prev[rows].tolist()]
        metrics = ev.metrics[rows]
        mcols = [[None if v == NULL else v for v in metrics[:, j].tolist()] for j in range(7)]
        rec = [name[r + 1] for r in ev.recovery[rows].tolist()]
        trig = [name[g + 1] for g in ev.trigger[rows].tolist()]
        extra = ev.extra
        rows_l = rows.tolist()
        off = self.offsets.tolist()
        for i in range(len(self.ids)):
            events = [
                TraceEvent(
                    t[j],
                    state[j],
                    kind[j],
                    prev[j],
                    mcols[0][j],
                    mcols[1][j],
                    mcols[2][j],
                    mcols[3][j],
                    mcols[4][j],
                    mcols[5][j],
                    mcols[6][j],
                    rec[j],
                    trig[j],
                    extra.get(rows_l[j], ()) if extra else (),
                )
                for j in range(off[i], off[i + 1])
            ]
            shell = self.shell(i)
            shell.events = events
            yield shell

    def select(self, keep: list[bool]) -> TraceColumns:
        """Only the traces where ``keep`` is true (``--where``), in the same order."""
        lengths = np.diff(self.offsets)
        mask = np.asarray(keep, bool)
        offsets = np.zeros(int(mask.sum()) + 1, np.int64)
        np.cumsum(lengths[mask], out=offsets[1:])
        pick = [i for i, k in enumerate(keep) if k]
        return TraceColumns(
            self.events,
            self.order[np.repeat(mask, lengths)],
            offsets,
            [self.ids[i] for i in pick],
            [self.keys[i] for i in pick],
            [self.ccs[i] for i in pick],
            self.state,
            SharedMeta(self.shared.templates, [self.shared.of[i] for i in pick]),
        )

    def shell(self, i: int) -> Trace:
        """Trace ``i`` without its events: metadata for selectors and summaries."""
        t = self.shared.templates[self.shared.of[i]]
        return Trace(self.ids[i], self.ccs[i], [], self.keys[i], t.implementation, t.version, t.sources, dict(t.labels))

    def distinct_shells(self) -> list[Trace]:
        """The shell of the first trace of each distinct metadata but id and key (in trace order): what a
        summary notes of the batch, without a Python object per trace."""
        first: dict[tuple[int, str], int] = {}
        for i, pair in enumerate(zip(self.shared.of, self.ccs)):
            first.setdefault(pair, i)
        return [self.shell(i) for i in first.values()]

    def labels(self, view: StateView) -> tuple[np.ndarray, list[str]]:
        """Per row, the id of the state label ``view`` gives it (into the returned names)."""
        ev = self.events
        width = len(ev.names) + 1 if view.recovery else 1
        key = self.state.astype(np.int64) * width + ((ev.recovery.astype(np.int64) + 1) if view.recovery else 0)
        uniq, inv = unique_inverse(key)
        names: list[str] = []
        index: dict[str, int] = {}
        ids = np.empty(len(uniq), np.int64)
        for j, k in enumerate(uniq.tolist()):
            s, r = divmod(k, width)
            rec = ev.names[r - 1] if view.recovery and r > 0 else None
            label = view.label(TraceEvent(0, ev.names[s] if s >= 0 else "", recovery=rec))
            ids[j] = index.setdefault(label, len(index))  # states that look alike in this view share an id
            if ids[j] == len(names):
                names.append(label)
        return ids[inv], names


TraceRecord = Any
"""A :class:`~quicsm.traces.events.Trace`, or a trace file's line (:class:`quicsm.traces.store.TraceLine`,
the same fields): what :class:`ColumnBuilder` takes (store imports this module's users: no import here)."""


_FIELDS = attrgetter("t_us", "kind", "state", "prev", "trigger", "recovery", *METRIC_FIELDS, "extra")
_KINDS = {k: i for i, k in enumerate(EVENT_KINDS)}


class ColumnBuilder:
    """Trace objects (a caller's, or a trace file's lines) into one column batch, a trace at a time:
    each trace's values become small arrays at once (strings interned), so the batch holds no event
    object. Empty traces are left out, as every reader leaves them out. A store writes the batch as it
    wrote the objects (dictionaries in order of first appearance)."""

    def __init__(self) -> None:
        self.index: dict[str | None, int] = {None: -1}
        self.parts: list[tuple[np.ndarray, ...]] = []
        self.extra: dict[int, tuple[tuple[str, str], ...]] = {}
        self.traces: list[tuple[str, str, str, Trace]] = []
        """Per trace: id, key, cc and its metadata template."""
        self.rows = 0

    def add(self, t: TraceRecord) -> None:
        events = t.events
        n = len(events)
        if not n:
            return
        cols = list(zip(*map(_FIELDS, events)))  # per field, the trace's values (C loops)
        t_us, kind, texts, extra = cols[0], cols[1], cols[2:6], cols[-1]
        metric = np.array(cols[6:-1], object)
        metric[metric == None] = NULL  # noqa: E711 (elementwise)
        index = self.index
        for text in texts:
            for v in dict.fromkeys(text):  # the trace's distinct strings, in order
                if v not in index:
                    index[v] = len(index) - 1
        self.parts.append(
            (
                np.array(t_us, np.int64),
                np.fromiter(map(_KINDS.__getitem__, kind), np.int8, n),
                *(np.fromiter(map(index.__getitem__, text), np.int32, n) for text in texts),
                metric.astype(np.int64).T,
            )
        )
        for i, x in enumerate(extra):
            if x:
                self.extra[self.rows + i] = tuple(map(tuple, x))
        self.rows += n
        template = Trace("", "", [], "", t.implementation, t.version, tuple(t.sources), dict(t.labels or {}))
        self.traces.append((t.id, t.key or "", t.cc, template))

    def finish(self) -> TraceColumns:
        n = self.rows
        if self.parts:
            t_us, kind, state, prev, trigger, recovery, metrics = (np.concatenate(c) for c in zip(*self.parts))
        else:
            t_us, metrics = np.zeros(0, np.int64), np.zeros((0, len(METRIC_FIELDS)), np.int64)
            kind, state = np.zeros(0, np.int8), np.zeros(0, np.int32)
            prev = trigger = recovery = state
        zeros = np.zeros(n, np.int32)
        ev = EventColumns(
            line=np.zeros(n, np.int64),
            src=zeros,
            conn=zeros,
            cc=zeros,
            t_us=t_us,
            prev=prev,
            state=state,
            kind=kind,
            metrics=metrics,
            trigger=trigger,
            recovery=recovery,
            names=[k for k in self.index if k is not None],
            extra=self.extra,
            first_seen=True,
        )
        offsets = np.zeros(len(self.parts) + 1, np.int64)
        np.cumsum([len(p[0]) for p in self.parts], out=offsets[1:])
        tid, key, cc, templates = (list(x) for x in zip(*self.traces)) if self.traces else ([], [], [], [])
        shared = SharedMeta(templates, list(range(len(templates))))
        return TraceColumns(ev, np.arange(n, dtype=np.int64), offsets, tid, key, cc, ev.state, shared)


def columns_of(traces: Iterable[TraceRecord]) -> TraceColumns:
    """Trace objects as one column batch (:class:`ColumnBuilder`), so every consumer reads columns;
    ``traces()`` gives them back equal (empty traces left out)."""
    build = ColumnBuilder()
    for t in traces:
        build.add(t)
    return build.finish()


class TraceCutter:
    """Cuts record batches of one or more files into traces exactly as
    the oracle in tests/traces/oracle.py does for each file, carrying the records of the
    connections of a file still being read from one batch to the next."""

    def __init__(self, report: ParseReport) -> None:
        self.report = report
        self.opened = np.zeros(0, np.int64)
        """Per key (string id) of the file that goes on in the next batch: traces started under it so far."""
        self.carry: EventColumns | None = None
        self.going_on = False
        """The next batch's first source is a file this batch did not end."""
        self.longest_open = 0
        """Records of the longest trace carried to the next batch."""

    def cut(self, ev: EventColumns, sources: list[LogSource], ended: int) -> TraceColumns:
        """The traces a batch (:attr:`carry`'s records first) finishes: closed, their key started again,
        or their file ended (the first ``ended`` of ``sources``; the others' still open traces are
        carried, ``sources[-1]`` going on as the next batch's first source)."""
        old = 0 if self.carry is None else len(self.carry)
        self.carry = None
        n = len(ev)
        names = ev.names
        if len(self.opened) < len(names):
            self.opened = np.concatenate([self.opened, np.zeros(len(names) - len(self.opened), np.int64)])
        init = names.index("Init") if "Init" in names else -2
        starts = (ev.kind == 0) & ((ev.prev == init) | (ev.state == init))
        many = n and ev.src[0] != ev.src[-1]  # several files: a connection is a (file, key) pair
        group = ev.src.astype(np.int64) * len(names) + ev.conn if many else ev.conn
        by_conn = stable_argsort(group)  # rows grouped by key, log order within a key
        conn_s = group[by_conn]
        first_of_key = np.ones(n, bool)
        first_of_key[1:] = conn_s[1:] != conn_s[:-1]
        after_close = np.zeros(n, bool)
        after_close[1:] = (ev.kind[by_conn][:-1] == _CLOSE) & ~first_of_key[1:]
        new = first_of_key | starts[by_conn] | after_close
        heads = np.flatnonzero(new)  # positions (in by_conn) where a trace begins
        ntr = len(heads)
        ends = np.append(heads[1:], n) if ntr else heads  # exclusive
        seg = np.cumsum(new) - 1  # trace number (in key order) of each position
        first_row = by_conn[heads]  # log row of each trace's first record
        last_row = by_conn[ends - 1]
        src = ev.src[first_row]
        # when the builder hands each trace out: at its own close record, when the same key starts again,
        # or at the end of its file (open traces in the order they were opened); files one after the other
        closed = ev.kind[last_row] == _CLOSE
        nxt_same_key = np.zeros(ntr, bool)
        nxt_same_key[:-1] = ~first_of_key[heads[1:]]
        restart_row = np.full(ntr, n, np.int64)
        restart_row[:-1] = first_row[1:]
        finish = np.where(closed, 2 * last_row + 1, np.where(nxt_same_key, 2 * restart_row, 2 * n + first_row))
        # trace ids: the n-th trace of a key in a file gets "#n" (n > 1); a carried trace keeps its number
        key_heads = first_of_key[heads]
        group_start = np.maximum.accumulate(np.where(key_heads, np.arange(ntr), 0))
        local = np.arange(ntr) - group_start
        key_id = ev.conn[first_row].astype(np.int64)
        rank = local
        if self.going_on:  # the batch starts with a file that went on from the last one: its keys count on
            carried_head = key_heads & (first_row < old)
            base = self.opened[key_id] - np.where(carried_head, 1, 0)[group_start]
            rank = np.where(src == 0, base + local, local)
        last_of_key = np.ones(ntr, bool)
        last_of_key[:-1] = key_heads[1:]
        # the filled state: update/metrics/close rows without a state keep the trace's last one
        state_s = ev.state[by_conn].copy()
        need = new & (state_s < 0)
        if need.any():
            empty = _intern_name(ev, "")
            prev_s = ev.prev[by_conn]
            state_s[need] = np.where(prev_s[need] >= 0, prev_s[need], empty)
        src_pos = np.where(state_s >= 0, np.arange(n), 0)
        np.maximum.accumulate(src_pos, out=src_pos)
        state_rows = np.empty(n, np.int32)
        state_rows[by_conn] = state_s[src_pos]
        # timestamps going backwards: reported per record (rare), the trace's events then sorted by time
        t_s = ev.t_us[by_conn]
        back = np.zeros(n, bool)
        back[1:] = (t_s[1:] < t_s[:-1]) & ~new[1:]
        pos_order = np.arange(n)
        problems = list(ev.problems)
        if back.any():
            pos_order = self._sort_backwards(ev, by_conn, heads, ends, seg, back, t_s, old, problems)
        for p in sorted(problems, key=lambda p: p.order):  # in file and line order, as met by the object path
            self.report.problem(sources[p.src].path, p.line, p.reason, p.kind)
        done = (finish < 2 * n) | (src < ended)
        still_open = np.flatnonzero(~done)
        self.longest_open = int((ends - heads)[still_open].max()) if len(still_open) else 0
        if len(still_open):  # all of the last file, which goes on in the next batch as its first
            rows_open = np.sort(np.concatenate([by_conn[heads[i] : ends[i]] for i in still_open.tolist()]))
            self.carry = ev.take(rows_open)
            self.carry.src[:] = 0
        else:
            self.carry = None
        going_on = ended < len(sources)
        if not (going_on and self.going_on and len(sources) == 1):
            self.opened[:] = 0
        if going_on:  # the last file goes on: remember how many traces each of its keys began
            mine = last_of_key & (src == len(sources) - 1)
            self.opened[key_id[mine]] = rank[mine] + 1
        self.going_on = going_on
        out_idx = np.flatnonzero(done)
        out = out_idx[np.lexsort((finish[out_idx], src[out_idx]))].tolist()
        lengths = (ends - heads)[out]
        offsets = np.zeros(len(out) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        take = pos_order[ranges(heads[out], lengths)]
        keys = [names[c] for c in key_id[out].tolist()]
        ranks = rank[out].tolist()
        of = src[out].tolist()
        self.report.traces += len(out)
        scopes = [s.scope for s in sources]
        given = [s.meta.cc for s in sources]
        ccs = [given[f] or names[c] for f, c in zip(of, ev.cc[first_row[out]].tolist())]
        return TraceColumns(
            ev,
            by_conn[take],
            offsets,
            [f"{scopes[f]}:{k}" + (f"#{r + 1}" if r else "") for f, k, r in zip(of, keys, ranks)],
            keys,
            ccs,
            state_rows,
            SharedMeta([s.template() for s in sources], of),
        )

    def _sort_backwards(
        self,
        ev: EventColumns,
        by_conn: np.ndarray,
        heads: np.ndarray,
        ends: np.ndarray,
        seg: np.ndarray,
        back: np.ndarray,
        t_s: np.ndarray,
        old: int,
        problems: list[Problem],
    ) -> np.ndarray:
        """Add a problem for each new record timed before its trace's latest so far; sort those traces by time."""
        pos_order = np.arange(len(t_s))
        for tr in np.unique(seg[back]).tolist():
            a, b = int(heads[tr]), int(ends[tr])
            last = int(t_s[a])
            for p in range(a + 1, b):
                t = int(t_s[p])
                if t < last:
                    row = int(by_conn[p])
                    if row >= old:  # carried records were reported with their batch
                        key = ev.names[int(ev.conn[row])]
                        problems.append(
                            Problem(
                                int(ev.src[row]),
                                int(ev.line[row]),
                                f"timestamp goes backwards for conn={key} (t_us={t} after {last}); events re-sorted",
                                "timestamp goes backwards",
                            )
                        )
                elif t > last:
                    last = t
            pos_order[a:b] = a + np.argsort(t_s[a:b], kind="stable")
        return pos_order


def _intern_name(ev: EventColumns, text: str) -> int:
    if text in ev.names:
        return ev.names.index(text)
    ev.names.append(text)
    return len(ev.names) - 1


@dataclass(slots=True)
class StaySequences:
    """Per trace (output order): its folded state sequence, the stay at each position, its event count."""

    states: list[tuple[str, ...]]
    durations_us: list[list[int]]
    events: list[int]
    has_transition: list[bool]


@dataclass(slots=True)
class StayArrays:
    """:class:`StaySequences` as arrays: one sequence per trace (count 1), codes into ``names``."""

    names: list[str]
    seqs: PackedSequences
    has_transition: np.ndarray
    start_us: np.ndarray
    """When each stay began (aligned with ``seqs.codes``)."""


def stay_sequences(tc: TraceColumns, view: StateView) -> StaySequences:
    """What :meth:`~quicsm.traces.events.Trace.visits` gives for every trace, computed on the columns."""
    a = stay_arrays(tc, view)
    labs = [a.names[i] for i in a.seqs.codes.tolist()]
    dur = a.seqs.durations_us.tolist()
    bounds = a.seqs.offsets.tolist()
    return StaySequences(
        [tuple(labs[bounds[i] : bounds[i + 1]]) for i in range(len(tc))],
        [dur[bounds[i] : bounds[i + 1]] for i in range(len(tc))],
        a.seqs.events.tolist(),
        a.has_transition.tolist(),
    )


def stay_arrays(tc: TraceColumns, view: StateView) -> StayArrays:
    """The stays of every trace (:func:`quicsm.traces.visits.stays`), without a Python object per trace."""
    ev = tc.events
    ntr = len(tc)
    rows = tc.order
    lengths = np.diff(tc.offsets)
    tr_of = np.repeat(np.arange(ntr), lengths)
    kind = ev.kind[rows]
    t = ev.t_us[rows]
    end_us = np.maximum.reduceat(t, tc.offsets[:-1]) if ntr else np.zeros(0, np.int64)
    has_tr = np.zeros(ntr, bool)
    has_tr[tr_of[kind == 0]] = True
    label_of, names = tc.labels(view)
    pos = np.flatnonzero(kind <= 1)  # transitions and updates make stays
    at = rows[pos]
    init = ev.names.index(INIT) if INIT in ev.names else -2
    prev = ev.prev[at]
    if "" in ev.names:  # an empty ``from`` names no state (trace objects may carry one)
        prev = np.where(prev == ev.names.index(""), -1, prev)
    st = stays(
        tr_of[pos],
        t[pos],
        label_of[at],
        kind[pos] == 0,
        prev,
        ev.state[at],
        init,
        end_us,
        lambda where: _prev_labels(tc, view, at[where], names),
    )
    seqs = PackedSequences.build(names, st.label, st.bounds, np.ones(ntr, np.int64), lengths, st.stop_us - st.start_us)
    return StayArrays(names, seqs, has_tr, st.start_us)


def _prev_labels(tc: TraceColumns, view: StateView, rows: np.ndarray, names: list[str]) -> np.ndarray:
    """Label ids (added to ``names`` when new) of the ``from`` state of ``rows``, with their recovery."""
    ev = tc.events
    width = len(ev.names) + 1
    uniq, inv = unique_inverse(ev.prev[rows].astype(np.int64) * width + ev.recovery[rows] + 1)
    index = {n: i for i, n in enumerate(names)}
    ids = np.empty(len(uniq), np.int64)
    for j, k in enumerate(uniq.tolist()):  # once per distinct (from, recovery), not per trace
        p, r = divmod(k, width)
        rec = ev.names[r - 1] if r > 0 else None
        name = view.label(TraceEvent(0, ev.names[p], recovery=rec))
        hit = index.get(name)
        if hit is None:
            hit = index[name] = len(names)
            names.append(name)
        ids[j] = hit
    return ids[inv]
