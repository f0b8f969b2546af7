"""qlog traces as column batches: every qlog (JSON-SEQ, NDJSON, one JSON document; plain or gzip; any
size) read window by window by the qlog scanner (:mod:`quicsm.traces.qlog_scanner`) into rows, with no
Python object per event, and cut into traces here.

The traces are those the object reader gave (tests/traces/qlog_oracle.py keeps it as the oracle): in
file order, one per JSON-SEQ/NDJSON file and one per ``traces[]`` entry of a document, their events
sorted by time, the state a changes-only logger left first entered from ``Init`` at the trace's first
time (``trigger=qlog_start``), metric samples before the first state event given the first state, and
a close event at the last time seen. Batches close as the Parquet writer closes row groups of trace
objects (at the first trace that brings them to :data:`~quicsm.traces.parquet.ROWS_PER_GROUP` rows), and
their string columns keep the order of first appearance
(:attr:`~quicsm.traces.columnar.EventColumns.first_seen`), so a store written from them is the store
written from the objects, byte for byte.

Limits (each reported with the file, line and reason, and reading goes on where it can):

* :data:`MAX_RECORD`: a JSON-SEQ/NDJSON record or a document's event or member longer than this is
  skipped (the same bound as a text log's line): a record is held whole while it is read.
* :data:`MAX_TRACE_EVENTS`: a trace holds at most this many congestion events (state changes and
  metric samples); the rest of its file is not read. Memory is about 100 bytes an event read and as
  much again to cut it (the Parquet writer then builds one row group at a time): the bound keeps one
  connection's trace under about 0.5 GB (a 1 GB quic-go qlog holds about 1.6 million).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from quicsm.errors import InputError, truncated
from quicsm.traces import parquet, qlog_scanner
from quicsm.traces.columnar import NULL, EventColumns, SharedMeta, TraceColumns, intern
from quicsm.traces.events import EVENT_KINDS, Trace, TraceMeta
from quicsm.traces.logscan import MAP_MIN, MAX_LINE, Window, regular_size
from quicsm.traces.qlog import (
    LOST,
    METRICS,
    PTO,
    SPURIOUS,
    TIMER,
    TRANSITION,
    QlogFile,
    TraceState,
    bbr_marks,
    guess_cc,
    guess_impl,
    read_header,
)
from quicsm.traces.qlog_scanner import AUX_DTYPE, MARK_DTYPE, available
from quicsm.traces.report import ParseReport
from quicsm.traces.states import INIT, canonical_state, is_known_state

__all__ = ["QlogBatcher", "available", "MAX_RECORD", "MAX_TRACE_EVENTS", "WINDOW"]

WINDOW = 1 << 22
"""Bytes read at a time (a record or event longer than that grows the window, up to :data:`MAX_RECORD`)."""
MAX_RECORD = MAX_LINE
"""The longest record, event or member value read (16 MiB, as a text log's line)."""
MAX_TRACE_EVENTS = 1 << 21
"""Congestion events one trace may hold (2 Mi: a 1 GB quic-go qlog of one connection holds about 1.6 Mi;
``parse -o x.parquet`` of it peaks at about 0.4 GB)."""
_CLOSE = EVENT_KINDS.index("close")
_PLACEHOLDER = 3
_NO_METRICS = (NULL,) * 7
_NO_RTT = (float("nan"), float("nan"))
_NO_AUX = (float("nan"),) * 3
_TYPES = (np.float64, np.int8, np.int32, np.int32, np.int32, np.int32, np.int64, np.float64)
"""The scanner's columns: time, kind, state, from-state, trigger, recovery, metrics x 7, RTTs as written x 2."""


@dataclass(slots=True)
class _Trace:
    """A trace read whole: its rows are ``[row0, end)`` of the scanner's batch, then its placeholders."""

    row0: int
    end: int
    initial: int
    """Canonical id of the state a changes-only logger left first (-1: none, the first event enters from Init)."""
    close: bool
    path: str
    meta: TraceMeta
    st: TraceState
    index: int
    inferred: _Inferred | None = None


@dataclass(slots=True)
class _Inferred:
    """States read from a trace's metrics (:mod:`quicsm.traces.metric_states`): the state of each of its
    metrics rows, and the exact times of the transitions added as its last rows."""

    rows: np.ndarray
    """Metrics rows (batch row numbers)."""
    states: np.ndarray
    """Their states (ids)."""
    t_rows: np.ndarray
    t_us: np.ndarray


def whole_below(window: int | None = None, max_record: int | None = None) -> int:
    """Plain qlogs smaller than this are read whole, with one ``read()``, not in windows: smaller than one
    window, than a mapped file and than a record (the module's own sizes unless given). The qlog reader's
    :attr:`~quicsm.traces.readers.ReaderSpec.whole`: such a file comes to it read whole."""
    return min(window or WINDOW, MAP_MIN, MAX_RECORD if max_record is None else max_record)


class QlogBatcher:
    """qlogs read one after the other into column batches of whole traces, in input order."""

    def __init__(
        self,
        report: ParseReport,
        on_bytes: Callable[[int], None] | None = None,
        *,
        window: int | None = None,
        max_record: int = MAX_RECORD,
        max_events: int = MAX_TRACE_EVENTS,
        scanner: type[Any] | None = None,
        metrics: bool = True,
        ahead: bool = False,
    ) -> None:
        self.report, self.on_bytes = report, on_bytes
        self.metrics = metrics
        """Whether the batches carry the metrics (False: unknown, as a store read without them): the scanner
        then stores only those of a trace whose states they may give, not 72 of a row's 97 bytes."""
        self.window, self.max_record, self.max_events = window or WINDOW, max_record, max_events
        self.table: dict[bytes, int] = {}
        self.names: list[str] = []
        self.sc = (scanner or qlog_scanner.Scanner)(self.table, self.names)
        self.sc.max_value = max_record
        self.sc.keep_metrics = int(metrics)
        self.traces: list[_Trace] = []
        self.rows = 0
        """Rows of the traces gathered (what the Parquet writer counts)."""
        self.ready: list[Any] = []
        """Batches that filled up (and, under ``ahead``, row groups sent ahead of theirs), not given yet."""
        self.buf = bytearray()
        """The window, kept from file to file."""
        self._doc: _Document | None = None
        self.ahead = ahead and metrics
        """Hand a long trace's row groups over while it is read (:class:`~quicsm.traces.parquet.GroupAhead`):
        for the store writer only, which holds them until the batch's end says they stand."""
        self._ahead: _Ahead | None = None
        self._again: tuple[BinaryIO, str] | None = None
        """The JSON-SEQ or NDJSON file being read, where it may be read again (a plain file): its one trace
        may then be sent ahead, since the file is read again if what was sent does not hold."""

    def intern(self, text: str | None) -> int:
        return intern(self.table, self.names, text)

    def name_of(self, i: int) -> str:
        return self.names[i]

    # ---- entry points

    def add(self, data: bytes, path: str, meta: TraceMeta, kind: str) -> list[TraceColumns]:
        """A qlog read whole (``sqlog``, ``ndjson`` or ``qlog``); the batches that filled up (mostly none)."""
        qf = self._open(path, meta, kind)
        self.report.bytes += len(data)
        if kind == "qlog":
            self.sc.document(data, 0, len(data), True, self._doc_handler)
            self._end_document(qf)
        else:
            self.sc.records(data, 0, len(data), _sep(kind), True, qf.record)
            self._end_records(qf, kind)
        if self.on_bytes is not None:
            self.on_bytes(len(data))
        out, self.ready = self.ready, []
        return out

    def read(self, stream: BinaryIO, path: str, meta: TraceMeta, kind: str) -> Iterator[TraceColumns]:
        """A qlog streamed in windows; yields the batches that filled up meanwhile. A plain file smaller than
        one window (and than a mapped file, and a record) is read whole with one ``read()`` instead, as
        :meth:`add` takes it: the same scan, without the window's steps."""
        size = regular_size(stream) if type(stream) is io.BufferedReader else None
        if size is not None and size < whole_below(self.window, self.max_record):
            yield from self.add(stream.read(), path, meta, kind)
            return
        qf = self._open(path, meta, kind)
        document = kind == "qlog"
        again = self.ahead and not document and type(stream) is io.BufferedReader and stream.seekable()
        self._again = (stream, kind) if again else None
        sep = _sep(kind)
        sc, report = self.sc, self.report
        handler = self._doc_handler if document else qf.record
        win = Window(stream, self.buf, self._grown)  # read into self.buf, or a plain file's mapping
        skipping = False  # inside an overlong record, dropping bytes to its separator
        try:
            while True:
                got, error = win.fill(self.window)
                buf, end = win.buf, win.end
                report.bytes += got
                if self.on_bytes is not None and got:
                    self.on_bytes(got)
                if skipping:
                    at = buf.find(sep, end - got, end)
                    sc.lines += win.newlines(end - got, end if at < 0 else at + 1)
                    if at < 0 and got and error is None:
                        win.consumed(end)
                        continue
                    skipping = False
                    sc.record_no += 1
                    if at < 0:  # the file ends inside the skipped record: it was the last one
                        if error is not None:
                            report.problem(path, sc.lines + 1, _cut_short(error), "truncated input")
                        break
                    win.consumed(at + 1)
                    buf, end = win.buf, win.end
                final = not got or error is not None
                if error is not None:
                    done = self._feed(document, buf, win.lo, end, sep, False, handler)
                    report.problem(path, sc.lines + 1, _cut_short(error), "truncated input")
                    self._feed(document, buf, done, end, sep, True, handler)
                    break
                done = self._feed(document, buf, win.lo, end, sep, final, handler)
                if self._again is not None and not final:
                    self._send_ahead(qf)
                yield from self._take_ready()
                if final:
                    break
                if sc.rows - sc.trace_row0 + (self._ahead.taken if self._ahead else 0) > self.max_events:
                    report.problem(
                        path,
                        sc.lines + 1,
                        f"a trace with more than {self.max_events} congestion events: the rest of the file is not read",
                        "trace too long",
                    )
                    if document:
                        self._broken_document(sc.lines + 1)
                    break
                if not document and end - done > self.max_record:
                    report.problem(
                        path,
                        sc.lines + 1,
                        f"{qf.label} {sc.record_no + 1} is longer than {self.max_record} bytes: skipped",
                        "overlong qlog record",
                    )
                    sc.lines += win.newlines(done, end)
                    skipping = True
                    win.consumed(end)
                    continue
                win.consumed(done)
        finally:
            win.close()
        gz = getattr(stream, "error", None)
        if gz is not None and not getattr(stream, "error_raised", True):  # a gzip stream that broke unnoticed
            report.problem(path, 0, truncated(gz), "truncated input")
        if document:
            self._end_document(qf)
        else:
            self._end_records(qf, kind)
        yield from self._take_ready()

    def _grown(self, buf: bytearray, size: int) -> bytearray:
        """The window grown to ``size`` bytes, its content kept. A window something still holds a view of
        cannot be resized (BufferError, seen once under a Dask worker reading a .sqlog.gz): then a copy
        becomes the window, so the read goes on instead of losing the worker's whole batch."""
        try:
            buf.extend(bytes(size - len(buf)))
        except BufferError:
            buf = bytearray(buf)
            buf.extend(bytes(size - len(buf)))
            self.buf = buf
        return buf

    def flush(self) -> list[TraceColumns]:
        """The batch gathered so far (every file read is complete)."""
        out, self.ready = self.ready, []
        if self.traces:
            out.append(self._emit())
        else:  # state names read in traces none of which was kept (no states read from their metrics)
            self._list_unknown(np.frombuffer(self.sc.take_uses(), np.int64), self.names)
        return out

    # ---- files and traces

    def _feed(
        self, document: bool, buf: bytearray, start: int, end: int, sep: int, final: bool, handler: Callable[..., Any]
    ) -> int:
        if document:
            return int(self.sc.document(buf, start, end, final, handler))
        return int(self.sc.records(buf, start, end, sep, final, handler))

    def _take_ready(self) -> list[TraceColumns]:
        out, self.ready = self.ready, []
        return out

    def _open(self, path: str, meta: TraceMeta, kind: str) -> QlogFile:
        self.sc.new_file()
        self.sc.states = _STATES[meta.states]
        qf = QlogFile(self.sc, path, meta, self.report, self.intern, self.name_of)
        if kind == "ndjson":
            qf.label = "NDJSON line"
        if kind == "qlog":
            self.sc.header = 1
            self._doc = _Document(qf)
        return qf

    def _end_records(self, qf: QlogFile, kind: str) -> None:
        self.report.lines += self.sc.lines + (kind == "ndjson")
        self._end_trace(qf, qf.st, 0)

    def _end_trace(self, qf: QlogFile, st: TraceState, index: int) -> None:
        """The trace being read is whole: kept (with its placeholders) if it holds a transition, or if its
        states can be read from its metrics."""
        sc = self.sc
        ahead, self._ahead = self._ahead, None
        self.report.records += (ahead.taken if ahead is not None else 0) + sc.rows - sc.trace_row0 + sc.skipped
        inferred = None
        scale = st.time_scale
        last = round(sc.row_tmax * scale)  # the last event's time (of the rows read)
        if not sc.trans:
            inferred = self._infer(qf, st) if qf.meta.states != "logged" else None
            if inferred is None:
                sc.drop_trace()
                return
            last = max(last, int(inferred.t_us.max()))
        initial = self._initial()
        row0, end = sc.trace_row0, sc.rows
        close = round(sc.tmax * scale) > last
        if ahead is not None:
            if ahead.finish(self, _trace_id(qf.path, st, index), initial, close):
                batch = _trace_meta(qf.path, st, qf.meta, bool(ahead.bbr[0]), bool(ahead.bbr[1]))
            else:  # what was sent ahead did not hold (rare: a time going back): the trace's batch whole
                batch = self._read_again(qf)
            self._end_batch()
            self.report.traces += len(batch)
            self.ready.append(batch)
            return
        if initial >= 0:
            sc.put(_PLACEHOLDER, sc.tmin, initial, -1, -1, -1, _NO_METRICS, _NO_RTT, _NO_AUX)
        if close:
            sc.put(_PLACEHOLDER, sc.tmax, -1, -1, -1, -1, _NO_METRICS, _NO_RTT, _NO_AUX)
        self.traces.append(_Trace(row0, end, initial, close, qf.path, qf.meta, st, index, inferred))
        self.rows += sc.rows - row0
        if self.rows >= parquet.ROWS_PER_GROUP:
            self.ready.append(self._emit())

    def _initial(self) -> int:
        """The id of the state a changes-only logger left first (its trace's first row), -1 if none."""
        sc = self.sc
        first = canonical_state(self.names[sc.first_prev]) if sc.first_prev >= 0 else INIT
        return self.intern(first) if first != INIT else -1

    def _infer(self, qf: QlogFile, st: TraceState) -> _Inferred | None:
        """A trace without state events: its states read from its metrics (what the oracle's
        ``infer_events``, tests/traces/qlog_oracle.py, does with trace objects), the transitions added as
        rows; None if there is none."""
        from quicsm.traces.metric_states import BBR_STATES, LOSS_STATES, MetricSeries, infer, profile_for

        sc = self.sc
        raw_t, raw_kind, raw_metrics, raw_rtt, raw_aux, raw_marks = sc.trace()
        kind = np.frombuffer(raw_kind, np.int8)
        mrows = np.flatnonzero(kind == METRICS)
        if not len(mrows):
            return None
        scale = st.time_scale
        t_us = np.rint(np.frombuffer(raw_t, np.float64) * scale).astype(np.int64)
        order = mrows[np.argsort(t_us[mrows], kind="stable")]
        m = np.frombuffer(raw_metrics, np.int64).reshape(-1, 7)[order]
        rtt = np.frombuffer(raw_rtt, np.float64).reshape(-1, 2)[order]
        aux = np.frombuffer(raw_aux, AUX_DTYPE)
        values = np.full((len(kind), 3), np.nan)
        values[aux["row"]] = aux["values"]
        marks = np.frombuffer(raw_marks, MARK_DTYPE)
        mark_us = np.rint(marks["t"] * scale).astype(np.int64)
        series = MetricSeries(
            t_us=t_us[order],
            cwnd=m[:, 0].copy(),
            inflight=m[:, 1].copy(),
            ssthresh=m[:, 2].copy(),
            pacing=m[:, 3].copy(),
            srtt_us=_scaled(rtt[:, 1], m[:, 6], scale),
            min_rtt_us=_scaled(rtt[:, 0], m[:, 5], scale),
            latest_rtt_us=_num(values[order, 0], scale),
            packets=_num(values[order, 1], 1.0),
            pto_count=_num(values[order, 2], 1.0),
            lost_us=np.sort(mark_us[marks["code"] == LOST]),
            pto_us=np.sort(mark_us[marks["code"] == PTO]),
            timer_us=np.sort(mark_us[(marks["code"] == TIMER) | (marks["code"] == PTO)]),
            spurious_us=np.sort(mark_us[marks["code"] == SPURIOUS]),
            start_us=round(sc.tmin * scale) if sc.has_t else None,
        )
        if not (series.cwnd != NULL).any():
            return None  # nothing to read a state from
        got = infer(series, profile_for(qf.meta.implementation or guess_impl(st.title)))
        if got.refused:
            self.report.problem(qf.path, 1, f"states not read: {got.refused}", "states not read")
        if not len(got):
            return None
        names = LOSS_STATES if got.family == "loss" else BBR_STATES
        ids = np.array([self.intern(n) for n in names], np.int32)
        row0 = sc.trace_row0
        states, sc.states = sc.states, 0  # the inferred transitions are rows whatever the file's mode
        prev = self.intern(INIT)
        t_rows = np.arange(sc.rows, sc.rows + len(got), dtype=np.int64)
        for t, state, why in zip(got.t_us.tolist(), got.states, got.reasons):
            sid = self.intern(state)
            sc.put(TRANSITION, t / scale, sid, prev, self.intern(why), -1, _NO_METRICS, _NO_RTT, _NO_AUX)
            prev = sid
        sc.states = states
        return _Inferred(row0 + order, ids[got.sample_state], t_rows, got.t_us.astype(np.int64))

    # ---- a long trace's row groups ahead of it

    def _send_ahead(self, qf: QlogFile) -> None:
        """Between windows of a JSON-SEQ or NDJSON file that may be read again: the rows of its trace, if it
        will be cut into row groups (it alone in its batch, over twice
        :data:`~quicsm.traces.parquet.ROWS_PER_GROUP` rows so far, a transition read), taken
        from the scanner and turned into the groups they complete, handed over as
        :class:`~quicsm.traces.parquet.GroupAhead` (then the rest of the trace's rows, taken a group or
        more at a time)."""
        sc, rpg = self.sc, parquet.ROWS_PER_GROUP
        ahead = self._ahead
        if ahead is None:
            if self.traces or sc.trace_row0 or not sc.trans or sc.rows <= 2 * rpg:
                return
            ahead = self._ahead = _Ahead(self, _trace_id(qf.path, qf.st, 0), qf.st, self._initial())
        elif ahead.failed or sc.rows < rpg:
            return
        ahead.add(self, sc.take())

    def _read_again(self, qf: QlogFile) -> TraceColumns:
        """The batch of the file's one trace, read again from its start without sending ahead (its problems
        and counts were reported by the first read)."""
        assert self._again is not None
        stream, kind = self._again
        stream.seek(0)
        other = QlogBatcher(
            ParseReport(),
            window=self.window,
            max_record=self.max_record,
            max_events=self.max_events,
            scanner=type(self.sc),
            metrics=self.metrics,
        )
        batches = [b for b in (*other.read(stream, qf.path, qf.meta, kind), *other.flush()) if len(b)]
        if len(batches) != 1:
            raise InputError(f"{qf.path}: the file changed while it was read")
        return batches[0]

    def _end_batch(self) -> None:
        """The batch is given: its unknown states listed, a string table for the next."""
        self._list_unknown(np.frombuffer(self.sc.take_uses(), np.int64), self.names)
        self.traces, self.rows = [], 0
        self.table, self.names = {}, []
        self.sc.tables(self.table, self.names)

    # ---- one JSON document

    def _doc_handler(self, code: int, key: bytes | None, value: Any, line: int, trace: int, event: int) -> None:
        doc = self._doc
        assert doc is not None
        qf, sc = doc.qf, self.sc
        if code == 5:
            qf.doc_event(value, line, trace, event)
        elif code == 1:
            doc.members[key.decode("utf-8", "replace")] = qf.member(value)  # type: ignore[union-attr]
        elif code == 12:
            doc.traces = True
        elif code == 2:
            sc.new_trace()
            sc.header = 1
            doc.trace = {}
            doc.events = None
            doc.open = True
        elif code == 3:
            name = key.decode("utf-8", "replace")  # type: ignore[union-attr]
            doc.trace[name] = qf.member(value)
            if name == "events":
                doc.events = False
        elif code == 4:
            doc.events = True
            doc.started = True
            st = TraceState(conn=f"trace{trace}", cc_hint=qf.meta.cc)
            read_header(doc.members, doc.trace, st)
            qf.st = st
            sc.delta = st.time_format == "delta"
            fields = doc.trace.get("event_fields")
            qf.fields = [str(f).lower() for f in fields] if isinstance(fields, list) else None
        elif code == 7:
            self._end_doc_trace(doc, trace)
        elif code == 8:
            self.report.problem(qf.path, 1, f"traces[{trace}] has no events list (an error entry?)", "bad qlog")
        elif code == 9:
            self._broken_document(line, value)
        elif code == 10:
            what = f"traces[{trace}].events[{event}]" if key is None else f"member {key.decode('utf-8', 'replace')!r}"
            self.report.problem(
                qf.path, line, f"{what} is longer than {self.max_record} bytes: skipped", "overlong qlog value"
            )
        elif code == 11:
            self.report.problem(qf.path, line, "data after the end of the JSON document: not read", "bad qlog")

    def _end_doc_trace(self, doc: _Document, trace: int) -> None:
        qf = doc.qf
        doc.open = False
        if not doc.events:
            self.report.problem(qf.path, 1, f"traces[{trace}] has no events list (an error entry?)", "bad qlog")
            self.sc.drop_trace()
            return
        # members after the events name the trace; they cannot change how its events were read
        st = TraceState(conn=f"trace{trace}", cc_hint=qf.meta.cc)
        read_header(doc.members, doc.trace, st)
        used = qf.st
        if (st.time_scale, st.time_format == "delta") != (used.time_scale, used.time_format == "delta"):
            self.report.problem(
                qf.path, 1, f"traces[{trace}]: time_units or time_format after the events: not applied", "bad qlog"
            )
        st.time_scale, st.time_format = used.time_scale, used.time_format
        self._end_trace(qf, st, trace)

    def _broken_document(self, line: int, why: str | None = None) -> None:
        doc = self._doc
        assert doc is not None
        qf = doc.qf
        if why is not None:
            if doc.started:
                self.report.problem(
                    qf.path,
                    line,
                    f"JSON qlog cut or broken here (expected {why}); kept the events before it",
                    "bad qlog",
                )
            else:
                self.report.skipped_file(qf.path, f"not a JSON qlog (line {line}: expected {why})")
                doc.skipped = True
        if doc.open:
            self._end_doc_trace(doc, self.sc.trace_index)
        doc.done = True

    def _end_document(self, qf: QlogFile) -> None:
        doc = self._doc
        assert doc is not None
        self.report.lines += self.sc.lines
        if doc.open:  # cut inside a trace without the walker saying so (a read stopped early)
            self._end_doc_trace(doc, self.sc.trace_index)
        if not doc.traces and not doc.skipped:
            self.report.skipped_file(qf.path, "JSON without a traces[] array: not a qlog file")
        self._doc = None

    # ---- batches

    def _list_unknown(self, uses: np.ndarray, names: list[str]) -> None:
        """The state names the C scanner read (``uses``: reads per name id), made canonical, listed in the
        report when quicsm does not know them (the Python twin lists them as its handler reads them)."""
        for i in np.flatnonzero(uses).tolist():
            c = canonical_state(names[i])
            if not is_known_state(c):
                self.report.unknown_states[c[:100]] += int(uses[i])

    def _emit(self) -> TraceColumns:
        """The traces gathered, cut from the scanner's rows into one batch; the scanner starts the next."""
        sc = self.sc
        raw = sc.take()
        uses = np.frombuffer(sc.take_uses(), np.int64)
        traces, table, names = self.traces, self.table, self.names
        self.traces, self.rows = [], 0
        self.table, self.names = {}, []
        sc.tables(self.table, self.names)
        report = self.report
        t, kind_raw, state_raw, prev_raw, trig, recov, metrics, rtt = (
            np.frombuffer(b, dt) for b, dt in zip(raw, _TYPES)
        )
        n, ntr = len(t), len(traces)
        if not self.metrics:  # one read-only "unknown" broadcast over the rows, as a store read without them
            metrics, rtt = np.broadcast_to(np.int64(NULL), (n, 7)), np.zeros((0, 2))
        metrics = metrics.reshape(-1, 7)
        rtt = rtt.reshape(-1, 2)

        def name_id(text: str) -> int:
            return intern(table, names, text)

        self._list_unknown(uses, names)
        # state and from-state ids as positions in a table of canonical ids whose first entry is "none" (-1)
        state_at, prev_at = _plus_one(state_raw), _plus_one(prev_raw)
        np.maximum(state_at, 0, out=state_at)
        np.maximum(prev_at, 0, out=prev_at)
        named = np.flatnonzero(_present(len(names) + 1, state_at, prev_at)[1:])
        mapped = [name_id(canonical_state(names[i])) for i in named.tolist()]
        canon = np.arange(-1, len(names), dtype=np.int32)
        canon[named + 1] = mapped
        init_id, start_id = name_id(INIT), name_id("qlog_start")
        exact = [tr.inferred for tr in traces if tr.inferred is not None]
        # per trace: its block of rows (its rows, then its placeholders)
        row0 = np.array([tr.row0 for tr in traces] + [n], np.int64)
        lengths = np.diff(row0)
        tr_of = np.repeat(np.arange(ntr, dtype=np.int32), lengths)
        scales = np.array([tr.st.time_scale for tr in traces])
        # (one unit for all the traces, as a scalar: the same products, without a column of it)
        scale = scales[0] if ntr and (scales == scales[0]).all() else np.repeat(scales, lengths)
        # (the scanner's time column is the batch's own: scaled in place when it can be)
        in_place = np.ndim(scale) == 0 and t.flags.writeable
        t_us = _rounded(np.multiply(t, scale, out=t) if in_place else t * scale)
        for inf in exact:  # the inferred transitions' times, as metric_states gave them
            t_us[inf.t_rows] = inf.t_us
        for j in range(2):
            v = rtt[:, j]
            have = ~np.isnan(v)
            if have.any():
                if not metrics.flags.writeable:
                    metrics = metrics.copy()
                x = v * scale
                x[~have] = 0.0  # (the rows without it keep their metric)
                np.copyto(metrics[:, 5 + j], _rounded(x), where=have)
        state = canon[state_at]
        for inf in exact:  # metrics rows in the state read from the metrics
            state[inf.rows] = inf.states
        prev = canon[prev_at]
        kind = kind_raw.copy()
        trigger = trig if trig.flags.writeable or not len(trig) else trig.copy()  # (the batch's own: changed in place)
        # placeholders: the initial state (first in its trace) and the close (last)
        ends = np.array([tr.end for tr in traces], np.int64)
        has_init = np.array([tr.initial >= 0 for tr in traces], bool)
        has_close = np.array([tr.close for tr in traces], bool)
        init_rows = ends[has_init]
        close_rows = (ends + has_init)[has_close]
        kind[init_rows] = 0
        prev[init_rows] = init_id
        if len(init_rows):
            trigger[init_rows] = start_id
        # the first state event of each trace (in log order) enters from Init, unless a changes-only
        # logger named the state it left (then that state was entered at the trace's start)
        tr_rows = np.flatnonzero(kind_raw == 0)
        first_log = np.ones(len(tr_rows), bool)
        first_log[1:] = tr_of[tr_rows[1:]] != tr_of[tr_rows[:-1]]
        firsts = tr_rows[first_log]
        prev[firsts[~has_init[tr_of[firsts]]]] = init_id
        # time order within each trace: placeholders first and last
        cls = np.ones(n, np.int8)
        cls[init_rows] = 0
        cls[close_rows] = 2
        order = _time_order(t_us, cls, tr_of)
        kind_o = kind[order]
        is_tr = kind == 0
        tr_pos = np.flatnonzero(kind_o == 0)
        first_pos = np.ones(len(tr_pos), bool)
        first_pos[1:] = tr_of[order[tr_pos[1:]]] != tr_of[order[tr_pos[:-1]]]
        first_state = np.full(ntr, -1, np.int32)
        first_state[tr_of[order[tr_pos[first_pos]]]] = state[order[tr_pos[first_pos]]]
        filled = state.copy()  # transitions' states; other rows keep the state then, or the trace's first state
        unset = state < 0
        unset &= ~is_tr
        if unset.any():
            filled[unset] = first_state[tr_of[unset]]
        filled[close_rows] = filled[order[np.cumsum(lengths)[has_close] - 2]]
        # cc: BBR states give BBR away (qlog.guess_cc over each trace's states)
        marks = np.zeros((len(names) + 1, 2), bool)
        filled_at = filled + 1
        np.maximum(filled_at, 0, out=filled_at)
        for sid in np.flatnonzero(_present(len(names) + 1, filled_at)[1:]).tolist():
            marks[sid] = bbr_marks(names[sid])
        bbr = np.zeros((ntr, 2), bool)
        if marks.any():  # (ufunc.at is slow: only where some state is BBR's)
            np.logical_or.at(bbr, tr_of[filled >= 0], marks[filled[filled >= 0]])
        offsets = np.zeros(ntr + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        ids, keys, ccs, templates = [], [], [], []
        for i, tr in enumerate(traces):
            st, meta = tr.st, tr.meta
            impl = meta.implementation or guess_impl(st.title)
            ccs.append(meta.cc or guess_cc(bool(bbr[i, 0]), bool(bbr[i, 1]), impl, st.cc_hint))
            ids.append(f"{tr.path}:{st.conn}" if tr.index == 0 else f"{tr.path}:{st.conn}#{tr.index + 1}")
            keys.append(st.conn)
            labels = dict(meta.labels)
            if tr.inferred is not None:  # states read from metrics: only then is metric_states imported
                from quicsm.traces.metric_states import INFERRED_LABEL

                labels.update(INFERRED_LABEL)
            templates.append(Trace("", "", [], "", impl, meta.version or st.code_version, (tr.path,), labels))
        report.traces += ntr
        ev = EventColumns(
            line=np.zeros(n, np.int64),
            src=tr_of,
            conn=np.zeros(n, np.int32),
            cc=np.full(n, -1, np.int32),
            t_us=t_us,
            prev=prev,
            state=np.where(is_tr, state, np.int32(-1)),
            kind=kind,
            metrics=metrics,
            trigger=trigger,
            recovery=recov,
            names=names,
            first_seen=True,
        )
        return TraceColumns(ev, order, offsets, ids, keys, ccs, filled, SharedMeta(templates, list(range(ntr))))


class _Ahead:
    """A trace whose row groups are handed over while it is read (:meth:`QlogBatcher._send_ahead`): its rows
    taken from the scanner a chunk at a time and given the order, states and dictionaries
    :meth:`QlogBatcher._emit` gives them in the whole batch, on assumptions the rest of the trace must keep
    (checked as it comes and at :meth:`finish`): no time before one sent, the same first transition, first
    time and id, no dictionary value but those the groups carry (the values read so far, and ``close``,
    the last row's). Where one fails, the file is read again for the whole batch, and the writer drops
    the groups sent; the rows taken are not kept (a 1 GB qlog's were 150 MB)."""

    def __init__(self, b: QlogBatcher, tid: str, st: TraceState, initial: int) -> None:
        self.id, self.key, self.scale, self.initial = tid, st.conn, st.time_scale, initial
        self.tmin = b.sc.tmin
        self.taken = 0
        """Rows taken from the scanner."""
        self.failed = False
        self.canon = np.full(1, -1, np.int32)
        """Per name id + 1, its canonical state's id (0: none)."""
        self.init_id, self.start_id = b.intern(INIT), b.intern("qlog_start")
        self.first_state = -1
        self.first_t: int | None = None
        """Time of the first transition (no initial state): none may come before it."""
        self.t_sent: int | None = None
        """The greatest time sent: none may come before it."""
        self.pending: dict[str, np.ndarray] | None = None
        """Rows not sent, in order."""
        self.seen: dict[str, list[int]] = {k: [] for k in _DICTIONARIES}
        """Dictionary values of the rows sent, in order of first appearance."""
        self.used: dict[str, list[int]] | None = None
        self.last_filled = -1
        self.bbr = np.zeros(2, bool)
        """Whether a state gives BBR away (:func:`~quicsm.traces.qlog.bbr_marks`), once :meth:`finish` held."""

    def add(self, b: QlogBatcher, raw: tuple[bytearray, ...]) -> None:
        """Rows taken from the scanner: the groups they complete are handed over (``b.ready``)."""
        self.taken += len(raw[1])
        if not self.failed:
            self._merge(self._rows(b, raw))
        while not self.failed and self.pending is not None and len(self.pending["t_us"]) >= parquet.ROWS_PER_GROUP:
            self._send(b, parquet.ROWS_PER_GROUP)

    def finish(self, b: QlogBatcher, tid: str, initial: int, close: bool) -> bool:
        """The trace's end: its last groups handed over, if every assumption held (else False: nothing more
        sent)."""
        sc = b.sc
        self.add(b, sc.take())
        if self.failed or tid != self.id or initial != self.initial or (initial >= 0 and sc.tmin != self.tmin):
            return False
        rows = self.pending
        assert rows is not None
        if close:
            end = dict(
                t_us=_rounded(np.array([sc.tmax * self.scale])),
                kind=np.full(1, _PLACEHOLDER, np.int8),
                state=np.full(1, -1, np.int32),
                prev=np.full(1, -1, np.int32),
                trigger=np.full(1, -1, np.int32),
                recovery=np.full(1, -1, np.int32),
                metrics=np.full((1, 7), NULL, np.int64),
                filled=np.asarray(rows["filled"][-1:] if len(rows["filled"]) else [self.last_filled], np.int32),
            )
            rows = {k: np.concatenate([v, end[k]]) for k, v in rows.items()}
        seen = {k: list(v) for k, v in self.seen.items()}
        _seen_in(seen, rows)
        if seen != self.used:
            return False
        self.pending = rows
        while len(self.pending["t_us"]):
            self._send(b, parquet.ROWS_PER_GROUP)
        marks = np.array([bbr_marks(b.names[i]) for i in seen["state"]], bool).reshape(-1, 2)
        self.bbr = np.asarray(marks.any(axis=0))
        return True

    def _canon_of(self, b: QlogBatcher) -> np.ndarray:
        """:attr:`canon` over every name read so far (a canonical name interned is one more)."""
        while len(self.canon) <= len(b.names):
            self.canon = np.append(self.canon, np.int32(b.intern(canonical_state(b.names[len(self.canon) - 1]))))
        return self.canon

    def _rows(self, b: QlogBatcher, raw: tuple[bytearray, ...]) -> dict[str, np.ndarray]:
        """Raw rows as :meth:`QlogBatcher._emit` makes them, in time order (the first chunk's starting with
        the initial state's row), with each row's state filled; the raw chunk is left as it was."""
        t, kind, state_raw, prev_raw, trig, recov, metrics_raw, rtt_raw = (
            np.frombuffer(c, dt) for c, dt in zip(raw, _TYPES)
        )
        scale = self.scale
        t_us = _rounded(t * scale)
        metrics = metrics_raw.reshape(-1, 7).copy()
        rtt = rtt_raw.reshape(-1, 2)
        for j in range(2):
            v = rtt[:, j]
            have = ~np.isnan(v)
            if have.any():
                x = v * scale
                x[~have] = 0.0
                np.copyto(metrics[:, 5 + j], _rounded(x), where=have)
        canon = self._canon_of(b)
        state = canon[np.maximum(state_raw + 1, 0)]
        prev = canon[np.maximum(prev_raw + 1, 0)]
        trigger = trig.copy()
        recovery = recov.copy()
        kind = kind.copy()
        first = self.pending is None and self.t_sent is None
        if first and self.initial < 0:  # the first transition (in log order) enters from Init
            prev[np.flatnonzero(kind == 0)[:1]] = self.init_id
        order = np.argsort(t_us, kind="stable") if (np.diff(t_us) < 0).any() else None
        rows = {
            "t_us": t_us,
            "kind": kind,
            "state": state,
            "prev": prev,
            "trigger": trigger,
            "recovery": recovery,
            "metrics": metrics,
        }
        if order is not None:
            rows = {k: v[order] for k, v in rows.items()}
        is_tr = rows["kind"] == 0
        if first:
            if self.initial >= 0:
                start = {
                    "t_us": _rounded(np.array([self.tmin * scale])),
                    "kind": np.zeros(1, np.int8),
                    "state": canon[self.initial + 1 : self.initial + 2],
                    "prev": np.full(1, self.init_id, np.int32),
                    "trigger": np.full(1, self.start_id, np.int32),
                    "recovery": np.full(1, -1, np.int32),
                    "metrics": np.full((1, 7), NULL, np.int64),
                }
                rows = {k: np.concatenate([start[k], v]) for k, v in rows.items()}
                is_tr = np.r_[True, is_tr]
                self.first_state = int(start["state"][0])
            else:
                at = np.flatnonzero(is_tr)[:1]
                self.first_state = int(rows["state"][at[0]])
                self.first_t = int(rows["t_us"][at[0]])
        elif self.first_t is not None and (rows["t_us"][is_tr] < self.first_t).any():
            self.failed = True  # a transition before the first: another first state
        filled = rows["state"].copy()
        unset = filled < 0
        unset &= ~is_tr
        filled[unset] = self.first_state
        rows["state"] = np.where(is_tr, rows["state"], np.int32(-1))
        rows["filled"] = filled
        return rows

    def _merge(self, rows: dict[str, np.ndarray]) -> None:
        """``rows`` after the pending ones, in time order (ties in log order)."""
        t = rows["t_us"]
        if self.t_sent is not None and len(t) and int(t.min()) < self.t_sent:
            self.failed = True  # a time before one sent
            return
        old = self.pending
        if old is None:
            self.pending = rows
            return
        joined = {k: np.concatenate([old[k], rows[k]]) for k in rows}
        if len(t) and len(old["t_us"]) and int(t.min()) < int(old["t_us"][-1]):
            order = np.argsort(joined["t_us"], kind="stable")
            joined = {k: v[order] for k, v in joined.items()}
        self.pending = joined

    def _send(self, b: QlogBatcher, n: int) -> None:
        """The first ``n`` pending rows as a row group, handed over; the dictionaries of every group are those
        of the rows read at the first (the whole batch's, if the trace keeps to them)."""
        from quicsm.traces.parquet import GroupAhead, group_table

        rows = self.pending
        assert rows is not None
        if self.used is None:
            used = {k: list(v) for k, v in self.seen.items()}
            _seen_in(used, rows)
            if _PLACEHOLDER not in used["kind"]:
                used["kind"].append(_PLACEHOLDER)  # the close row, last
            self.used = used
        group = {k: v[:n] for k, v in rows.items()}
        self.pending = {k: v[n:] for k, v in rows.items()}
        _seen_in(self.seen, group)
        if any(self.seen[k] != self.used[k][: len(self.seen[k])] for k in _DICTIONARIES):
            self.failed = True  # a value the groups sent do not carry
            return
        m = len(group["t_us"])
        ev = EventColumns(
            line=np.zeros(m, np.int64),
            src=np.zeros(m, np.int32),
            conn=np.zeros(m, np.int32),
            cc=np.full(m, -1, np.int32),
            t_us=group["t_us"],
            prev=group["prev"],
            state=group["state"],
            kind=group["kind"],
            metrics=group["metrics"],
            trigger=group["trigger"],
            recovery=group["recovery"],
            names=b.names,
            first_seen=True,
        )
        tc = TraceColumns(
            ev, np.arange(m), np.array([0, m]), [self.id], [self.key], [""], group["filled"], SharedMeta([], [0])
        )
        table = group_table(tc, self.used)
        self.t_sent = int(group["t_us"].max()) if self.t_sent is None else max(self.t_sent, int(group["t_us"].max()))
        self.last_filled = int(group["filled"][-1])
        b.ready.append(GroupAhead(table, bool((group["kind"] == 0).any())))


_DICTIONARIES = {"state": "filled", "prev": "prev", "recovery": "recovery", "trigger": "trigger", "kind": "kind"}
"""The store's dictionary columns (but the trace's id) and the rows' column each is made of."""


def _seen_in(seen: dict[str, list[int]], rows: dict[str, np.ndarray]) -> None:
    """The values of ``rows`` not in ``seen`` added to it, in order of first appearance."""
    from quicsm.traces.parquet import first_seen

    for field, column in _DICTIONARIES.items():
        have = seen[field]
        known = set(have)
        have.extend(v for v in first_seen(rows[column].astype(np.int64)).tolist() if v not in known)


def _trace_id(path: str, st: TraceState, index: int) -> str:
    return f"{path}:{st.conn}" if index == 0 else f"{path}:{st.conn}#{index + 1}"


def _trace_meta(path: str, st: TraceState, meta: TraceMeta, bbr_state: bool, bbr_probe: bool) -> TraceColumns:
    """A batch of a file's one trace's metadata and no rows (its rows were sent ahead): id, key, cc (BBR
    states give BBR away) and its file's metadata, as :meth:`QlogBatcher._emit` makes them."""
    impl = meta.implementation or guess_impl(st.title)
    cc = meta.cc or guess_cc(bbr_state, bbr_probe, impl, st.cc_hint)
    template = Trace("", "", [], "", impl, meta.version or st.code_version, (path,), dict(meta.labels))
    none = np.zeros(0, np.int64)
    ev = EventColumns(
        line=none,
        src=none.astype(np.int32),
        conn=none.astype(np.int32),
        cc=none.astype(np.int32),
        t_us=none,
        prev=none.astype(np.int32),
        state=none.astype(np.int32),
        kind=none.astype(np.int8),
        metrics=np.zeros((0, 7), np.int64),
        trigger=none.astype(np.int32),
        recovery=none.astype(np.int32),
        names=[],
        first_seen=True,
    )
    return TraceColumns(
        ev,
        none,
        np.zeros(2, np.int64),
        [_trace_id(path, st, 0)],
        [st.conn],
        [cc],
        none.astype(np.int32),
        SharedMeta([template], [0]),
    )


@dataclass(slots=True)
class _Document:
    """What the reader of one JSON document keeps between the walker's calls."""

    qf: QlogFile
    members: dict[str, Any] = None  # type: ignore[assignment]
    trace: dict[str, Any] = None  # type: ignore[assignment]
    events: bool | None = None
    """The trace's events: None not met, True an array (read), False something else."""
    open: bool = False
    started: bool = False
    """Some trace's events were begun (a break then keeps what was read)."""
    traces: bool = False
    skipped: bool = False
    done: bool = False

    def __post_init__(self) -> None:
        self.members, self.trace = {}, {}


def _time_order(t_us: np.ndarray, cls: np.ndarray, tr_of: np.ndarray) -> np.ndarray:
    """The rows in trace order, each trace's initial placeholder first and close last, its events by time
    (ties in row order): ``np.lexsort((t_us, cls, tr_of))``. A trace's events are rows next to each other,
    so where their times never go back (a stack logs in time order) a stable sort by trace and class alone
    gives the same order, and on rows nearly in that order already it is a few times faster."""
    events = cls == 1
    back = (t_us[1:] < t_us[:-1]) & events[1:] & events[:-1] & (tr_of[1:] == tr_of[:-1])
    if back.any():
        return np.lexsort((t_us, cls, tr_of))
    key_type = np.int32 if len(tr_of) < 1 << 29 else np.int64  # (tr_of * 3 + 2 fits: the same keys, half the bytes)
    key = np.multiply(tr_of, 3, dtype=key_type)
    np.add(key, cls, out=key)
    return np.argsort(key, kind="stable")


def _plus_one(ids: np.ndarray) -> np.ndarray:
    """``ids + 1``, in place when ``ids`` is the batch's own column (the C scanner's, writable): one array of
    the batch's length less to allocate and fault in."""
    if ids.flags.writeable:
        return np.add(ids, 1, out=ids)
    return ids + 1


def _present(size: int, *positions: np.ndarray) -> np.ndarray:
    """Which of ``range(size)`` occur among the ``positions`` (each in range): ``np.bincount(...) > 0``
    without a count or a joined copy. A column of states holds long runs of one value (the state then, on
    every metrics row): then only each run's first value is looked up, not every row's (a 1 GB qlog's batch:
    25 ms a column, 4 ms so)."""
    seen = np.zeros(size, bool)
    for at in positions:
        if len(at):
            seen[at[0]] = True
            runs = at[1:] != at[:-1]
            seen[at[1:][runs] if np.count_nonzero(runs) < len(at) // 8 else at] = True
    return seen


def _rounded(x: np.ndarray) -> np.ndarray:
    """``np.rint(x).astype(np.int64)``, rounded and cast in place: ``x`` (a float64 temporary of the caller's)
    becomes the int64 result. A fresh array per column of a 1 GB qlog's batch (13 MB each) cost more in page
    faults than the rounding."""
    out = x.view(np.int64)
    np.rint(x, out=out, casting="unsafe")
    return out


def _num(v: np.ndarray, scale: float) -> np.ndarray:
    """``metric_states._num`` on a column: the value times ``scale``, rounded; none (NULL) where it is not a
    finite number in [0, 2^62)."""
    x = v * scale
    good = np.isfinite(x) & (x >= 0) & (x < 2.0**62)
    return np.where(good, np.rint(np.where(good, x, 0)).astype(np.int64), NULL)


def _scaled(raw: np.ndarray, done: np.ndarray, scale: float) -> np.ndarray:
    """An RTT column: as the scanner left it written (scaled here), or as the handler scaled it."""
    return np.where(np.isnan(raw), done, np.rint(np.nan_to_num(raw) * scale).astype(np.int64))


_STATES = {"logged": 0, "auto": 1, "metrics": 2}
"""The scanner's code of each :attr:`~quicsm.traces.events.TraceMeta.states`."""


def _cut_short(error: BaseException) -> str:
    return f"{truncated(error)}; kept what was read before it"


def _sep(kind: str) -> int:
    return 0x1E if kind == "sqlog" else 0x0A
