"""qlog input: what each record of a qlog means. One JSON document (``traces[]``, drafts 00 to 0.4),
JSON-SEQ (RFC 7464 records) and NDJSON (one object per line: quic-go up to v0.4x);
:mod:`quicsm.traces.sniff` tells them apart, :mod:`quicsm.traces.qlog_columns` reads them.

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

The scanner (``QlogScanner`` in ``_scan.c``, or its twin in :mod:`quicsm.traces.qlog_scanner`) reads
the records stacks write in the plain shape; every other record goes to :class:`QlogFile`, which
decides it with the same state and the rules below. Nothing here raises on bad input: each unusable
record is reported with its file line (JSON-SEQ and NDJSON: the record's line; one JSON document: the
event's line) and reading goes on.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from quicsm.traces.events import METRIC_FIELDS, TraceMeta
from quicsm.traces.qlog_values import JSON_ERRORS, BadValue, count_value, decode_record, loads, time_value
from quicsm.traces.report import ParseReport
from quicsm.traces.states import INIT, canonical_state, is_known_state, numeric_state, split_state

__all__ = [
    "HEADER_KEYS",
    "QlogFile",
    "Rows",
    "TIME_RE",
    "TraceState",
    "WANTED_RE",
    "bbr_marks",
    "event_role",
    "guess_cc",
    "guess_impl",
    "read_header",
]

_ROLE_OF = {
    **dict.fromkeys(
        ("congestion_state_updated", "congestion_state_update", "cc_state_update", "congestion_state"), "state"
    ),
    **dict.fromkeys(("metrics_updated", "recovery_metrics_updated", "metric_update", "metrics_update"), "metrics"),
    "congestion_metric_update": "mvfst",
    "packet_lost": "lost",
    "loss_timer_updated": "timer",
    "spurious_loss": "spurious",
}
"""An event's role by its name without the category, in lower case (see :func:`event_role`)."""
TIME_RE = re.compile(rb'"time"\s*:\s*(-?[0-9][0-9.eE+-]{0,30})')
"""The time of a record that is not decoded (a packet event): the first match, if ``float()`` takes it."""
WANTED_RE = re.compile(rb"congestion|metric|cc_state", re.IGNORECASE)
"""Records that may matter; the others are not decoded, only their time kept (it extends the last stay)."""
SOFT_RE = re.compile(rb"packet_lost|loss_timer|spurious_loss")
"""Records the metric-state reader uses (losses, PTO expiries): decoded when they can be, never reported
when they cannot (only states and metrics count)."""
AUX_KEYS = ("latest_rtt", "packets_in_flight", "pto_count")
"""What the metric-state reader reads of a metrics event besides the metric columns, kept as written
(the scanner's AUX keys)."""
HEADER_KEYS = ("trace", "qlog_version", "qlog_format", "file_schema")
_PLAIN_KEYS = frozenset(("time", "name", "data"))
_ROLES: dict[str, str | None] = {}
NULL = -(1 << 63)
"""A metric the record did not carry (= :data:`quicsm.traces.columnar.NULL`)."""
_NO_METRICS = (NULL,) * 7
_NO_RTT = (math.nan, math.nan)
_NO_AUX = (math.nan,) * len(AUX_KEYS)
TRANSITION, METRICS = 0, 2
"""Row kinds (indexes into :data:`~quicsm.traces.events.EVENT_KINDS`)."""
LOST, TIMER, PTO, SPURIOUS = 1, 2, 3, 4
"""Codes of the marks (losses and timer expiries) kept for the metric-state reader."""


def event_role(name: str) -> str | None:
    """``state``, ``metrics``, ``mvfst`` (state inside a metrics event), ``lost``, ``timer``, ``spurious`` or
    None, for any generation."""
    role = _ROLES.get(name, "?")
    if role == "?":
        role = _ROLE_OF.get(name.rsplit(":", 1)[-1].lower())
        if len(_ROLES) < 4096:  # names a run meets are few; a fuzzed file's many are not kept
            _ROLES[name] = role
    return role


@dataclass(slots=True)
class TraceState:
    """What a qlog trace's header says: time unit and format, connection id, stack hints."""

    conn: str
    time_scale: float = 1000.0  # qlog times (and RTTs) are ms unless the file says us
    time_format: str = "relative"
    title: str = ""
    code_version: str | None = None
    cc_hint: str | None = None

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


class Rows(Protocol):
    """The scanner's state and rows, as :class:`QlogFile` reads and adds to them (``_scan.QlogScanner``
    or its twin :class:`quicsm.traces.qlog_scanner.QlogScannerPy`)."""

    header: int
    delta: int
    has_t: int
    current: int
    last_time: float
    tmin: float
    tmax: float

    def put(
        self,
        kind: int,
        t: float,
        state: int,
        prev: int,
        trigger: int,
        recovery: int,
        metrics: tuple[int, ...],
        rtt: tuple[float, float],
        aux: tuple[float, ...],
        /,
    ) -> None: ...

    def mark(self, t: float, code: int, /) -> None: ...


Locate = Callable[[], tuple[int, str]]
"""Where an event is, asked only when there is a problem: (file line, "JSON-SEQ record 12" or the like)."""

_METRIC_KEYS = tuple(
    (METRIC_FIELDS.index(out), keys, timed, unbounded)
    for out, keys, timed, unbounded in (
        ("cwnd", ("congestion_window", "cwnd", "current_cwnd"), False, False),
        ("inflight", ("bytes_in_flight", "inflight"), False, False),
        ("ssthresh", ("ssthresh", "slow_start_threshold"), False, True),
        ("pacing_bps", ("pacing_rate",), False, False),
        ("min_rtt_us", ("min_rtt",), True, False),
        ("srtt_us", ("smoothed_rtt",), True, False),
    )
)
"""(column, the keys stacks write it under, in the file's time unit, unbounded), in field order."""


class QlogFile:
    """One qlog being read: the records and events the scanner does not decide, decided here with the
    scanner's own state (the state current, the time base) and added as rows.

    ``intern`` gives a string's id in the batch's table; ``label`` names a record in problems
    (``JSON-SEQ record``, ``NDJSON line``)."""

    def __init__(
        self,
        rows: Rows,
        path: str,
        meta: TraceMeta,
        report: ParseReport,
        intern: Callable[[str | None], int],
        name_of: Callable[[int], str],
    ) -> None:
        self.rows, self.path, self.meta, self.report = rows, path, meta, report
        self.intern, self.name_of = intern, name_of
        self.st = TraceState(conn="conn", cc_hint=meta.cc)
        self.label = "JSON-SEQ record"
        self.fields: list[str] | None = None
        """A document trace's ``event_fields`` (positional events), lower case."""

    # ---- JSON-SEQ and NDJSON records

    def record(self, part: bytes, line: int, record_no: int) -> None:
        """One record (the bytes between two separators), from the file's line ``line``."""
        rows = self.rows
        if rows.header and WANTED_RE.search(part) is None:  # packet-level events: only their time
            if SOFT_RE.search(part) is not None and self.soft(part):
                return
            m = TIME_RE.search(part)
            if m is not None:
                try:
                    raw = float(m.group(1))
                except ValueError:
                    return
                if -1e15 <= raw <= 1e15:
                    self.time(raw)
            return
        text = part.strip()
        if not text:
            return
        kind = self.label
        try:
            rec = decode_record(text)
        except RecursionError:
            self.report.problem(self.path, line, f"{kind} {record_no} nested too deeply", "bad qlog record")
            return
        except JSON_ERRORS as exc:
            self.report.problem(self.path, line, f"{kind} {record_no} is not JSON ({exc})", "bad qlog record")
            return
        if type(rec) is not dict:
            self.report.problem(self.path, line, f"{kind} {record_no} is not a JSON object", "bad qlog record")
            return
        if not rows.header:
            rows.header = 1
            if any(k in rec for k in HEADER_KEYS):
                read_header(rec, rec.get("trace") or {}, self.st)
                rows.delta = self.st.time_format == "delta"
                return

        def at() -> tuple[int, str]:
            return line, f"{kind} {record_no}"

        if rec.keys() <= _PLAIN_KEYS and type(name := rec.get("name")) is str and name:
            self.event(name, rec.get("data"), rec.get("time"), at)
            return
        parts = _event_parts(rec, None)
        if parts is None:
            return
        name, data, time, delta = parts
        if delta:
            self.st.time_format = "delta"
            rows.delta = 1
        self.event(name, data, time, at)

    def soft(self, part: bytes) -> bool:
        """A loss or timer record for the metric-state reader, if it decodes as one; False otherwise (the
        record is then treated as any packet-level record: its time only)."""
        try:
            rec = decode_record(part.strip())
        except JSON_ERRORS:
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
        self.event(parts[0], parts[1], parts[2], _NOWHERE)
        return True

    # ---- events, whatever the serialisation

    def time(self, raw: float) -> float | None:
        """The scanner's ``qs_time``: a usable time (in the file's unit) with the deltas added; None
        when the sum of the deltas leaves the range (|t| <= 1e15)."""
        rows = self.rows
        t = raw
        if rows.delta:
            t += rows.last_time
            if not abs(t) <= 1e15:
                return None
            rows.last_time = t
        if not rows.has_t:
            rows.tmin = rows.tmax = t
            rows.has_t = 1
        elif t < rows.tmin:
            rows.tmin = t
        elif t > rows.tmax:
            rows.tmax = t
        return t

    def event(self, name: str, data: Any, time: Any, at: Locate) -> None:
        """One event: its time kept; a state change or metrics sample added as a row."""
        role = event_role(name)
        if role in ("lost", "timer", "spurious"):  # for the metric-state reader; never reported
            try:
                t = self.time(time if type(time) is float and -1e15 <= time <= 1e15 else time_value(time))
            except BadValue:
                return
            if t is not None and isinstance(data, dict):
                if role == "lost":
                    self.rows.mark(t, LOST)
                elif role == "spurious":
                    self.rows.mark(t, SPURIOUS)
                elif data.get("event_type") == "expired":
                    self.rows.mark(t, PTO if data.get("timer_type") == "pto" else TIMER)
            return
        if role is None:
            if time is not None:
                try:
                    raw = time if type(time) is float and -1e15 <= time <= 1e15 else time_value(time)
                except BadValue:
                    return
                self.time(raw)
            return
        report = self.report
        if not isinstance(data, dict):
            self.malformed(at, f"{name} event without a data object")
            return
        try:
            t = self.time(time if type(time) is float and -1e15 <= time <= 1e15 else time_value(time))
        except BadValue as exc:
            self.malformed(at, f"{name} event: {exc}")
            return
        if t is None:
            self.malformed(at, f"{name} event: time out of range with the deltas before it")
            return
        rows, st, intern = self.rows, self.st, self.intern
        if role == "metrics":
            rows.put(METRICS, t, rows.current, -1, -1, -1, self.metrics(data, at), _NO_RTT, _aux(data))
            return
        if role == "mvfst":
            new = st.state(data.get("state"), report)
            current = canonical_state(self.name_of(rows.current)) if rows.current >= 0 else ""
            recovery = intern(_recovery(data))
            if new is not None and new != current:
                rows.put(
                    TRANSITION, t, intern(new), intern(current or INIT), -1, recovery, _NO_METRICS, _NO_RTT, _NO_AUX
                )
                rows.current = intern(new)
            rows.put(METRICS, t, rows.current, -1, -1, recovery, self.metrics(data, at), _NO_RTT, _aux(data))
            return
        raw_new = data.get("new", data.get("new_state", data.get("state")))
        new = st.state(raw_new, report)
        if new is None:
            self.malformed(at, f"{name} event without a new state")
            return
        raw_old = data.get("old", data.get("old_state"))
        old = st.state(raw_old, report) if raw_old is not None else None
        trigger = data.get("trigger")
        state = intern(new)
        rows.put(
            TRANSITION,
            t,
            state,
            intern(old),
            intern(trigger[:200]) if isinstance(trigger, str) else -1,
            -1,
            _NO_METRICS,
            _NO_RTT,
            _NO_AUX,
        )
        rows.current = state

    def malformed(self, at: Locate, what: str) -> None:
        line, where = at()
        self.report.problem(self.path, line, f"{where}: {what}", "malformed qlog event")

    def metrics(self, data: dict[str, Any], at: Locate) -> tuple[int, ...]:
        """The metric columns of a metrics event (a bad field is reported and dropped)."""
        values = list(_NO_METRICS)
        for col, keys, timed, unbounded in _METRIC_KEYS:
            for key in keys:
                if key in data:
                    break
            else:
                continue
            try:
                v = count_value(
                    data[key], field=key, scale=self.st.time_scale if timed else 1.0, unbounded_ok=unbounded
                )
            except BadValue as exc:
                line, where = at()
                self.report.problem(self.path, line, f"{where}: {exc}; field dropped", "bad qlog field")
                continue
            if v is not None:
                values[col] = v
        return tuple(values)

    # ---- one JSON document: the handler of the scanner's document walker

    def member(self, value: bytes) -> Any:
        """A member value of the document or a trace, as ``json.loads`` of the whole file gave it; None
        if it does not decode (the scanner checked its syntax, not its depth)."""
        try:
            return loads(value.decode("utf-8", "replace"))
        except JSON_ERRORS:
            return None

    def doc_event(self, value: bytes, line: int, trace: int, event: int) -> None:
        """One event of a document (a JSON value in ``traces[trace].events``)."""
        where = f"traces[{trace}].events[{event}]"
        try:
            ev = decode_record(value.decode("utf-8", "replace").encode())
        except RecursionError:
            self.report.problem(self.path, line, f"{where} nested too deeply", "malformed qlog event")
            return
        except JSON_ERRORS as exc:  # pragma: no cover - the scanner checked the syntax
            self.report.problem(self.path, line, f"{where} is not JSON ({exc})", "malformed qlog event")
            return
        parts = _event_parts(ev, self.fields)
        if parts is None:
            self.report.problem(self.path, line, f"{where} is not an event", "malformed qlog event")
            return
        name, data, time, delta = parts
        if delta:
            self.st.time_format = "delta"
            self.rows.delta = 1
        self.event(name, data, time, lambda: (line, where))


def _nowhere() -> tuple[int, str]:  # pragma: no cover - loss and timer records are never reported
    return 0, ""


_NOWHERE: Locate = _nowhere


def _aux(data: dict[str, Any]) -> tuple[float, ...]:
    """The AUX_KEYS values of a metrics event as written (numbers as floats; anything else is none)."""
    out = []
    for key in AUX_KEYS:
        v = data.get(key)
        out.append(float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan)
    return tuple(out)


def _recovery(data: dict[str, Any]) -> str | None:
    raw = data.get("recovery_state")
    if not isinstance(raw, str) or not raw:
        return None
    return {"notrecovery": "NotInRecovery", "conservative": "Conservation", "growth": "Growth"}.get(
        raw.lower().replace("_", ""), raw
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
