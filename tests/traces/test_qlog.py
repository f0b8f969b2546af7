"""qlog reading, over the three generations of event names and both serialisations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quicsm.traces import parse_inputs
from quicsm.traces.qlog import event_role

STATES = ["slow_start", "congestion_avoidance", "application_limited", "recovery", "congestion_avoidance"]
CANON = ["SlowStart", "CongestionAvoidance", "ApplicationLimited", "Recovery", "CongestionAvoidance"]


def _events(state_name: str, metric_name: str) -> list[dict]:
    evs: list[dict] = [{"time": 0.5, "name": "transport:packet_sent", "data": {"header": {"packet_number": 0}}}]
    old = None
    for i, s in enumerate(STATES):
        data = {"new": s} if old is None else {"old": old, "new": s}
        evs.append({"time": 10.0 * (i + 1), "name": state_name, "data": data})
        evs.append(
            {
                "time": 10.0 * (i + 1) + 1,
                "name": metric_name,
                "data": {"congestion_window": 1000 * (i + 1), "bytes_in_flight": 500, "smoothed_rtt": 36.5},
            }
        )
        old = s
    evs.append({"time": 75.25, "name": "transport:packet_received", "data": {}})
    return evs


@pytest.mark.parametrize(
    "state_name, metric_name",
    [
        ("recovery:congestion_state_updated", "recovery:metrics_updated"),
        ("quic:congestion_state_updated", "quic:recovery_metrics_updated"),
        ("CC_STATE_UPDATE", "METRIC_UPDATE"),
    ],
)
def test_json_qlog_all_generations(tmp_path: Path, state_name: str, metric_name: str) -> None:
    doc = {
        "qlog_version": "0.3",
        "title": "quic-go qlog",
        "traces": [
            {
                "common_fields": {"ODCID": "abcd"},
                "vantage_point": {"type": "server"},
                "events": _events(state_name, metric_name),
            }
        ],
    }
    p = tmp_path / "c.qlog"
    p.write_text(json.dumps(doc))
    res = parse_inputs([str(p)])
    (t,) = res.traces
    assert t.key == "abcd" and t.implementation == "quic-go" and t.cc == "reno"
    assert [e.state for e in t.transitions()] == CANON
    metrics = [e for e in t.events if e.kind == "metrics"]
    assert [m.cwnd for m in metrics] == [1000 * (i + 1) for i in range(len(STATES))]
    assert metrics[0].srtt_us == 36500
    assert t.end_us == 75250  # last event of any kind ends the last stay
    assert t.visits()[-1].end_us == 75250


def test_sqlog_json_seq_streamed(tmp_path: Path) -> None:
    header = {
        "qlog_version": "0.3",
        "qlog_format": "JSON-SEQ",
        "title": "quic-go qlog",
        "trace": {"common_fields": {"ODCID": "ff00", "time_format": "relative"}, "vantage_point": {"type": "server"}},
    }
    recs = [header, *_events("recovery:congestion_state_updated", "recovery:metrics_updated")]
    p = tmp_path / "s.sqlog"
    p.write_bytes(b"".join(b"\x1e" + json.dumps(r).encode() + b"\n" for r in recs))
    (t,) = parse_inputs([str(p)]).traces
    assert [e.state for e in t.transitions()] == CANON
    assert t.end_us == 75250


def test_draft01_positional_events_and_bbr_names(tmp_path: Path) -> None:
    trace = {
        "configuration": {"time_units": "us"},
        "event_fields": ["relative_time", "category", "event", "data"],
        "events": [
            ["0", "recovery", "congestion_state_updated", {"new": "bbr_startup"}],
            ["1500", "recovery", "congestion_state_updated", {"old": "bbr_startup", "new": "bbr_drain"}],
            ["2500", "recovery", "congestion_state_updated", {"old": "bbr_drain", "new": "bbr_probe_bw_down"}],
            ["4000", "recovery", "congestion_state_updated", {"old": "bbr_probe_bw_down", "new": "some_future_state"}],
        ],
    }
    p = tmp_path / "old.qlog"
    p.write_text(json.dumps({"qlog_version": "draft-01", "traces": [trace]}))
    (t,) = parse_inputs([str(p)]).traces
    # the first state is entered from Init (the start marker, no stay), as in a patched sender's log;
    # unknown names are kept
    assert t.events[0].prev == "Init"
    assert t.states() == ["Startup", "Drain", "ProbeBw.Down", "some_future_state"]
    assert t.cc == "bbr2"
    assert [e.t_us for e in t.transitions()] == [0, 1500, 2500, 4000]


def test_event_roles() -> None:
    assert event_role("quic:congestion_state_updated") == "state"
    assert event_role("recovery:metrics_updated") == "metrics"
    assert event_role("transport:packet_sent") is None


def test_bad_qlog_reported(tmp_path: Path) -> None:
    p = tmp_path / "bad.qlog"
    p.write_text('{"traces": [ {"events": [')
    with pytest.raises(Exception, match="no state transitions"):
        parse_inputs([str(p)])
    res = parse_inputs([str(p)], require_transitions=False)
    assert res.report.issue_counts["bad qlog"] == 1
    assert res.report.issues[0].path == str(p)


DATA = Path(__file__).resolve().parent.parent / "data" / "quic-go-v0.65"


def test_real_quic_go_qlog_tells_the_same_story_as_the_patch() -> None:
    """quic-go's own qlog and our patch set's log lines, for one real connection, agree state by state."""
    (q,) = parse_inputs([str(DATA / "server.sqlog.gz")]).traces
    (p,) = parse_inputs([str(DATA / "server.log.gz")]).traces
    assert (q.implementation, q.version, q.cc) == ("quic-go", "v0.65.0", "reno")
    assert p.cc == "reno"
    from_patch = p.states()
    assert q.states() == from_patch and from_patch[0] == "SlowStart"  # both start from Init, the marker
    assert q.events[0].prev == p.events[0].prev == "Init"
    assert {"SlowStart", "ApplicationLimited"} <= set(from_patch)
    metrics = [e for e in q.events if e.kind == "metrics"]
    assert metrics and all(m.cwnd and m.cwnd > 0 for m in metrics if m.cwnd is not None)
