"""Experiment figures: per-connection state shares and entries (quicsm.compare.occupancy), the threshold rewrite.

Welch's test is quicsm.compare.stats.welch, tested in tests/compare."""

from __future__ import annotations

import pytest

from quicsm.compare.occupancy import occupancy_table, state_entries, state_share
from quicsm.compare.stays import connections
from quicsm.errors import TestbedError
from quicsm.testbed.threshold import set_constant
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
    table = occupancy_table(connections([t]))  # the per-connection helper agrees with the set table quicsm compare uses
    assert table.time_us[0, table.states.index("Recovery")] == 300
    assert table.column("ApplicationLimited")[0] == pytest.approx(state_share(t, "ApplicationLimited"))


SRC = """const (
	// Maximum reordering in time space before time based loss detection considers a packet lost.
	timeThreshold = 9.0 / 8
	// Maximum reordering in packets before packet threshold loss detection considers a packet lost.
	packetThreshold = 3
)
"""


def test_threshold_rewrite() -> None:
    out = set_constant(SRC, "packetThreshold", 30, where="x.go")
    assert "packetThreshold = 30\n" in out and "timeThreshold = 9.0 / 8" in out
    assert out.count("\n") == SRC.count("\n")
    with pytest.raises(TestbedError, match="x.go: expected one `packetThreshold = N` declaration, found 0"):
        set_constant("package x\n", "packetThreshold", 30, where="x.go")
    with pytest.raises(TestbedError, match="found 2"):
        set_constant(SRC + "\tpacketThreshold = 4\n", "packetThreshold", 30, where="x.go")
