"""qlog traces as column batches: small JSON-SEQ/NDJSON qlogs (quic-go's one file per connection) read by
the C scanner, with no Python object per record.

The C ``scan_qlogs`` decides only files in the plain shape quic-go writes and that the Python reader
(:func:`quicsm.traces.qlog.read_sqlog`) would read without a word of report; it hands back every other
file, which that reader then reads as before (its traces join the batch). Each file's header is judged
by the Python reader's own ``_header``. The traces are those the Python reader gives, in the same order:
events sorted by time, metric samples before the first state event given the first state, a close
event at the last time seen. Batches close as the Parquet writer closes row groups of trace objects
(at the first trace that brings them to :data:`~quicsm.traces.parquet.ROWS_PER_GROUP` rows), and their string columns keep the
order of first appearance (:attr:`~quicsm.traces.columnar.EventColumns.first_seen`), so a store written
from them is the store written from the objects, byte for byte.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from quicsm.traces import parquet
from quicsm.traces.columnar import NULL, EventColumns, SharedMeta, TraceColumns, intern
from quicsm.traces.events import EVENT_KINDS, METRIC_FIELDS, Trace, TraceMeta
from quicsm.traces.qlog import TraceState, bbr_marks, guess_cc, guess_impl, read_header, read_records
from quicsm.traces.qlog_values import JSON_ERRORS, decode_record
from quicsm.traces.report import ParseReport
from quicsm.traces.states import INIT, canonical_state, is_known_state

__all__ = ["QlogBatcher", "scan_qlogs_py", "available", "header_state"]

JOIN_BYTES = 1 << 20
"""Small qlogs are joined up to this size and scanned in one call."""
_HEADER_KEYS = ("trace", "qlog_version", "qlog_format", "file_schema")
_CLOSE = EVENT_KINDS.index("close")


def scan_qlogs_py(
    buf: bytes, bounds: bytes, seps: bytes, table: dict[bytes, int], names: list[str]
) -> tuple[tuple[bytes, ...], bytes, bytes, int]:
    """Without the C extension every file goes to the Python reader (status 1, no rows)."""
    n = len(bounds) // 8 - 1
    info = np.zeros((n, 4), np.int64)
    info[:, 0] = 1
    return (b"",) * 7, info.tobytes(), np.full(n, np.nan).tobytes(), 0


try:
    from quicsm.traces._scan import scan_qlogs as _scan_qlogs
except ImportError:  # pragma: no cover - depends on the install
    _scan_qlogs = scan_qlogs_py


def available() -> bool:
    return _scan_qlogs is not scan_qlogs_py


@dataclass(slots=True)
class _File:
    data: bytes
    path: str
    meta: TraceMeta
    sep: bytes


@dataclass(slots=True)
class _Block:
    """Finished traces in output order: per-row columns (strings as ids into the batcher's table)."""

    t_us: np.ndarray
    state: np.ndarray
    kind: np.ndarray
    prev: np.ndarray
    metrics: np.ndarray
    trigger: np.ndarray
    recovery: np.ndarray
    lengths: np.ndarray
    ids: list[str]
    keys: list[str]
    ccs: list[str]
    templates: list[Trace]
    extra: dict[int, tuple[tuple[str, str], ...]]

    def split(self, n: int) -> tuple[_Block, _Block]:
        """The first ``n`` traces and the rest."""
        r = int(self.lengths[:n].sum())
        cols = ("t_us", "state", "kind", "prev", "metrics", "trigger", "recovery")
        a = {k: getattr(self, k)[:r] for k in cols}
        b = {k: getattr(self, k)[r:] for k in cols}
        lists = ("ids", "keys", "ccs", "templates")
        ea = {k: v for k, v in self.extra.items() if k < r}
        eb = {k - r: v for k, v in self.extra.items() if k >= r}
        return (
            _Block(**a, lengths=self.lengths[:n], **{k: getattr(self, k)[:n] for k in lists}, extra=ea),
            _Block(**b, lengths=self.lengths[n:], **{k: getattr(self, k)[n:] for k in lists}, extra=eb),
        )


class QlogBatcher:
    """JSON-SEQ/NDJSON qlogs and the traces of other qlog readers, in input order, as column batches."""

    def __init__(self, report: ParseReport, on_bytes: Callable[[int], None] | None = None) -> None:
        self.report, self.on_bytes = report, on_bytes
        self.table: dict[bytes, int] = {}
        self.names: list[str] = []
        self.canon: list[int] = []
        """Per name id: the id of its canonical state name (filled as names are met as states)."""
        self.waiting: list[_File] = []
        self.waiting_bytes = 0
        self.blocks: list[_Block] = []
        self.rows = 0

    def intern(self, text: str | None) -> int:
        return intern(self.table, self.names, text)

    def add(self, data: bytes, path: str, meta: TraceMeta, kind: str) -> list[TraceColumns]:
        """A JSON-SEQ (``sqlog``) or NDJSON qlog read whole; the batches that filled up (mostly none)."""
        self.waiting.append(_File(data, path, meta, b"\x1e" if kind == "sqlog" else b"\n"))
        self.waiting_bytes += len(data)
        return self._scan() if self.waiting_bytes >= JOIN_BYTES else []

    def add_traces(self, traces: Iterable[Trace]) -> list[TraceColumns]:
        """Traces another reader made (a qlog document, a large or compressed qlog), after the files waiting."""
        out = self._scan()
        got = [t for t in traces if t.events]
        if got:
            out += self._add_block(self._objects(got))
        return out

    def flush(self) -> list[TraceColumns]:
        out = self._scan()
        if self.blocks:
            out.append(self._emit(self.blocks))
            self.blocks, self.rows = [], 0
        return out

    def _add_block(self, block: _Block) -> list[TraceColumns]:
        """Gather ``block``; a batch closes at the first trace that brings it to the store's row-group size."""
        out = []
        while len(block.ids):
            ends = self.rows + np.cumsum(block.lengths)
            full = np.flatnonzero(ends >= parquet.ROWS_PER_GROUP)
            if not len(full):
                self.blocks.append(block)
                self.rows = int(ends[-1])
                break
            head, block = block.split(int(full[0]) + 1)
            out.append(self._emit([*self.blocks, head]))
            self.blocks, self.rows = [], 0
        return out

    def _emit(self, blocks: list[_Block]) -> TraceColumns:
        def cat(k: str) -> np.ndarray:
            parts = [getattr(b, k) for b in blocks]
            return parts[0] if len(parts) == 1 else np.concatenate(parts)

        lengths = cat("lengths")
        n = int(lengths.sum())
        offsets = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        extra: dict[int, tuple[tuple[str, str], ...]] = {}
        base = 0
        for b in blocks:
            extra.update({r + base: v for r, v in b.extra.items()})
            base += len(b.t_us)
        kind = cat("kind")
        state = cat("state")
        ev = EventColumns(
            line=np.zeros(n, np.int64),
            src=np.repeat(np.arange(len(lengths), dtype=np.int32), lengths),
            conn=np.zeros(n, np.int32),
            cc=np.full(n, -1, np.int32),
            t_us=cat("t_us"),
            prev=cat("prev"),
            state=np.where(kind == 0, state, -1).astype(np.int32),
            kind=kind,
            metrics=cat("metrics"),
            trigger=cat("trigger"),
            recovery=cat("recovery"),
            names=list(self.names),
            extra=extra,
            first_seen=True,
        )
        ids = [i for b in blocks for i in b.ids]
        templates = [t for b in blocks for t in b.templates]
        ccs = [c for b in blocks for c in b.ccs]
        keys = [k for b in blocks for k in b.keys]
        order = np.arange(n, dtype=np.int64)
        return TraceColumns(ev, order, offsets, ids, keys, ccs, state, SharedMeta(templates, list(range(len(ids)))))

    def _objects(self, traces: list[Trace]) -> _Block:
        """Trace objects as a block."""
        name = self.intern
        rows = [e for t in traces for e in t.events]
        extra = {i: e.extra for i, e in enumerate(rows) if e.extra}
        metrics = np.array(
            [[NULL if v is None else v for v in (getattr(e, k) for k in METRIC_FIELDS)] for e in rows], np.int64
        ).reshape(-1, 7)
        return _Block(
            t_us=np.array([e.t_us for e in rows], np.int64),
            state=np.array([name(e.state) for e in rows], np.int32),
            kind=np.array([EVENT_KINDS.index(e.kind) for e in rows], np.int8),
            prev=np.array([name(e.prev) for e in rows], np.int32),
            metrics=metrics,
            trigger=np.array([name(e.trigger) for e in rows], np.int32),
            recovery=np.array([name(e.recovery) for e in rows], np.int32),
            lengths=np.array([len(t.events) for t in traces], np.int64),
            ids=[t.id for t in traces],
            keys=[t.key for t in traces],
            ccs=[t.cc for t in traces],
            templates=[Trace("", "", [], "", t.implementation, t.version, t.sources, dict(t.labels)) for t in traces],
            extra=extra,
        )

    def _scan(self) -> list[TraceColumns]:
        files, self.waiting, self.waiting_bytes = self.waiting, [], 0
        if not files:
            return []
        report = self.report
        joined = b"".join(f.data for f in files)
        bounds = np.zeros(len(files) + 1, np.int64)
        np.cumsum([len(f.data) for f in files], out=bounds[1:])
        raw, info_b, max_b, nrows = _scan_qlogs(
            joined, bounds.tobytes(), b"".join(f.sep for f in files), self.table, self.names
        )
        info = np.frombuffer(info_b, np.int64).reshape(-1, 4)
        src = np.frombuffer(raw[0], np.int32)
        kind = np.frombuffer(raw[1], np.int8)
        state = np.frombuffer(raw[3], np.int32)
        # states by canonical name; a file naming a state quicsm does not know is read by the Python reader
        # (which lists the name in the report)
        while len(self.canon) < len(self.names):
            self.canon.append(-2)
        canon = self.canon
        known = np.ones(len(self.names) + 1, bool)
        for sid in np.unique(state[kind == 0]).tolist() if nrows else []:
            if canon[sid] == -2:
                c = canonical_state(self.names[sid])
                canon[sid] = self.intern(c) if is_known_state(c) else -1
                while len(canon) < len(self.names):
                    canon.append(-2)
            known[sid] = canon[sid] >= 0
        bad_rows = (kind == 0) & ~known[state] if nrows else np.zeros(0, bool)
        unknown = np.zeros(len(files), bool)
        unknown[src[bad_rows]] = True
        # a file with metrics but no state event has its states inferred from the metrics, which the
        # Python reader does (quicsm.traces.metric_states)
        stateless = np.zeros(len(files), bool)
        if nrows:
            stateless[np.unique(src[kind == 2])] = True
            stateless[np.unique(src[kind == 0])] = False
            stateless &= np.array([f.meta.states != "logged" for f in files])
        fast = np.zeros(len(files), bool)
        heads: list[TraceState | None] = [None] * len(files)
        scale = np.ones(len(files))
        for i, f in enumerate(files):
            if info[i, 0] == 0 and not unknown[i] and not stateless[i] and f.meta.states != "metrics":
                st = header_state(joined[info[i, 1] : info[i, 2]], f.meta)
                if st is not None and st.time_format == "relative":
                    heads[i], fast[i], scale[i] = st, True, st.time_scale
        fast_block, fast_files = self._fast_traces(
            files, raw, src, kind, state, np.frombuffer(max_b, np.float64), fast, scale, heads
        )
        objects: list[tuple[int, Trace]] = []
        nbytes = 0
        for i, f in enumerate(files):  # in input order: the Python reader's reports come in file order
            if fast[i]:
                nbytes += len(f.data)
                report.bytes += len(f.data)
                report.lines += f.data.count(b"\n") + (f.sep == b"\n")
                continue
            got = list(read_records(io.BytesIO(f.data), f.path, f.meta, report, self.on_bytes, f.sep))
            if got:
                objects.append((i, got[0]))
        if self.on_bytes is not None and nbytes:
            self.on_bytes(nbytes)
        if objects:
            return self._add_block(self._merge(fast_block, fast_files, objects))
        return self._add_block(fast_block)

    def _fast_traces(
        self,
        files: list[_File],
        raw: tuple[bytes, ...],
        src: np.ndarray,
        kind: np.ndarray,
        state_raw: np.ndarray,
        max_t: np.ndarray,
        fast: np.ndarray,
        scale: np.ndarray,
        heads: list[TraceState | None],
    ) -> tuple[_Block, np.ndarray]:
        """The traces of the files the scanner read (``fast``), as a block, and each trace's file number."""
        report = self.report
        canon = np.asarray(self.canon + [-1], np.int64)  # index -1: no state
        keep = fast[src]
        src, kind, state_raw = src[keep], kind[keep], state_raw[keep]
        t = np.frombuffer(raw[2], np.float64)[keep]
        trig = np.frombuffer(raw[4], np.int32)[keep]
        metrics = np.frombuffer(raw[5], np.int64).reshape(-1, 7)[keep]
        timed = np.frombuffer(raw[6], np.float64).reshape(-1, 2)[keep]
        report.records += len(src)
        sc = scale[src]
        t_us = np.rint(t * sc).astype(np.int64)
        for j in range(2):
            v = timed[:, j]
            absent = np.isnan(v)
            metrics[:, 5 + j] = np.where(absent, NULL, np.rint(np.where(absent, 0.0, v) * sc).astype(np.int64))
        is_tr = kind == 0
        with_trace = np.zeros(len(files), bool)
        with_trace[src[is_tr]] = True
        keep = with_trace[src]
        src, kind, t_us, trig, metrics, is_tr = (
            src[keep],
            kind[keep],
            t_us[keep],
            trig[keep],
            metrics[keep],
            is_tr[keep],
        )
        state = np.where(is_tr, canon[state_raw[keep]], -1)
        n = len(src)
        rows = np.arange(n)
        # log order: the first state event enters from Init; a metric sample has the state then current
        tr_rows = np.flatnonzero(is_tr)
        first_log = np.ones(len(tr_rows), bool)
        first_log[1:] = src[tr_rows[1:]] != src[tr_rows[:-1]]
        init = self.intern(INIT)
        prev = np.full(n, -1, np.int32)
        prev[tr_rows[first_log]] = init
        last_tr = np.maximum.accumulate(np.where(is_tr, rows, -1)) if n else rows
        current = np.where((last_tr >= 0) & (src[np.maximum(last_tr, 0)] == src), state[np.maximum(last_tr, 0)], -1)
        # time order within each file (stable)
        order = np.lexsort((t_us, src))
        src_s, t_s, kind_s = src[order], t_us[order], kind[order]
        start = np.ones(n, bool)
        start[1:] = src_s[1:] != src_s[:-1]
        heads_at = np.flatnonzero(start)
        files_of = src_s[heads_at]
        tr_s = np.flatnonzero(kind_s == 0)
        first_tr = np.ones(len(tr_s), bool)
        first_tr[1:] = src_s[tr_s[1:]] != src_s[tr_s[:-1]]
        first_state = np.full(len(files), -1, np.int64)
        first_state[src_s[tr_s[first_tr]]] = state[order[tr_s[first_tr]]]
        filled = np.where(is_tr, state, np.where(current >= 0, current, first_state[src]))
        filled_s = filled[order]
        # a close event at the last time seen, when that is later than the last event
        ends = np.append(heads_at[1:], n) - 1 if n else heads_at
        max_us = np.rint(max_t[files_of] * scale[files_of]).astype(np.int64)
        closes = max_us > t_s[ends]
        at = ends[closes] + 1
        out_rows = np.insert(order, at, -1)
        is_close = out_rows < 0
        pick = np.maximum(out_rows, 0)
        t_out = t_us[pick]
        t_out[is_close] = max_us[closes]
        state_out = filled[pick]
        state_out[is_close] = filled_s[ends[closes]]
        kind_out = kind[pick].copy()
        kind_out[is_close] = _CLOSE
        prev_out = prev[pick]
        prev_out[is_close] = -1
        trig_out = trig[pick]
        trig_out[is_close] = -1
        metrics_out = metrics[pick]
        metrics_out[is_close] = NULL
        lengths = np.diff(np.append(heads_at, n)) + closes
        # cc: qlog.guess_cc on each file's states (bbr_marks per distinct state)
        bbr = np.zeros(len(self.names) + 1, bool)
        bbr2 = np.zeros(len(self.names) + 1, bool)
        for sid in np.unique(state[is_tr]).tolist() if n else []:
            bbr[sid], bbr2[sid] = bbr_marks(self.names[sid])
        tr_files = src[is_tr]
        any_bbr = np.zeros(len(files), bool)
        any_bbr[tr_files[bbr[state[is_tr]]]] = True
        any_bbr2 = np.zeros(len(files), bool)
        any_bbr2[tr_files[bbr2[state[is_tr]]]] = True
        ids, keys, ccs, templates = [], [], [], []
        for i in files_of.tolist():
            f, st = files[i], heads[i]
            assert st is not None
            meta = f.meta
            impl = meta.implementation or guess_impl(st.title)
            cc = meta.cc or guess_cc(bool(any_bbr[i]), bool(any_bbr2[i]), impl, st.cc_hint)
            ids.append(f"{f.path}:{st.conn}")
            keys.append(st.conn)
            ccs.append(cc)
            templates.append(Trace("", "", [], "", impl, meta.version or st.code_version, (f.path,), dict(meta.labels)))
        report.traces += len(ids)
        block = _Block(
            t_us=t_out,
            state=state_out.astype(np.int32),
            kind=kind_out.astype(np.int8),
            prev=prev_out,
            metrics=metrics_out,
            trigger=trig_out,
            recovery=np.full(len(t_out), -1, np.int32),
            lengths=lengths.astype(np.int64),
            ids=ids,
            keys=keys,
            ccs=ccs,
            templates=templates,
            extra={},
        )
        return block, files_of

    def _merge(self, fast: _Block, fast_files: np.ndarray, objects: list[tuple[int, Trace]]) -> _Block:
        """The scanner's traces and the Python reader's, in file order."""
        obj = self._objects([t for _, t in objects])
        blocks = [fast, obj]
        where = np.concatenate([fast_files, np.asarray([i for i, _ in objects], np.int64)])
        trace_order = np.argsort(where, kind="stable")
        lengths = np.concatenate([fast.lengths, obj.lengths])
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        rows = np.concatenate([np.arange(starts[i], starts[i] + lengths[i]) for i in trace_order.tolist()])
        cols: dict[str, Any] = {}
        for k in ("t_us", "state", "kind", "prev", "metrics", "trigger", "recovery"):
            cols[k] = np.concatenate([getattr(b, k) for b in blocks])[rows]
        lists: dict[str, Any] = {
            k: [x for b in blocks for x in getattr(b, k)] for k in ("ids", "keys", "ccs", "templates")
        }
        at = {int(r): i for i, r in enumerate(rows.tolist())}
        base = len(fast.t_us)
        extra = {at[r + base]: v for r, v in obj.extra.items()}
        return _Block(
            **cols,
            lengths=lengths[trace_order],
            **{k: [v[i] for i in trace_order.tolist()] for k, v in lists.items()},  # type: ignore[arg-type]
            extra=extra,
        )


def header_state(text: bytes, meta: TraceMeta) -> TraceState | None:
    """The reader's state after a file's header record (None: not a header the scanner's rows can follow)."""
    try:
        rec = decode_record(text)
    except JSON_ERRORS:
        return None
    if type(rec) is not dict or not any(k in rec for k in _HEADER_KEYS):
        return None
    st = TraceState(conn="conn", cc_hint=meta.cc)
    read_header(rec, rec.get("trace") or {}, st)
    return st
