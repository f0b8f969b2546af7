"""The qlog object reader of main at 24e5632 (quicsm/traces/qlog.py then), kept as the oracle the
column reader (quicsm/traces/qlog_columns.py) is held to: the same traces and the same report on every
qlog we have and on mutated ones (tests/traces/test_qlog_oracle.py, tests/fuzz). Not imported by quicsm.

Three deliberate changes, marked ``# deliberate``: a gzip stream cut short is worded by
``errors.truncated`` as everywhere; times given as deltas are summed only while the sum
stays within the range of a time (|t| <= 1e15), as the column reader's int64 microseconds need; and an
event's line is looked up in its own trace's events array (it was the array of the trace's index
among all entries, error entries included: line 1 for the events of a trace after one).
:func:`comparable` says which inputs the two readers are held equal on: not a JSON document that
json.loads refuses (the oracle salvaged those with regexes; the column reader keeps what it read
before the break) or that has a member where a streaming reader cannot honour it (duplicate keys, a
document member after ``traces``, a trace's time unit, format or event fields after its events, a
byte-order mark, nesting the oracle could not read).

Its original docstring follows.

qlog input: one JSON document (``traces[]``, drafts 00 to 0.4), JSON-SEQ (RFC 7464 records) and
NDJSON (one object per line: quic-go up to v0.4x). :mod:`quicsm.traces.sniff` picks the reader.

The congestion-state event has had three names (``CC_STATE_UPDATE`` in early Chromium/mvfst qlogs,
``recovery:congestion_state_updated`` in qlog drafts 01-06, ``quic:congestion_state_updated`` after
the recovery category was folded into ``quic``); the metrics event likewise (``METRIC_UPDATE``,
``recovery:metrics_updated``, ``quic:recovery_metrics_updated``); mvfst carries its state inside
``congestion_metric_update``. Each stack's state strings are mapped by :mod:`quicsm.traces.states`.

Two ways of logging the state are read alike:

* ``new`` only, from the start (quic-go, quiche): the first event enters its state from ``Init``,
  as the patched senders' first log line does, so a qlog and a log of one connection give one model.
* changes only, with ``old`` (neqo, picoquic): the state left by the first change is entered from
  ``Init`` at the trace's first event of any kind, and metric samples before that change belong to it.

Nothing here raises on bad input: each unusable record is reported with its file line (JSON-SEQ and
NDJSON: the record's line; one JSON document: the event's line) and reading goes on.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np

from quicsm.errors import truncated
from quicsm.traces.events import Trace, TraceEvent, TraceMeta
from quicsm.traces.metric_states import BBR_STATES, LOSS_STATES, NULL, MetricSeries, infer, profile_for
from quicsm.traces.qlog_values import DECODER, JSON_ERRORS, BadValue, count_value, decode_record, loads, time_value
from quicsm.traces.report import ParseReport
from quicsm.traces.states import INIT, canonical_state, is_known_state, numeric_state, split_state

__all__ = [
    "read_qlog",
    "read_sqlog",
    "read_ndjson",
    "read_records",
    "read_header",
    "event_role",
    "bbr_marks",
    "guess_cc",
    "guess_impl",
    "TraceState",
]

_STATE_NAMES = {"congestion_state_updated", "congestion_state_update", "cc_state_update", "congestion_state"}
_METRIC_NAMES = {"metrics_updated", "recovery_metrics_updated", "metric_update", "metrics_update"}
_MVFST_NAMES = {"congestion_metric_update"}
_LOST_NAMES = {"packet_lost"}
_TIMER_NAMES = {"loss_timer_updated"}
_SPURIOUS_NAMES = {"spurious_loss"}
_RS = b"\x1e"
_TIME = re.compile(rb'"time"\s*:\s*(-?[0-9][0-9.eE+-]{0,30})')
_WANTED = re.compile(rb"congestion|metric|cc_state", re.IGNORECASE)
_SOFT = re.compile(rb"packet_lost|loss_timer|spurious_loss")
"""Records the metric-state reader uses (losses, PTO expiries): decoded when they can be, never
reported when they cannot (the column scanner does not read them: only states and metrics count)."""
_EVENTS_KEY = re.compile(r'"events"\s*:\s*\[')
_GZIP_ERRORS = (gzip.BadGzipFile, zlib.error, EOFError, OSError)
_BLOCK = 1 << 16
_PLAIN_KEYS = frozenset(("time", "name", "data"))
_ROLES: dict[str, str | None] = {}


def event_role(name: str) -> str | None:
    """``state``, ``metrics``, ``mvfst`` (state inside a metrics event) or None, for any generation."""
    role = _ROLES.get(name, "?")
    if role == "?":
        role = _role(name)
        if len(_ROLES) < 4096:  # names a run meets are few; a fuzzed file's many are not kept
            _ROLES[name] = role
    return role


def _role(name: str) -> str | None:
    short = name.rsplit(":", 1)[-1].lower()
    if short in _STATE_NAMES:
        return "state"
    if short in _METRIC_NAMES:
        return "metrics"
    if short in _MVFST_NAMES:
        return "mvfst"
    if short in _LOST_NAMES:
        return "lost"
    if short in _TIMER_NAMES:
        return "timer"
    if short in _SPURIOUS_NAMES:
        return "spurious"
    return None


@dataclass(slots=True)
class TraceState:
    """One qlog trace being read: its time base, stack hints and the events found so far."""

    conn: str
    time_scale: float = 1000.0  # qlog times (and RTTs) are ms unless the file says us
    time_format: str = "relative"
    last_time: float = 0.0
    min_t: int | None = None
    max_t: int | None = None
    events: list[TraceEvent] = field(default_factory=list)
    title: str = ""
    code_version: str | None = None
    initial: str | None = None
    """State before the first change, for changes-only loggers (neqo's and picoquic's ``old``)."""
    cc_hint: str | None = None
    current: str | None = None
    """State after the last transition read (None before the first)."""
    aux: list[tuple[int, Any, Any, Any]] = field(default_factory=list)
    """Per metrics event: (time, latest_rtt, packets_in_flight, pto_count) as written, for the metric-state
    reader when the trace has no state event (:mod:`quicsm.traces.metric_states`)."""
    lost: list[int] = field(default_factory=list)
    timers: list[tuple[int, bool]] = field(default_factory=list)
    spurious: list[int] = field(default_factory=list)
    """Times a loss was found spurious (quic-go v0.5x+ ``recovery:spurious_loss``)."""
    """Loss-detection timer expiries: (time, whether it was the probe timeout)."""

    def t_us(self, raw: Any) -> int:
        t = raw if type(raw) is float and -1e15 <= raw <= 1e15 else time_value(raw)  # the common case first
        if self.time_format == "delta":
            t += self.last_time
            if not abs(t) <= 1e15:  # deliberate
                raise BadValue("time out of range with the deltas before it")
            self.last_time = t
        us = int(round(t * self.time_scale))
        if self.max_t is None or us > self.max_t:
            self.max_t = us
        if self.min_t is None or us < self.min_t:
            self.min_t = us
        return us

    def state(self, raw: Any, report: ParseReport) -> str | None:
        """Canonical name of a state value (string, or picoquic's number); unknown names are listed."""
        if isinstance(raw, bool) or not isinstance(raw, (str, int)) or raw == "":
            return None
        text = str(raw)
        if text.isdigit():
            mapped = numeric_state(text, self.cc_hint)
            if mapped is not None:
                return mapped
        name = canonical_state(text)
        if not is_known_state(name):
            report.unknown_state(name)
        return name


Locate = Callable[[], tuple[int, str]]
"""Where an event is, asked only when there is a problem: (file line, "JSON-SEQ record 12" or the like)."""


_METRIC_KEYS = (
    ("cwnd", ("congestion_window", "cwnd", "current_cwnd"), False, False),
    ("inflight", ("bytes_in_flight", "inflight"), False, False),
    ("ssthresh", ("ssthresh", "slow_start_threshold"), False, True),
    ("pacing_bps", ("pacing_rate",), False, False),
    ("min_rtt_us", ("min_rtt",), True, False),
    ("srtt_us", ("smoothed_rtt",), True, False),
)
"""(field, the keys stacks write it under, in the file's time unit, unbounded), in field order."""


def _metrics(
    st: TraceState, data: dict[str, Any], t: int, state: str, path: str, at: Locate, report: ParseReport
) -> TraceEvent:
    values: dict[str, int | None] = {}
    for out, keys, timed, unbounded in _METRIC_KEYS:
        for key in keys:
            if key in data:
                break
        else:
            continue
        try:
            values[out] = count_value(
                data[key], field=key, scale=st.time_scale if timed else 1.0, unbounded_ok=unbounded
            )
        except BadValue as exc:
            line, where = at()
            report.problem(path, line, f"{where}: {exc}; field dropped", "bad qlog field")
    return TraceEvent(t_us=t, state=state, kind="metrics", **values)  # type: ignore[arg-type]


def _handle(st: TraceState, name: str, data: Any, time: Any, path: str, at: Locate, report: ParseReport) -> None:
    role = event_role(name)
    if role in ("lost", "timer", "spurious"):  # for the metric-state reader; never reported (the scanner skips them)
        try:
            t = st.t_us(time)
        except BadValue:
            return
        if isinstance(data, dict):
            if role == "lost":
                st.lost.append(t)
            elif role == "spurious":
                st.spurious.append(t)
            elif data.get("event_type") == "expired":
                st.timers.append((t, data.get("timer_type") == "pto"))
        return
    if role is None:
        if time is not None:
            try:
                st.t_us(time)
            except BadValue:
                pass
        return
    if not isinstance(data, dict):
        line, where = at()
        report.problem(path, line, f"{where}: {name} event without a data object", "malformed qlog event")
        return
    try:
        t = st.t_us(time)
    except BadValue as exc:
        line, where = at()
        report.problem(path, line, f"{where}: {name} event: {exc}", "malformed qlog event")
        return
    transitions = st.current is not None
    current = st.current or ""
    if role == "metrics":
        report.records += 1
        st.events.append(_metrics(st, data, t, current, path, at, report))
        st.aux.append((t, data.get("latest_rtt"), data.get("packets_in_flight"), data.get("pto_count")))
        return
    if role == "mvfst":
        new = st.state(data.get("state"), report)
        if new is not None and new != current:
            report.records += 1
            st.events.append(TraceEvent(t_us=t, state=new, prev=current or INIT, recovery=_recovery(data)))
            current = st.current = new
        report.records += 1
        st.events.append(_metrics(st, data, t, current, path, at, report)._replace(recovery=_recovery(data)))
        return
    raw_new = data.get("new", data.get("new_state", data.get("state")))
    new = st.state(raw_new, report)
    if new is None:
        line, where = at()
        report.problem(path, line, f"{where}: {name} event without a new state", "malformed qlog event")
        return
    raw_old = data.get("old", data.get("old_state"))
    old = st.state(raw_old, report) if raw_old is not None else None
    if not transitions:
        if old is not None and old != INIT:
            st.initial = old  # changes only: the state left held since the trace began
        else:
            old = INIT
    trigger = data.get("trigger")
    report.records += 1
    st.current = new
    st.events.append(
        TraceEvent(t_us=t, state=new, prev=old, trigger=str(trigger)[:200] if isinstance(trigger, str) else None)
    )


def _recovery(data: dict[str, Any]) -> str | None:
    raw = data.get("recovery_state")
    if not isinstance(raw, str) or not raw:
        return None
    return {"notrecovery": "NotInRecovery", "conservative": "Conservation", "growth": "Growth"}.get(
        raw.lower().replace("_", ""), raw
    )


def _finish(st: TraceState, path: str, meta: TraceMeta, index: int, report: ParseReport) -> Trace | None:
    labels = dict(meta.labels)
    if meta.states == "metrics":  # the logged states set aside: every state read from the metrics
        st.events = [e._replace(state="") for e in st.events if e.kind == "metrics"]
        st.initial = None
    if not any(e.kind == "transition" for e in st.events):
        if not st.events or meta.states == "logged":
            return None
        from quicsm.traces.metric_states import INFERRED_LABEL

        impl = meta.implementation or guess_impl(st.title)
        st.events = infer_events(
            st.events,
            st.aux,
            st.lost,
            st.timers,
            impl,
            st.time_scale,
            st.min_t,
            st.spurious,
            lambda why: report.problem(path, 1, f"states not read: {why}", "states not read"),
        )
        if not st.events:
            return None
        labels.update(INFERRED_LABEL)
    events = sorted(st.events, key=lambda e: e.t_us)
    first_tr = next(e for e in events if e.kind == "transition")
    if st.initial is not None:
        start = st.min_t if st.min_t is not None else first_tr.t_us
        events.insert(0, TraceEvent(t_us=start, state=st.initial, prev=INIT, trigger="qlog_start"))
        first = st.initial
    else:
        first = first_tr.state
    # Metric samples before the first state event belong to the state the connection was in then.
    events = [e if e.state else e._replace(state=first) for e in events]
    if st.max_t is not None and st.max_t > events[-1].t_us:
        events.append(TraceEvent(t_us=st.max_t, state=events[-1].state, kind="close"))
    report.traces += 1
    impl = meta.implementation or guess_impl(st.title)
    return Trace(
        id=f"{path}:{st.conn}" if index == 0 else f"{path}:{st.conn}#{index + 1}",
        cc=meta.cc or _guess_cc_of(events, impl, st.cc_hint),
        events=events,
        key=st.conn,
        implementation=impl,
        version=meta.version or st.code_version,
        sources=(path,),
        labels=labels,
    )


def guess_impl(title: str) -> str | None:
    low = title.lower()
    for name in ("quic-go", "picoquic", "quiche", "neqo", "mvfst", "aioquic", "quinn", "ngtcp2", "tquic"):
        if name in low:
            return name
    return None


_BBR_STATES = ("Startup", "Drain", "ProbeBw", "ProbeRtt")


def bbr_marks(state: str) -> tuple[bool, bool]:
    """Whether a state gives BBR away, and BBRv2 (a PROBE_BW phase), for :func:`guess_cc`."""
    s, phase = split_state(state)
    return s in _BBR_STATES, s == "ProbeBw" and bool(phase)


def guess_cc(bbr: bool, bbr2: bool, impl: str | None, hint: str | None) -> str:
    """qlogs rarely name the controller; BBR states give it away (``bbr``/``bbr2``: some state's
    :func:`bbr_marks`), quic-go, picoquic and aioquic default to Reno."""
    if bbr:
        return "bbr2" if bbr2 else "bbr"
    if hint:
        return hint
    if impl in ("quic-go", "picoquic", "aioquic"):
        return "reno"
    return "unknown"


def _guess_cc_of(events: list[TraceEvent], impl: str | None, hint: str | None) -> str:
    marks = [bbr_marks(state) for state in {e.state for e in events}]
    return guess_cc(any(b for b, _ in marks), any(b2 for _, b2 in marks), impl, hint)


def read_header(rec: dict[str, Any], trace: Any, st: TraceState) -> None:
    """File- and trace-level fields: title, code version, time unit and format, connection id."""
    st.title += f" {rec.get('title', '')} {rec.get('description', '')}"
    confs = [c for c in (rec.get("configuration"), trace.get("configuration") if isinstance(trace, dict) else None)]
    for c in [rec, *confs]:
        if isinstance(c, dict) and isinstance(c.get("code_version"), str):
            st.code_version = c["code_version"][:100]
    if not isinstance(trace, dict):
        return
    for conf in confs:
        if isinstance(conf, dict) and str(conf.get("time_units", "")).lower() in ("us", "microseconds"):
            st.time_scale = 1.0
    common = trace.get("common_fields")
    if isinstance(common, dict):
        st.time_format = str(common.get("time_format", "relative"))
        for k in ("ODCID", "odcid", "group_id", "group_ids"):
            v = common.get(k)
            if isinstance(v, (str, int)) and v != "":
                st.conn = str(v)[:100]
                break
    for k in ("title", "description"):
        if isinstance(trace.get(k), str):
            st.title += " " + trace[k]
    vp = trace.get("vantage_point")
    if isinstance(vp, dict) and isinstance(vp.get("name"), str):
        st.title += " " + vp["name"]


def _lower_keys(d: dict[str, Any]) -> dict[str, Any]:
    """draft-00 files (qvis examples) spell fields ``CATEGORY``, ``EVENT_TYPE``, ``DATA``."""
    return {k.lower() if isinstance(k, str) else k: v for k, v in d.items()}


def _event_parts(ev: Any, fields: list[str] | None) -> tuple[str, Any, Any, bool] | None:
    """(name, data, time, is_delta) of a dict or positional event; None if it is neither."""
    if isinstance(ev, list) and fields is not None:
        rec = dict(zip(fields, ev))
    elif isinstance(ev, dict):
        rec = ev if all(not isinstance(k, str) or k.islower() for k in ev) else _lower_keys(ev)
    else:
        return None
    name = rec.get("name")
    if not isinstance(name, str) or not name:
        kind = rec.get("event", rec.get("event_type", ""))
        name = f"{rec.get('category', '')}:{kind}"
    delta = "delta_time" in rec
    time = rec.get("time", rec.get("relative_time", rec.get("delta_time")))
    return name, rec.get("data"), time, delta


def _read_blocks(stream: BinaryIO, path: str, report: ParseReport, where: Callable[[], int]) -> Iterator[bytes]:
    """The stream's bytes in blocks; a corrupt or cut gzip stream ends it with a reported problem."""
    read = getattr(stream, "read1", stream.read)
    while True:
        try:
            block = read(_BLOCK)
        except _GZIP_ERRORS as exc:
            report.problem(
                path, where(), f"{truncated(exc)}; kept what was read before it", "truncated input"
            )  # deliberate
            return
        if not block:
            return
        report.bytes += len(block)
        yield block


def _walk(text: str, pos: int) -> Iterator[tuple[int, Any]]:
    """(offset, value) of each element of the JSON array whose ``[`` ends just before ``pos``.

    Stops quietly at the array's end or at the first element that does not decode (a cut file).
    """
    ws = re.compile(r"[\s,]*")
    while True:
        pos = ws.match(text, pos).end()  # type: ignore[union-attr]
        if pos >= len(text) or text[pos] == "]":
            return
        try:
            value, end = DECODER.raw_decode(text, pos)
        except JSON_ERRORS:
            return
        yield pos, value
        pos = end


class _Lines:
    """Line numbers of events inside one JSON document, found only when a problem needs one."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.offsets: dict[int, list[int]] = {}

    def line(self, trace: int, event: int) -> int:
        offs = self.offsets.get(trace)
        if offs is None:
            starts = [m.end() for m in _EVENTS_KEY.finditer(self.text)]
            offs = [o for o, _ in _walk(self.text, starts[trace])] if trace < len(starts) else []
            self.offsets[trace] = offs
        off = offs[event] if event < len(offs) else 0
        return self.text.count("\n", 0, off) + 1


def read_qlog(stream: BinaryIO, path: str, meta: TraceMeta, report: ParseReport) -> Iterator[Trace]:
    """Read a whole-file JSON qlog (any draft): one trace per entry of ``traces``.

    A cut or corrupt file keeps the events that decode before the damage (and says so).
    """
    chunks: list[bytes] = []
    chunks.extend(_read_blocks(stream, path, report, lambda: sum(c.count(b"\n") for c in chunks) + 1))
    raw = b"".join(chunks)
    report.lines += raw.count(b"\n")
    text = raw.decode("utf-8", errors="replace")
    lines = _Lines(text)
    try:
        doc = loads(text)
    except RecursionError:
        report.skipped_file(path, "JSON nested too deeply to read")
        return
    except JSON_ERRORS as exc:
        line = getattr(exc, "lineno", 1)
        starts = [m.end() for m in _EVENTS_KEY.finditer(text)]
        if not starts:
            report.skipped_file(path, f"not a JSON qlog (line {line}: {exc})")
            return
        report.problem(path, line, f"JSON qlog cut or broken here ({exc}); kept the events before it", "bad qlog")
        doc = _salvage(text, starts)
    if not isinstance(doc, dict) or not isinstance(doc.get("traces"), list):
        report.skipped_file(path, "JSON without a traces[] array: not a qlog file")
        return
    listed = 0  # deliberate: the lines of trace i's events are those of the i-th events array
    for index, trace in enumerate(doc["traces"]):
        if not isinstance(trace, dict) or not isinstance(trace.get("events"), list):
            report.problem(path, 1, f"traces[{index}] has no events list (an error entry?)", "bad qlog")
            continue
        listed += 1
        st = TraceState(conn=f"trace{index}", cc_hint=meta.cc)
        read_header(doc, trace, st)
        fields = trace.get("event_fields")
        fields = [str(f).lower() for f in fields] if isinstance(fields, list) else None
        for n, ev in enumerate(trace["events"]):
            parts = _event_parts(ev, fields)
            if parts is None:
                where = f"traces[{index}].events[{n}]"
                report.problem(path, lines.line(listed - 1, n), f"{where} is not an event", "malformed qlog event")
                continue
            name, data, time, delta = parts
            if delta:
                st.time_format = "delta"
            _handle(st, name, data, time, path, _doc_locate(lines, index, n, listed - 1), report)
        out = _finish(st, path, meta, index, report)
        if out is not None:
            yield out


def _doc_locate(lines: _Lines, trace: int, event: int, listed: int) -> Locate:
    return lambda: (lines.line(listed, event), f"traces[{trace}].events[{event}]")


def _salvage(text: str, starts: list[int]) -> dict[str, Any]:
    """What a cut document still holds: each trace's header fields as far as they decode, and its events."""
    traces: list[dict[str, Any]] = []
    for start in starts:
        head = text[max(0, start - 4000) : start]
        trace: dict[str, Any] = {"events": [v for _, v in _walk(text, start)]}
        if re.search(r'"time_units"\s*:\s*"us"', head):
            trace["configuration"] = {"time_units": "us"}
        m = re.search(r'"event_fields"\s*:\s*(\[[^\]]*\])', head)
        if m:
            try:
                trace["event_fields"] = json.loads(m.group(1))
            except JSON_ERRORS:
                pass
        m = re.search(r'"(?:ODCID|group_id)"\s*:\s*"([^"]{1,100})"', head)
        if m:
            trace["common_fields"] = {"ODCID": m.group(1)}
        traces.append(trace)
    title = re.search(r'"title"\s*:\s*"([^"]{0,100})"', text[: starts[0]])
    return {"traces": traces, "title": title.group(1) if title else ""}


def read_sqlog(
    stream: BinaryIO, path: str, meta: TraceMeta, report: ParseReport, on_bytes: Callable[[int], None] | None = None
) -> Iterator[Trace]:
    """Stream a JSON-SEQ qlog: a header record, then one record per event (one connection per file)."""
    return read_records(stream, path, meta, report, on_bytes, _RS)


def read_ndjson(
    stream: BinaryIO, path: str, meta: TraceMeta, report: ParseReport, on_bytes: Callable[[int], None] | None = None
) -> Iterator[Trace]:
    """Stream an NDJSON qlog (quic-go up to v0.4x): a header line, then one event object per line."""
    return read_records(stream, path, meta, report, on_bytes, b"\n")


def read_records(
    stream: BinaryIO,
    path: str,
    meta: TraceMeta,
    report: ParseReport,
    on_bytes: Callable[[int], None] | None,
    sep: bytes,
) -> Iterator[Trace]:
    st = TraceState(conn="conn", cc_hint=meta.cc)
    header_seen = False
    tail = b""
    record_no = 0
    line = 1
    per_record = 1 if sep == b"\n" else 0  # an NDJSON record ends its line; a JSON-SEQ one holds its own
    kind = "NDJSON line" if per_record else "JSON-SEQ record"
    blocks = _read_blocks(stream, path, report, lambda: line)
    wanted, time_at, soft = _WANTED.search, _TIME.search, _SOFT.search
    done = False
    while not done:
        block = next(blocks, b"")
        done = not block
        if on_bytes is not None and block:
            on_bytes(len(block))
        parts = (tail + block).split(sep)
        tail = parts.pop() if block else b""
        for part in parts:
            record_no += 1
            here = line
            line += part.count(b"\n") + per_record
            if header_seen and wanted(part) is None:
                if soft(part) is not None and _soft_event(st, part, path, report):
                    continue
                # packet-level events: skip JSON decoding, keep only their time (it extends the last stay)
                m = time_at(part)
                if m is not None:
                    try:
                        st.t_us(float(m.group(1)))
                    except (BadValue, ValueError):
                        pass
                continue
            text = part.strip()
            if not text:
                continue
            try:
                rec = decode_record(text)
            except RecursionError:
                report.problem(path, here, f"{kind} {record_no} nested too deeply", "bad qlog record")
                continue
            except JSON_ERRORS as exc:
                report.problem(path, here, f"{kind} {record_no} is not JSON ({exc})", "bad qlog record")
                continue
            if type(rec) is not dict:
                report.problem(path, here, f"{kind} {record_no} is not a JSON object", "bad qlog record")
                continue
            if not header_seen:
                header_seen = True
                if any(k in rec for k in ("trace", "qlog_version", "qlog_format", "file_schema")):
                    read_header(rec, rec.get("trace") or {}, st)
                    continue
            if rec.keys() <= _PLAIN_KEYS and type(name := rec.get("name")) is str and name:
                _handle(st, name, rec.get("data"), rec.get("time"), path, _rec_locate(here, kind, record_no), report)
                continue
            parts_ = _event_parts(rec, None)
            if parts_ is None:
                continue
            name, data, time, delta = parts_
            if delta:
                st.time_format = "delta"
            _handle(st, name, data, time, path, _rec_locate(here, kind, record_no), report)
    report.lines += line - 1
    out = _finish(st, path, meta, 0, report)
    if out is not None:
        yield out


def _soft_event(st: TraceState, part: bytes, path: str, report: ParseReport) -> bool:
    """A loss or timer record for the metric-state reader, if it decodes as one; False otherwise (the
    record is then treated as any packet-level record: its time only)."""
    try:
        rec = decode_record(part.strip())
    except (*JSON_ERRORS, RecursionError):
        return False
    if type(rec) is not dict:
        return False
    parts = _event_parts(rec, None)
    if parts is None or event_role(parts[0]) not in ("lost", "timer", "spurious") or not isinstance(parts[1], dict):
        return False
    try:
        time_value(parts[2])
    except BadValue:
        return False
    _handle(st, parts[0], parts[1], parts[2], path, _rec_locate(0, "", 0), report)
    return True


def _rec_locate(line: int, kind: str, number: int) -> Locate:
    return lambda: (line, f"{kind} {number}")


def comparable(data: bytes, kind: str) -> bool:
    """Whether the oracle and the column reader are held equal on ``data`` (see the module docstring):
    every JSON-SEQ and NDJSON file, and JSON documents a streaming reader can read as json.loads does."""
    if kind != "qlog":
        return True
    text = data.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        return False
    odd = False

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal odd
        keys = [k for k, _ in items]
        odd = odd or len(set(keys)) != len(keys)
        return dict(items)

    try:
        doc = json.loads(text, object_pairs_hook=pairs, parse_int=lambda s: 0, parse_constant=lambda s: 0.0)
    except (ValueError, RecursionError):
        return False
    if odd or not isinstance(doc, dict):
        return not odd
    traces = doc.get("traces") if isinstance(doc.get("traces"), list) else []
    arrays = [t for t in traces if isinstance(t, dict) and isinstance(t.get("events"), list)]
    if len(_EVENTS_KEY.findall(text)) != len(arrays) * isinstance(doc.get("traces"), list):
        return False  # an "events": [ elsewhere (in a string, an event) moves the oracle's line lookup
    keys = list(doc)
    if "traces" in keys and any(
        k in ("title", "description", "code_version", "configuration") for k in keys[keys.index("traces") :]
    ):
        return False
    for trace in traces:
        if isinstance(trace, dict) and "events" in trace:
            after = list(trace)[list(trace).index("events") + 1 :]
            if any(k in ("configuration", "common_fields", "event_fields") for k in after):
                return False
    return True


def _num(v: object, scale: float) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return NULL
    x = float(v) * scale
    if not np.isfinite(x) or x < 0 or x >= 2**62:
        return NULL
    return int(round(x))


def infer_events(
    events: list[TraceEvent],
    aux: list[tuple[int, object, object, object]],
    lost: list[int],
    timers: list[tuple[int, bool]],
    implementation: str | None,
    time_scale: float,
    start_us: int | None,
    spurious: list[int] | None = None,
    on_refused: Callable[[str], None] | None = None,
) -> list[TraceEvent]:
    """A metrics-only trace's events with inferred transitions added and every metrics event given the
    state it fell in (the object twin of the column path, quicsm.traces.qlog_columns: the same
    :func:`quicsm.traces.metric_states.infer`; moved here from metric_states, reached only from tests). ``on_refused`` hears
    why a series with metrics gave no state (:attr:`Inferred.refused`)."""
    rows = [e for e in events if e.kind == "metrics"]
    if not rows:
        return []
    order = sorted(range(len(rows)), key=lambda i: rows[i].t_us)
    rows = [rows[i] for i in order]
    extra = [aux[i] for i in order] if len(aux) == len(order) else [(r.t_us, None, None, None) for r in rows]

    def col(name: str) -> np.ndarray:
        return np.array([NULL if getattr(r, name) is None else getattr(r, name) for r in rows], np.int64)

    series = MetricSeries(
        t_us=np.array([r.t_us for r in rows], np.int64),
        cwnd=col("cwnd"),
        inflight=col("inflight"),
        ssthresh=col("ssthresh"),
        pacing=col("pacing_bps"),
        srtt_us=col("srtt_us"),
        min_rtt_us=col("min_rtt_us"),
        latest_rtt_us=np.array([_num(a[1], time_scale) for a in extra], np.int64),
        packets=np.array([_num(a[2], 1.0) for a in extra], np.int64),
        pto_count=np.array([_num(a[3], 1.0) for a in extra], np.int64),
        lost_us=np.array(sorted(lost), np.int64),
        pto_us=np.array(sorted(t for t, pto in timers if pto), np.int64),
        timer_us=np.array(sorted(t for t, _ in timers), np.int64),
        spurious_us=np.array(sorted(spurious or ()), np.int64),
        start_us=start_us,
    )
    if not (series.cwnd != NULL).any():
        return []  # nothing to read a state from
    got = infer(series, profile_for(implementation))
    if got.refused and on_refused is not None:
        on_refused(got.refused)
    names = LOSS_STATES if got.family == "loss" else BBR_STATES
    out = [r._replace(state=names[c]) for r, c in zip(rows, got.sample_state.tolist())]
    prev = INIT
    for t, state, why in zip(got.t_us.tolist(), got.states, got.reasons):
        out.append(TraceEvent(t_us=t, state=state, prev=prev, trigger=why))
        prev = state
    return out
