"""The test oracle of the trace cutter: contract records grouped into traces one object at a time.

quicsm cuts traces from columns (:mod:`quicsm.traces.columnar`); this is the slow, obvious form of the
same rules, kept only to hold the cutter to them (tests/traces/test_columnar.py, the fuzz targets).

Keys are scoped to one input file (two servers may reuse the same object address). A key that starts
again (``from=Init``) closes the previous connection under it; ``ev=close`` closes one at once. Closed
connections leave memory immediately, so memory follows the number of connections open at a time.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from quicsm.traces import columnar, logscan, native
from quicsm.traces.contract import TAG_BYTES, ContractError, ContractRecord, contract_event, parse_payload
from quicsm.traces.events import StateView, Trace, TraceEvent, TraceMeta, Visit
from quicsm.traces.report import ParseReport
from quicsm.traces.states import INIT

__all__ = [
    "TraceBuilder",
    "column_batches",
    "find_tagged",
    "find_tagged_c",
    "object_traces",
    "oracle_visits",
    "scan_contract",
]

_c = native.load("quicsm.traces._scan", native.SCAN_ABI)


def find_tagged_c(buf: bytes | bytearray, start: int, cut: int, lineno: int) -> tuple[list[tuple[Any, ...]], int]:
    """The C tag finder: lines in the canonical field order come back already split into fields."""
    assert _c is not None
    return _c.scan(buf, start, cut, TAG_BYTES, lineno, True)


find_tagged = find_tagged_c if _c is not None else logscan.find_tagged_py
"""The finder :func:`scan_contract` uses (the fuzz targets switch it)."""


def column_batches(
    stream: BinaryIO,
    path: str,
    scope: str,
    meta: TraceMeta,
    report: ParseReport,
    *,
    chunk: int | None = None,
    batch_rows: int = columnar.BATCH_ROWS,
) -> Iterator[columnar.TraceColumns]:
    """One text log's traces by the column reader (what read_inputs does for a log), in batches."""
    reader = columnar.ColumnReader(report, chunk=chunk, batch_rows=batch_rows)
    yield from reader.read(stream, path, scope, meta)
    yield from reader.flush()


def scan_contract(
    stream: BinaryIO,
    path: str,
    report: ParseReport,
    on_bytes: Callable[[int], None] | None = None,
    *,
    chunk: int | None = None,
) -> Iterator[tuple[int, ContractRecord]]:
    """Yield ``(line_number, record)`` for every contract line of a text log, one record object at a time;
    count and report malformed ones (the object path the column reader is held to).

    ``on_bytes`` is called after each window with its size (progress bars; tests truncate files there).
    """
    st = logscan.ScanState()
    for buf, start, cut in logscan.scan_windows(stream, path, report, on_bytes, st, chunk=chunk):
        hits_here, st.lineno = find_tagged(buf, start, cut, st.lineno)
        st.hits += len(hits_here)
        for item in hits_here:
            if len(item) == 14:  # parsed by the C reader (canonical field order)
                line, conn, cc, t_us, prev, state, cwnd, inflight, ssthresh, pacing, bw, min_rtt, srtt, trigger = item
                event = contract_event(
                    t_us=t_us,
                    state=state,
                    prev=prev,
                    cwnd=cwnd,
                    inflight=inflight,
                    ssthresh=ssthresh,
                    pacing_bps=pacing,
                    bw_bps=bw,
                    min_rtt_us=min_rtt,
                    srtt_us=srtt,
                    trigger=trigger,
                )
                yield line, ContractRecord(conn, cc, event)
                report.records += 1
                continue
            line, raw = item
            try:
                rec = parse_payload(raw.decode("utf-8"))
            except UnicodeDecodeError:
                report.problem(path, line, "contract line is not UTF-8 text (binary garbage?)", "not UTF-8")
                continue
            except ContractError as exc:
                report.problem(path, line, f"malformed contract line: {exc}", "malformed contract line")
                continue
            report.records += 1
            yield line, rec


def object_traces(data: bytes, path: str, scope: str, meta: TraceMeta, report: ParseReport) -> list[Trace]:
    """One log's traces by the oracle: the record scanner, then :class:`TraceBuilder`."""
    builder = TraceBuilder(path, scope, meta, report)
    out: list[Trace] = []
    for line, rec in scan_contract(io.BytesIO(data), path, report):
        out += builder.feed(line, rec)
    out += builder.finish()
    return out


@dataclass(slots=True)
class _Open:
    id: str
    key: str
    cc: str
    events: list[TraceEvent]
    last_t: int
    unordered: bool = False


def starts_connection(ev: TraceEvent) -> bool:
    """``from=Init`` / ``to=Init``: the emitter just created a sender (a reused key starts anew)."""
    return ev.kind == "transition" and INIT in (ev.prev, ev.state)


class TraceBuilder:
    """Feed it one file's records in log order; it yields finished traces."""

    def __init__(self, path: str, scope: str, meta: TraceMeta, report: ParseReport) -> None:
        self.path = path
        self.scope = scope
        self.meta = meta
        self.report = report
        self._open: dict[str, _Open] = {}
        self._seen: dict[str, int] = {}

    def feed(self, lineno: int, rec: ContractRecord) -> list[Trace]:
        """Add one record; return the traces it completed (usually none)."""
        done: list[Trace] = []
        ev = rec.event
        cur = self._open.get(rec.conn)
        if cur is not None and cur.events and starts_connection(ev):
            done.append(self._finish(rec.conn))
            cur = None
        if cur is None:
            n = self._seen.get(rec.conn, 0) + 1
            self._seen[rec.conn] = n
            tid = f"{self.scope}:{rec.conn}" + (f"#{n}" if n > 1 else "")
            cur = self._open[rec.conn] = _Open(tid, rec.conn, rec.cc, [], ev.t_us)
        elif ev.t_us < cur.last_t:  # rare: report, sort at the end
            self.report.problem(
                self.path,
                lineno,
                f"timestamp goes backwards for conn={rec.conn} (t_us={ev.t_us} after {cur.last_t}); events re-sorted",
                "timestamp goes backwards",
            )
            cur.unordered = True
        if ev.kind in ("update", "metrics", "close") and not ev.state:
            last = cur.events[-1].state if cur.events else (ev.prev or "")
            ev = ev._replace(state=last)
        cur.events.append(ev)
        if ev.t_us > cur.last_t:
            cur.last_t = ev.t_us
        if ev.kind == "close":
            done.append(self._finish(rec.conn))
        return done

    def finish(self) -> Iterator[Trace]:
        for key in list(self._open):
            yield self._finish(key)

    def _finish(self, key: str) -> Trace:
        cur = self._open.pop(key)
        if cur.unordered:
            cur.events.sort(key=lambda e: e.t_us)
        self.report.traces += 1
        m = self.meta
        return Trace(
            id=cur.id,
            cc=m.cc or cur.cc,
            events=cur.events,
            key=cur.key,
            implementation=m.implementation,
            version=m.version,
            sources=(self.path,),
            labels=dict(m.labels),
        )


def oracle_visits(trace: Trace, view: StateView = StateView()) -> list[Visit]:
    """The stays rule one event at a time (quicsm.traces.visits has it once, on arrays): what
    ``Trace.visits`` and ``columnar.stay_arrays`` are held to."""
    out: list[Visit] = []
    cur: str | None = None
    since = 0
    for ev in trace.events:
        if ev.kind not in ("transition", "update"):
            continue
        if cur is None and ev.kind == "transition" and ev.prev and INIT not in (ev.prev, ev.state):
            first = view.label(TraceEvent(ev.t_us, ev.prev, recovery=ev.recovery))
            cur, since = first, ev.t_us
        label = view.label(ev)
        if label == cur:
            continue
        if cur is not None:
            out.append(Visit(cur, since, ev.t_us))
        cur, since = label, ev.t_us
    if cur is not None:
        out.append(Visit(cur, since, max(trace.end_us, since)))
    return out
