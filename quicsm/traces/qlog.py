"""qlog input: JSON (``.qlog``, ``traces[]``) and JSON-SEQ (``.sqlog``, RFC 7464 records).

The congestion-state event has had three names (``CC_STATE_UPDATE`` in early Chromium/mvfst qlogs,
``recovery:congestion_state_updated`` in qlog drafts 01-06, ``quic:congestion_state_updated`` after
the recovery category was folded into ``quic``); the metrics event likewise (``METRIC_UPDATE``,
``recovery:metrics_updated``, ``quic:recovery_metrics_updated``). Each stack's state strings are mapped to
canonical names; unknown ones are kept. JSON-SEQ is streamed, and records that cannot hold one of these
events are skipped before JSON decoding, so packet-level qlogs of hundreds of MB parse quickly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from quicsm.traces.builder import TraceMeta
from quicsm.traces.events import Trace, TraceEvent
from quicsm.traces.report import ParseReport
from quicsm.traces.states import canonical_state, split_state

__all__ = ["read_qlog", "read_sqlog", "event_role"]

_STATE_NAMES = {"congestion_state_updated", "congestion_state_update", "cc_state_update", "congestion_state"}
_METRIC_NAMES = {"metrics_updated", "recovery_metrics_updated", "metric_update", "metrics_update"}
_RS = b"\x1e"
_TIME = re.compile(rb'"time"\s*:\s*(-?[0-9][0-9.eE+-]*)')


def event_role(name: str) -> str | None:
    """``state``, ``metrics`` or None for a qlog event name of any generation."""
    short = name.rsplit(":", 1)[-1].lower()
    if short in _STATE_NAMES:
        return "state"
    if short in _METRIC_NAMES:
        return "metrics"
    return None


@dataclass(slots=True)
class _TraceState:
    """One qlog trace being read: its time base and the events found so far."""

    conn: str
    time_scale: float = 1000.0  # qlog times are ms unless configuration says us
    time_format: str = "relative"
    last_time: float = 0.0
    max_t: int | None = None
    events: list[TraceEvent] = field(default_factory=list)
    title: str = ""
    code_version: str | None = None

    def t_us(self, raw: Any) -> int:
        t = float(raw)
        if self.time_format == "delta":
            t += self.last_time
            self.last_time = t
        us = int(round(t * self.time_scale))
        self.max_t = us if self.max_t is None else max(self.max_t, us)
        return us


def _num(data: dict[str, Any], *keys: str, scale: float = 1.0) -> int | None:
    for k in keys:
        v = data.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return int(round(v * scale))
    return None


def _handle(st: _TraceState, name: str, data: Any, time: Any, path: str, where: int, report: ParseReport) -> None:
    role = event_role(name)
    if role is None:
        if time is not None:
            try:
                st.t_us(time)
            except (TypeError, ValueError):
                pass
        return
    if not isinstance(data, dict):
        report.problem(path, where, f"{name} event without a data object", "malformed qlog event")
        return
    try:
        t = st.t_us(time)
    except (TypeError, ValueError):
        report.problem(path, where, f"{name} event with bad time {time!r}", "malformed qlog event")
        return
    current = st.events[-1].state if st.events else ""
    if role == "state":
        new = data.get("new", data.get("new_state", data.get("state")))
        if not isinstance(new, str) or not new:
            report.problem(path, where, f"{name} event without a new state", "malformed qlog event")
            return
        old = data.get("old", data.get("old_state"))
        trigger = data.get("trigger")
        report.records += 1
        st.events.append(
            TraceEvent(
                t_us=t,
                state=canonical_state(new),
                prev=canonical_state(old) if isinstance(old, str) and old else None,
                trigger=str(trigger) if trigger else None,
            )
        )
        return
    report.records += 1
    st.events.append(
        TraceEvent(
            t_us=t,
            state=current,
            kind="metrics",
            cwnd=_num(data, "congestion_window", "cwnd"),
            inflight=_num(data, "bytes_in_flight", "inflight"),
            ssthresh=_num(data, "ssthresh"),
            pacing_bps=_num(data, "pacing_rate"),
            min_rtt_us=_num(data, "min_rtt", scale=1000.0),
            srtt_us=_num(data, "smoothed_rtt", scale=1000.0),
        )
    )


def _finish(st: _TraceState, path: str, meta: TraceMeta, index: int, report: ParseReport) -> Trace | None:
    if not any(e.kind == "transition" for e in st.events):
        return None
    events = sorted(st.events, key=lambda e: e.t_us)
    # Metrics before the first state change belong to that first state.
    first = next(e.state for e in events if e.kind == "transition")
    events = [e if e.state else e._replace(state=first) for e in events]
    if st.max_t is not None and st.max_t > events[-1].t_us:
        events.append(TraceEvent(t_us=st.max_t, state=events[-1].state, kind="close"))
    report.traces += 1
    impl = meta.implementation or ("quic-go" if "quic-go" in st.title else None)
    return Trace(
        id=f"{path}:{st.conn}" if index == 0 else f"{path}:{st.conn}#{index + 1}",
        cc=meta.cc or _guess_cc(events, impl),
        events=events,
        key=st.conn,
        implementation=impl,
        version=meta.version or st.code_version,
        sources=(path,),
        labels=dict(meta.labels),
    )


def _guess_cc(events: list[TraceEvent], impl: str | None) -> str:
    """qlogs rarely name the controller; BBR states give it away, quic-go always runs Reno."""
    states = {split_state(e.state) for e in events}
    if any(s in ("Startup", "Drain", "ProbeBw", "ProbeRtt") for s, _ in states):
        return "bbr2" if any(s == "ProbeBw" and p for s, p in states) else "bbr"
    if impl == "quic-go":
        return "reno"
    return "unknown"


def _common(trace: dict[str, Any], st: _TraceState) -> None:
    common = trace.get("common_fields") or {}
    conf = trace.get("configuration") or {}
    if isinstance(conf, dict) and conf.get("time_units") == "us":
        st.time_scale = 1.0
    if isinstance(common, dict):
        st.time_format = str(common.get("time_format", "relative"))
        for k in ("ODCID", "odcid", "group_id", "group_ids"):
            if common.get(k):
                st.conn = str(common[k])
                break
    for k in ("title", "description"):
        if isinstance(trace.get(k), str):
            st.title += " " + trace[k]
    vp = trace.get("vantage_point")
    if isinstance(vp, dict) and isinstance(vp.get("name"), str):
        st.title += " " + vp["name"]


def read_qlog(stream: BinaryIO, path: str, meta: TraceMeta, report: ParseReport) -> Iterator[Trace]:
    """Read a whole-file JSON qlog (any draft): one trace per entry of ``traces``."""
    raw = stream.read()
    report.bytes += len(raw)
    report.lines += raw.count(b"\n")
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        line = getattr(exc, "lineno", 1)
        report.problem(path, line, f"not a JSON qlog ({exc})", "bad qlog")
        return
    if not isinstance(doc, dict) or not isinstance(doc.get("traces"), list):
        report.problem(path, 1, "JSON without a traces[] array: not a qlog file", "bad qlog")
        return
    top_title = f"{doc.get('title', '')} {doc.get('description', '')}"
    code_version = doc.get("code_version") if isinstance(doc.get("code_version"), str) else None
    for index, trace in enumerate(doc["traces"]):
        if not isinstance(trace, dict) or "events" not in trace:
            report.problem(path, 1, f"traces[{index}] has no events (an error entry?)", "bad qlog")
            continue
        st = _TraceState(conn=f"trace{index}", title=top_title, code_version=code_version)
        _common(trace, st)
        fields = trace.get("event_fields")
        for n, ev in enumerate(trace.get("events") or []):
            if isinstance(ev, list) and isinstance(fields, list):  # draft-01: positional events
                rec = dict(zip(fields, ev))
                name = f"{rec.get('category', '')}:{rec.get('event', rec.get('name', ''))}"
                time = rec.get("relative_time", rec.get("time", rec.get("delta_time")))
                if "delta_time" in rec:
                    st.time_format = "delta"
                _handle(st, name, rec.get("data"), time, path, n + 1, report)
            elif isinstance(ev, dict):
                name = ev.get("name") or f"{ev.get('category', '')}:{ev.get('event', '')}"
                _handle(st, str(name), ev.get("data"), ev.get("time"), path, n + 1, report)
            else:
                report.problem(path, n + 1, f"traces[{index}].events[{n}] is not an event", "malformed qlog event")
        out = _finish(st, path, meta, index, report)
        if out is not None:
            yield out


def read_sqlog(
    stream: BinaryIO, path: str, meta: TraceMeta, report: ParseReport, on_bytes: Callable[[int], None] | None = None
) -> Iterator[Trace]:
    """Stream a JSON-SEQ qlog: a header record, then one record per event (one connection per file)."""
    st = _TraceState(conn="conn")
    header_seen = False
    tail = b""
    record_no = 0
    line = 1
    while True:
        block = stream.read(1 << 22)
        if on_bytes is not None and block:
            on_bytes(len(block))
        report.bytes += len(block)
        buf = tail + block
        parts = buf.split(_RS)
        tail = parts.pop() if block else b""
        for part in parts:
            record_no += 1
            here = line
            line += part.count(b"\n")
            text = part.strip()
            if not text:
                continue
            if header_seen and b"congestion" not in text and b"etric" not in text and b"CC_STATE" not in text:
                # packet-level events: skip JSON decoding, keep only their time (it extends the last stay)
                m = _TIME.search(text)
                if m is not None:
                    try:
                        st.t_us(m.group(1))
                    except ValueError:
                        pass
                continue
            try:
                rec = json.loads(text)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                report.problem(path, here, f"JSON-SEQ record {record_no} is not JSON ({exc})", "bad qlog record")
                continue
            if not isinstance(rec, dict):
                continue
            if not header_seen:
                header_seen = True
                if "trace" in rec or "qlog_version" in rec or "qlog_format" in rec:
                    trace = rec.get("trace") or {}
                    st.title = f"{rec.get('title', '')} {rec.get('description', '')}"
                    if isinstance(rec.get("code_version"), str):
                        st.code_version = rec["code_version"]
                    if isinstance(trace, dict):
                        _common(trace, st)
                    continue
            _handle(st, str(rec.get("name", "")), rec.get("data"), rec.get("time"), path, here, report)
        if not block:
            break
    report.lines += line - 1
    out = _finish(st, path, meta, 0, report)
    if out is not None:
        yield out
