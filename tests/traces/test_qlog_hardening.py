"""Bad qlog input never raises: cut or corrupt gzip, deep nesting, huge or non-finite numbers, wrong
types. Each problem is reported with the file's real line; what was readable is kept."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from quicsm.cli.main import cli
from quicsm.errors import ParseError
from quicsm.traces import parse_inputs
from quicsm.traces.events import SSTHRESH_INF
from quicsm.traces.store import read_traces

HEADER = {"qlog_format": "NDJSON", "qlog_version": "draft-02", "title": "quic-go qlog", "trace": {}}


def _state(t: float, new: str) -> dict:
    return {"time": t, "name": "recovery:congestion_state_updated", "data": {"new": new}}


def _ndjson(records: list[dict | str]) -> bytes:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in [HEADER, *records]]
    return ("\n".join(lines) + "\n").encode()


def _story(n: int = 200) -> list[dict | str]:
    recs: list[dict | str] = []
    for i in range(n):
        recs.append(_state(10.0 * i, "slow_start" if i % 2 == 0 else "recovery"))
        recs.append({"time": 10.0 * i + 1, "name": "transport:packet_sent", "data": {"x": "y" * 200}})
    return recs


def test_cut_gzip_keeps_what_was_read(tmp_path: Path) -> None:
    whole = gzip.compress(_ndjson(_story()))
    p = tmp_path / "cut.qlog.gz"
    p.write_bytes(whole[: len(whole) * 2 // 3])
    res = parse_inputs([str(p)])
    (t,) = res.traces
    assert 20 < len(list(t.transitions())) < 200
    assert any("truncated or corrupt gzip data" in i.reason for i in res.report.issues)


def test_corrupt_gzip_keeps_what_was_read(tmp_path: Path) -> None:
    whole = bytearray(gzip.compress(_ndjson(_story())))
    mid = len(whole) // 2
    whole[mid : mid + 64] = b"\xff" * 64
    p = tmp_path / "bad.qlog.gz"
    p.write_bytes(bytes(whole))
    res = parse_inputs([str(p)], require_transitions=False)
    assert res.report.total_issues >= 1
    assert all(len(list(t.transitions())) < 200 for t in res.traces)


def test_deep_nesting_is_a_reported_problem(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    doc = tmp_path / "deep.qlog"
    doc.write_text('{"traces": [{"events": [' + deep + "]}]}")
    res = parse_inputs([str(doc)], require_transitions=False)
    assert res.traces == [] and res.report.total_issues >= 1
    rec = tmp_path / "deep_rec.qlog"
    rec.write_bytes(
        _ndjson(
            [
                _state(1, "slow_start"),
                '{"time": 2, "name": "recovery:metrics_updated", "data": ' + deep + "}",
                _state(3, "recovery"),
            ]
        )
    )
    res = parse_inputs([str(rec)])
    assert [i.line for i in res.report.issues] == [3]
    assert res.traces[0].states() == ["SlowStart", "Recovery"]


def test_unbounded_ssthresh_and_huge_numbers(tmp_path: Path) -> None:
    big = "9" * 4301
    recs: list[dict | str] = [
        _state(1, "slow_start"),
        '{"time": 2, "name": "recovery:metrics_updated", "data": {"ssthresh": 18446744073709551615, "congestion_window": 12000}}',
        '{"time": 3, "name": "recovery:metrics_updated", "data": {"ssthresh": Infinity}}',
        '{"time": 4, "name": "recovery:metrics_updated", "data": {"congestion_window": ' + big + "}}",
        '{"time": ' + big + ', "name": "recovery:congestion_state_updated", "data": {"new": "recovery"}}',
        '{"time": NaN, "name": "recovery:congestion_state_updated", "data": {"new": "recovery"}}',
        _state(5, "congestion_avoidance"),
    ]
    p = tmp_path / "n.qlog"
    p.write_bytes(_ndjson(recs))
    res = parse_inputs([str(p)])
    (t,) = res.traces
    m = [e for e in t.events if e.kind == "metrics"]
    assert [e.ssthresh for e in m[:2]] == [SSTHRESH_INF, SSTHRESH_INF] and m[0].cwnd == 12000
    assert m[2].cwnd is None
    assert sorted(i.line for i in res.report.issues) == [5, 6, 7]
    assert t.states() == ["SlowStart", "CongestionAvoidance"]
    out = tmp_path / "x.parquet"
    r = CliRunner().invoke(cli, ["parse", str(p), "-o", str(out)])
    assert r.exit_code == 0, r.output
    (back,) = read_traces(str(out))
    assert [e.ssthresh for e in back.events if e.kind == "metrics"][:2] == [SSTHRESH_INF, SSTHRESH_INF]


def test_wrong_types_are_reported_on_their_lines(tmp_path: Path) -> None:
    doc = {
        "qlog_version": "0.3",
        "traces": [
            {
                "events": [
                    _state(1, "slow_start"),
                    {"time": 2, "name": "recovery:metrics_updated", "data": {"congestion_window": "lots"}},
                    {"time": "soon", "name": "recovery:congestion_state_updated", "data": {"new": "recovery"}},
                    {"time": 3, "name": "recovery:congestion_state_updated", "data": ["recovery"]},
                    {"time": 4, "name": "recovery:congestion_state_updated", "data": {"new": {"x": 1}}},
                    7,
                    _state(5, "recovery"),
                ]
            }
        ],
    }
    p = tmp_path / "types.json"
    p.write_text(json.dumps(doc, indent=1))
    res = parse_inputs([str(p)])
    (t,) = res.traces
    assert t.states() == ["SlowStart", "Recovery"]
    text = p.read_text().splitlines()
    assert len(res.report.issues) == 5
    for issue in res.report.issues:
        assert "traces[0].events[" in issue.reason or "is not an event" in issue.reason
        assert text[issue.line - 1].strip() in ("{", "7,"), issue  # the event's own line
    with pytest.raises(ParseError):
        parse_inputs([str(p)], strict=True)


def test_draft00_upper_case_layout(tmp_path: Path) -> None:
    trace = {
        "event_fields": ["relative_time", "CATEGORY", "EVENT_TYPE", "TRIGGER", "DATA"],
        "events": [
            ["0", "TRANSPORT", "PACKET_SENT", "LINE", {}],
            ["5", "RECOVERY", "CC_STATE_UPDATE", "ACK", {"new": "SLOW_START"}],
            ["90", "RECOVERY", "CC_STATE_UPDATE", "LOSS", {"old": "SLOW_START", "new": "RECOVERY"}],
            ["120", "TRANSPORT", "PACKET_SENT", "LINE", {}],
        ],
    }
    p = tmp_path / "qvis.qlog"
    p.write_text(json.dumps({"qlog_version": "draft-00", "traces": [trace]}))
    (t,) = parse_inputs([str(p)]).traces
    assert t.states() == ["SlowStart", "Recovery"]
    assert t.end_us == 120_000
    doc = {
        "traces": [
            {
                "events": [
                    {
                        "TIME": 1,
                        "CATEGORY": "recovery",
                        "EVENT_TYPE": "congestion_state_updated",
                        "DATA": {"new": "slow_start"},
                    }
                ]
            }
        ]
    }
    p.write_text(json.dumps(doc))
    (t,) = parse_inputs([str(p)]).traces
    assert t.states() == ["SlowStart"] and t.start_us == 1000


def test_mvfst_state_inside_congestion_metric_update(tmp_path: Path) -> None:
    def ev(t: int, state: str, rec: str = "") -> dict:
        data = {
            "bytes_in_flight": 1000,
            "current_cwnd": 20000,
            "congestion_event": "ack",
            "state": state,
            "recovery_state": rec,
        }
        return {"time": t, "name": "metric_update:congestion_metric_update", "data": data}

    evs = [ev(0, "Startup"), ev(10, "Startup"), ev(40, "Drain"), ev(50, "ProbeBw", "Conservative"), ev(90, "ProbeRtt")]
    p = tmp_path / "mvfst.qlog"
    p.write_text(json.dumps({"qlog_version": "draft-00", "title": "mvfst", "traces": [{"events": evs}]}))
    (t,) = parse_inputs([str(p)]).traces
    assert t.states() == ["Startup", "Drain", "ProbeBw", "ProbeRtt"]
    assert t.cc == "bbr" and t.implementation == "mvfst"
    assert any(e.recovery == "Conservation" for e in t.events)
    assert [e.cwnd for e in t.events if e.kind == "metrics"] == [20000] * 5


def test_unknown_states_listed_and_skipped_files_counted(tmp_path: Path) -> None:
    (tmp_path / "a.qlog").write_bytes(_ndjson([_state(1, "slow_start"), _state(2, "warp_speed")]))
    (tmp_path / "b.qlog").write_text('{"not": "a qlog"}')
    res = parse_inputs([str(tmp_path)])
    assert res.report.unknown_states == {"warp_speed": 1}
    assert res.report.skipped_files == [str(tmp_path / "b.qlog")]
    summary = res.report.summary()
    assert "warp_speed" in summary and f"{tmp_path / 'b.qlog'}:1: file skipped: " in summary
    assert summary.count("b.qlog") == 1  # said once, with its reason
    r = CliRunner().invoke(cli, ["parse", "--strict", str(tmp_path), "-o", str(tmp_path / "o.jsonl")])
    assert r.exit_code != 0 and "b.qlog" in r.output
