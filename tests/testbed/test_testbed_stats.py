"""Experiment figures: state shares and entries from traces, Welch's test, the threshold rewrite."""

from __future__ import annotations

import math

import pytest

from quicsm.errors import TestbedError
from quicsm.testbed.stats import group_by_label, mean_sd, state_entries, state_share, welch
from quicsm.testbed.threshold import raise_threshold_source
from quicsm.traces import parse_inputs
from quicsm.traces.contract import format_line


def _trace(write_log, name: str, steps: list[tuple[int, str, str]], labels: dict[str, str] | None = None):
    lines = [format_line(conn="0x1", t_us=t, cc="reno", frm=a, to=b) for t, a, b in steps]
    lines.append(format_line(conn="0x1", t_us=steps[-1][0] + 100, cc="reno", ev="close"))
    return parse_inputs([str(write_log(name, lines))], labels=labels).traces[0]


def test_shares_and_entries(write_log) -> None:
    t = _trace(
        write_log,
        "a.log",
        [
            (0, "Init", "SlowStart"),
            (100, "SlowStart", "ApplicationLimited"),
            (400, "ApplicationLimited", "SlowStart"),
            (500, "SlowStart", "Recovery"),
            (600, "Recovery", "CongestionAvoidance"),
            (700, "CongestionAvoidance", "Recovery"),
            (900, "Recovery", "CongestionAvoidance"),
        ],
    )
    total = sum(v.end_us - v.start_us for v in t.visits())
    assert state_share(t, "ApplicationLimited") == pytest.approx(300 / total)
    assert state_share(t, "Recovery") == pytest.approx(300 / total)
    assert state_entries(t, "Recovery") == 2 and state_entries(t, "SlowStart") == 2
    assert state_share(t, "RetransmissionTimeout") == 0.0


def test_group_by_label(write_log) -> None:
    a = _trace(
        write_log, "a.log", [(0, "Init", "SlowStart"), (10, "SlowStart", "CongestionAvoidance")], {"profile": "mobile"}
    )
    b = _trace(
        write_log, "b.log", [(0, "Init", "SlowStart"), (10, "SlowStart", "CongestionAvoidance")], {"profile": "desktop"}
    )
    groups = group_by_label([a, b], "profile")
    assert set(groups) == {"mobile", "desktop"} and groups["mobile"] == [a]


def test_welch() -> None:
    low = [0.08, 0.1, 0.12, 0.09, 0.11, 0.1]
    high = [0.5, 0.6, 0.55, 0.62, 0.48, 0.58]
    w = welch(high, low)
    assert w.significant() and w.t > 0 and w.p < 1e-5
    same = welch(low, list(reversed(low)))
    assert not same.significant() and same.p > 0.9
    assert math.isnan(welch([1.0], low).p)
    assert welch([1.0, 1.0], [1.0, 1.0]).p == 1.0
    m, sd = mean_sd([1.0, 2.0, 3.0])
    assert m == 2.0 and sd == pytest.approx(1.0)


SRC = """const (
	// Maximum reordering in time space before time based loss detection considers a packet lost.
	timeThreshold = 9.0 / 8
	// Maximum reordering in packets before packet threshold loss detection considers a packet lost.
	packetThreshold = 3
)
"""


def test_threshold_rewrite() -> None:
    out = raise_threshold_source(SRC, 30)
    assert "packetThreshold = 30\n" in out and "timeThreshold = 9.0 / 8" in out
    assert out.count("\n") == SRC.count("\n")
    with pytest.raises(TestbedError, match="found 0"):
        raise_threshold_source("package x\n", 30, where="x.go")
    with pytest.raises(TestbedError, match="found 2"):
        raise_threshold_source(SRC + "\tpacketThreshold = 4\n", 30)
    with pytest.raises(TestbedError, match="at least 1"):
        raise_threshold_source(SRC, 0)
