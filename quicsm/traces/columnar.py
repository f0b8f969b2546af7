"""The columnar data path for text logs: contract records as NumPy columns, traces as row ranges.

The C scanner (``_scan.scan_columns``) writes every line in the canonical field order straight into
integer columns, with connection keys, controllers, states and triggers interned once per file; the
rare other lines go through the Python reader and fill their rows. Traces are then cut out of the
columns with array operations, following exactly the rules of :class:`~quicsm.traces.builder.TraceBuilder`
(keys scoped to the file, ``from=Init`` restarts a key, ``ev=close`` ends one, traces come out in the
order the builder finishes them). No Python object is made per event unless a caller asks for
:class:`~quicsm.traces.events.Trace` objects; the Parquet store and the sequence summary that
inference learns from are written from the columns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np

from quicsm.traces.builder import TraceMeta
from quicsm.traces.contract import TAG_BYTES, ContractError, parse_payload
from quicsm.traces.distinct import PackedSequences, unique_inverse
from quicsm.traces.events import EVENT_KINDS, METRIC_FIELDS, StateView, Trace, TraceEvent
from quicsm.traces.logscan import ScanState, scan_windows
from quicsm.traces.report import ParseReport
from quicsm.traces.states import canonical_state

__all__ = [
    "EventColumns",
    "TraceColumns",
    "SharedMeta",
    "TraceCutter",
    "iter_log_columns",
    "iter_trace_columns",
    "stay_sequences",
    "available",
]

NULL = np.iinfo(np.int64).min
"""A metric the record did not carry."""
_CLOSE = EVENT_KINDS.index("close")

try:
    from quicsm.traces._scan import scan_columns as _scan_columns
except ImportError:  # pragma: no cover - depends on the install
    _scan_columns = None  # type: ignore[assignment]


def available() -> bool:
    """The columnar path needs the C scanner; without it the object path reads logs."""
    return _scan_columns is not None


@dataclass(slots=True)
class EventColumns:
    """One input's contract records in log order. String columns are ids into ``names`` (-1: none)."""

    line: np.ndarray
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
    problems: list[tuple[int, str, str]] = field(default_factory=list)
    """Malformed lines met while reading these records, not reported yet: ``(line, reason, kind)``."""

    def __len__(self) -> int:
        return len(self.t_us)

    def take(self, rows: np.ndarray) -> EventColumns:
        """These rows (in this order), sharing the string table."""
        where = {int(r): i for i, r in enumerate(rows.tolist())} if self.extra else {}
        arrays: dict[str, Any] = {k: getattr(self, k)[rows] for k in _ARRAYS}
        extra = {where[r]: v for r, v in self.extra.items() if r in where}
        return EventColumns(**arrays, names=self.names, extra=extra)  # problems stay with the batch that reported them

    def then(self, later: EventColumns) -> EventColumns:
        """This batch followed by ``later`` (same string table)."""
        n = len(self)
        arrays: dict[str, Any] = {k: np.concatenate([getattr(self, k), getattr(later, k)]) for k in _ARRAYS}
        extra = {**self.extra, **{r + n: v for r, v in later.extra.items()}}
        return EventColumns(**arrays, names=later.names, extra=extra, problems=later.problems)


_ARRAYS = ("line", "conn", "cc", "t_us", "prev", "state", "kind", "metrics", "trigger", "recovery")


class _Columns:
    """Growing per-window column chunks and the file's string table."""

    def __init__(self) -> None:
        self.table: dict[bytes, int] = {}
        self.names: list[str] = []
        self.chunks: list[list[np.ndarray]] = []
        self.kind: list[tuple[int, int]] = []
        self.recovery: list[tuple[int, int]] = []
        self.extra: dict[int, tuple[tuple[str, str], ...]] = {}
        self.dropped: list[int] = []
        self.problems: list[tuple[int, str, str]] = []
        """Malformed lines of this batch: reported with the batch's other problems, in line order."""
        self.rows = 0

    def reset(self) -> None:
        """Start the next batch (the string table stays)."""
        self.chunks, self.kind, self.recovery, self.extra, self.dropped, self.rows = [], [], [], {}, [], 0
        self.problems = []

    def intern(self, text: str | None) -> int:
        if text is None:
            return -1
        key = text.encode("utf-8", "surrogatepass")
        hit = self.table.get(key)
        if hit is None:
            hit = self.table[key] = len(self.names)
            self.names.append(text)
        return hit


BATCH_ROWS = 1 << 18
"""Records per batch: memory holds one batch and the open connections' records, whatever the file size."""


def iter_log_columns(
    stream: BinaryIO,
    path: str,
    report: ParseReport,
    on_bytes: Callable[[int], None] | None = None,
    *,
    chunk: int | None = None,
    batch_rows: int = BATCH_ROWS,
) -> Iterator[EventColumns]:
    """One text log's contract records as column batches in log order (one string table for the file).
    Malformed lines are reported as the object path reports them."""
    if _scan_columns is None:  # pragma: no cover - callers check available()
        raise RuntimeError("the columnar reader needs the C extension quicsm.traces._scan")
    acc = _Columns()
    st = ScanState()
    for buf, cut in scan_windows(stream, path, report, on_bytes, st, chunk=chunk):
        raw, fallback, st.lineno = _scan_columns(buf, 0, cut, TAG_BYTES, st.lineno, acc.table, acc.names)
        cols: list[np.ndarray] = [
            np.frombuffer(raw[0], np.int64),
            np.frombuffer(raw[1], np.int32),
            np.frombuffer(raw[2], np.int32),
            np.frombuffer(raw[3], np.int64),
            np.frombuffer(raw[4], np.int32),
            np.frombuffer(raw[5], np.int32),
            np.frombuffer(raw[6], np.int64).reshape(-1, 7),
            np.frombuffer(raw[7], np.int32),
        ]
        st.hits += len(cols[0])
        if fallback:
            cols = [c.copy() for c in cols]
            _parse_fallback(acc, cols, fallback, path, report)
        acc.chunks.append(cols)
        acc.rows += len(cols[0])
        if acc.rows >= batch_rows:
            yield _finish(acc, report)
            acc.reset()
    yield _finish(acc, report)


def _parse_fallback(
    acc: _Columns, cols: list[np.ndarray], fallback: list[tuple[int, int, bytes]], path: str, report: ParseReport
) -> None:
    """Rows the C scanner left to the Python reader: parse, fill the row, or report and drop it."""
    line, conn, cc, t_us, prev, state, metrics, trigger = cols
    for row, lineno, payload in fallback:
        at = acc.rows + row
        try:
            rec = parse_payload(payload.decode("utf-8"))
        except UnicodeDecodeError:
            acc.problems.append((lineno, "contract line is not UTF-8 text (binary garbage?)", "not UTF-8"))
            acc.dropped.append(at)
            continue
        except ContractError as exc:
            acc.problems.append((lineno, f"malformed contract line: {exc}", "malformed contract line"))
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


def _finish(acc: _Columns, report: ParseReport) -> EventColumns:
    def cat(i: int, dtype: Any, shape: tuple[int, ...] = ()) -> np.ndarray:
        parts = [c[i] for c in acc.chunks]
        return np.concatenate(parts) if parts else np.zeros((0, *shape), dtype)

    line, conn, cc = cat(0, np.int64), cat(1, np.int32), cat(2, np.int32)
    t_us, prev, state = cat(3, np.int64), cat(4, np.int32), cat(5, np.int32)
    metrics, trigger = cat(6, np.int64, (7,)), cat(7, np.int32)
    kind = np.zeros(len(line), np.int8)
    recovery = np.full(len(line), -1, np.int32)
    for at, k in acc.kind:
        kind[at] = k
    for at, r in acc.recovery:
        recovery[at] = r
    # C rows carry the names as written: map every name to its canonical form (idempotent on canonical ones)
    canon = np.arange(max(len(acc.names), 1), dtype=np.int32)
    named = np.bincount(np.concatenate([state, prev]) + 1, minlength=1)[1:]  # ids in use (-1: none)
    for i in np.flatnonzero(named).tolist():  # (np.unique would import numpy.ma: 17 ms of parse's start-up)
        canon[i] = acc.intern(canonical_state(acc.names[i]))
    state = np.where(state >= 0, canon[np.maximum(state, 0)], -1).astype(np.int32)
    prev = np.where(prev >= 0, canon[np.maximum(prev, 0)], -1).astype(np.int32)
    extra = acc.extra
    arrays: dict[str, Any] = dict(
        line=line,
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
        keep[acc.dropped] = False
        renum = np.cumsum(keep) - 1
        extra = {int(renum[r]): v for r, v in extra.items()}
        arrays = {k: a[keep] for k, a in arrays.items()}
    report.records += len(arrays["line"])
    return EventColumns(**arrays, names=acc.names, extra=extra, problems=acc.problems)


@dataclass(slots=True)
class SharedMeta:
    """Trace metadata read back from a store, kept once per distinct value: a store's traces share their
    implementation, version, sources and labels (batches of one file), so trace ``i`` is its own id, key
    and cc over ``templates[of[i]]`` (whose id, key and cc are not used)."""

    templates: list[Trace]
    of: list[int]


@dataclass(slots=True)
class TraceColumns:
    """Traces cut from one input's columns: ``order`` lists the rows trace by trace, in output order;
    trace ``i`` is ``order[offsets[i]:offsets[i + 1]]``, its events in time order."""

    events: EventColumns
    order: np.ndarray
    offsets: np.ndarray
    ids: list[str]
    keys: list[str]
    ccs: list[str]
    state: np.ndarray
    """Per row: the state with the builder's filling (update/metrics/close rows keep the last state)."""
    meta: TraceMeta
    path: str
    stored: SharedMeta | None = None
    """Per-trace metadata when the traces of one batch may differ in it (read back from a trace store)."""

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
            self.meta,
            self.path,
            SharedMeta(self.stored.templates, [self.stored.of[i] for i in pick]) if self.stored is not None else None,
        )

    def shell(self, i: int) -> Trace:
        """Trace ``i`` without its events: metadata for selectors and summaries."""
        if self.stored is not None:
            t = self.stored.templates[self.stored.of[i]]
            return Trace(
                self.ids[i], self.ccs[i], [], self.keys[i], t.implementation, t.version, t.sources, dict(t.labels)
            )
        m = self.meta
        return Trace(
            id=self.ids[i],
            cc=self.ccs[i],
            events=[],
            key=self.keys[i],
            implementation=m.implementation,
            version=m.version,
            sources=(self.path,),
            labels=dict(m.labels),
        )

    def distinct_shells(self) -> list[Trace]:
        """The shell of the first trace of each distinct metadata but id and key (in trace order): what a
        summary notes of the batch, without a Python object per trace."""
        of = self.stored.of if self.stored is not None else [0] * len(self)
        first: dict[tuple[int, str], int] = {}
        for i, pair in enumerate(zip(of, self.ccs)):
            first.setdefault(pair, i)
        return [self.shell(i) for i in first.values()]

    def metadata(self, i: int) -> dict[str, object]:
        return self.shell(i).metadata()

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


class TraceCutter:
    """Cuts one file's record batches into traces exactly as :class:`~quicsm.traces.builder.TraceBuilder`
    does, carrying the records of connections still open from one batch to the next."""

    def __init__(self, path: str, scope: str, meta: TraceMeta, report: ParseReport) -> None:
        self.path, self.scope, self.meta, self.report = path, scope, meta, report
        self.opened = np.zeros(0, np.int64)
        """Per key (string id): traces started under it so far."""
        self.carry: EventColumns | None = None

    def feed(self, batch: EventColumns, *, last: bool = False) -> TraceColumns:
        """The traces this batch finishes (closed, or their key started again); with ``last`` (the file's
        last batch) every trace, those still open after the ones that finished, in the order they opened:
        one batch, one row group, for the end of a file."""
        ev = batch if self.carry is None else self.carry.then(batch)
        old = 0 if self.carry is None else len(self.carry)
        if last:
            self.carry = None
        return self._cut(ev, old, final=last)

    def _cut(self, ev: EventColumns, old: int, final: bool) -> TraceColumns:
        n = len(ev)
        names = ev.names
        if len(self.opened) < len(names):
            self.opened = np.concatenate([self.opened, np.zeros(len(names) - len(self.opened), np.int64)])
        init = names.index("Init") if "Init" in names else -2
        starts = (ev.kind == 0) & ((ev.prev == init) | (ev.state == init))
        by_conn = np.argsort(ev.conn, kind="stable")  # rows grouped by key, log order within a key
        conn_s = ev.conn[by_conn]
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
        # when the builder hands each trace out: at its own close record, when the same key starts again,
        # or at the end of the file (open traces in the order they were opened)
        closed = ev.kind[last_row] == _CLOSE
        nxt_same_key = np.zeros(ntr, bool)
        nxt_same_key[:-1] = ~first_of_key[heads[1:]]
        restart_row = np.full(ntr, n, np.int64)
        restart_row[:-1] = first_row[1:]
        finish = np.where(closed, 2 * last_row + 1, np.where(nxt_same_key, 2 * restart_row, 2 * n + first_row))
        # trace ids: the n-th trace of a key gets "#n" (n > 1); a carried trace keeps its number
        key_heads = first_of_key[heads]
        local = np.arange(ntr) - np.maximum.accumulate(np.where(key_heads, np.arange(ntr), 0))
        key_id = ev.conn[first_row].astype(np.int64)
        carried_head = key_heads & (first_row < old)
        base = (
            self.opened[key_id]
            - np.where(carried_head, 1, 0)[np.maximum.accumulate(np.where(key_heads, np.arange(ntr), 0))]
        )
        rank = base + local
        last_of_key = np.ones(ntr, bool)
        last_of_key[:-1] = key_heads[1:]
        self.opened[key_id[last_of_key]] = rank[last_of_key] + 1
        # the filled state: update/metrics/close rows without a state keep the trace's last one
        state_s = ev.state[by_conn].copy()
        need = new & (state_s < 0)
        if need.any():
            empty = _intern_name(ev, "")
            prev_s = ev.prev[by_conn]
            state_s[need] = np.where(prev_s[need] >= 0, prev_s[need], empty)
        src = np.where(state_s >= 0, np.arange(n), 0)
        np.maximum.accumulate(src, out=src)
        state_rows = np.empty(n, np.int32)
        state_rows[by_conn] = state_s[src]
        # timestamps going backwards: reported per record (rare), the trace's events then sorted by time
        t_s = ev.t_us[by_conn]
        back = np.zeros(n, bool)
        back[1:] = (t_s[1:] < t_s[:-1]) & ~new[1:]
        pos_order = np.arange(n)
        problems = list(ev.problems)
        if back.any():
            pos_order = self._sort_backwards(ev, by_conn, heads, ends, seg, back, t_s, old, problems)
        for line, reason, kind in sorted(problems, key=lambda p: p[0]):  # in line order, as met by the object path
            self.report.problem(self.path, line, reason, kind)
        done = np.ones(ntr, bool) if final else finish < 2 * n
        if not final:
            still_open = np.flatnonzero(~done)
            rows_open = (
                np.sort(np.concatenate([by_conn[heads[i] : ends[i]] for i in still_open.tolist()]))
                if len(still_open)
                else np.zeros(0, np.int64)
            )
            self.carry = ev.take(rows_open)
        out = np.flatnonzero(done)[np.argsort(finish[done], kind="stable")].tolist()
        lengths = (ends - heads)[out]
        offsets = np.zeros(len(out) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        take = np.concatenate([pos_order[heads[i] : ends[i]] for i in out]) if out else np.zeros(0, np.int64)
        meta = self.meta
        keys = [names[c] for c in key_id[out].tolist()]
        ranks = rank[out].tolist()
        self.report.traces += len(out)
        return TraceColumns(
            ev,
            by_conn[take],
            offsets,
            [f"{self.scope}:{k}" + (f"#{r + 1}" if r else "") for k, r in zip(keys, ranks)],
            keys,
            [meta.cc or names[c] for c in ev.cc[first_row[out]].tolist()],
            state_rows,
            meta,
            self.path,
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
        problems: list[tuple[int, str, str]],
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
                            (
                                int(ev.line[row]),
                                f"timestamp goes backwards for conn={key} (t_us={t} after {last}); events re-sorted",
                                "timestamp goes backwards",
                            )
                        )
                elif t > last:
                    last = t
            pos_order[a:b] = a + np.argsort(t_s[a:b], kind="stable")
        return pos_order


def iter_trace_columns(
    stream: BinaryIO,
    path: str,
    scope: str,
    meta: TraceMeta,
    report: ParseReport,
    on_bytes: Callable[[int], None] | None = None,
    *,
    chunk: int | None = None,
    batch_rows: int = BATCH_ROWS,
) -> Iterator[TraceColumns]:
    """One text log's traces as column batches, in the order the object path yields them."""
    cutter = TraceCutter(path, scope, meta, report)
    batches = iter_log_columns(stream, path, report, on_bytes, chunk=chunk, batch_rows=batch_rows)
    batch = next(batches, None)
    while batch is not None:  # one batch ahead, so the last one also closes the connections left open
        following = next(batches, None)
        yield cutter.feed(batch, last=following is None)
        batch = following


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
    """The stays of every trace, without a Python object per trace."""
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
    lab = label_of[rows[pos]]
    tp = t[pos]
    trp = tr_of[pos]
    first = np.ones(len(pos), bool)
    first[1:] = trp[1:] != trp[:-1]
    # the state left by a trace's first transition, when the emitter named it, is the first stay
    rows_first = rows[pos[first]]
    pseudo = first.copy()
    pseudo[first] = (ev.kind[rows_first] == 0) & (ev.prev[rows_first] >= 0)
    if pseudo.any():
        prev_rows = rows[pos[pseudo]]
        prev_lab = _prev_labels(tc, view, prev_rows, names)
        at = np.flatnonzero(pseudo)
        lab = np.insert(lab, at, prev_lab)
        tp = np.insert(tp, at, tp[at])
        trp = np.insert(trp, at, trp[at])
    first = np.ones(len(lab), bool)
    first[1:] = trp[1:] != trp[:-1]
    keep = first.copy()
    keep[1:] |= lab[1:] != lab[:-1]
    lab, tp, trp, first = lab[keep], tp[keep], trp[keep], first[keep]
    last = np.ones(len(lab), bool)
    last[:-1] = first[1:]
    stop = np.empty(len(lab), np.int64)
    stop[:-1] = tp[1:]
    stop[last] = np.maximum(end_us[trp[last]], tp[last])
    bounds = np.searchsorted(trp, np.arange(ntr + 1)).astype(np.int64)
    seqs = PackedSequences.build(names, lab, bounds, np.ones(ntr, np.int64), lengths, stop - tp)
    return StayArrays(names, seqs, has_tr)


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
