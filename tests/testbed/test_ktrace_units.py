"""The kernel tracer's translation of bpftrace records into contract lines (no root needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from quicsm.errors import TestbedError
from quicsm.testbed import ktrace
from quicsm.testbed.ktrace import Translator, bpftrace_script
from quicsm.traces import parse_inputs

INF = 0x7FFFFFFF
KEY = "4433 198.18.3.2 40000"


def probe(
    t_ms: float,
    cwnd: int,
    ssth: int = INF,
    *,
    cc: str = "cubic",
    app: int = 0,
    ca: int = 0,
    mode: int = 0,
    gain: int = 0,
    cons: int = 0,
) -> str:
    # P t sk sport daddr dport cc cwnd ssth srtt infl mss app mode pg cyc cons ca
    return f"P {int(t_ms * 1e6)} 1234 {KEY} {cc} {cwnd} {ssth} 36000 {cwnd} 1448 {app} {mode} {gain} 0 {cons} {ca}"


def cong(t_ms: float, ca: int) -> str:
    return f"C {int(t_ms * 1e6)} 1234 {KEY} {ca}"


def close(t_ms: float) -> str:
    return f"S {int(t_ms * 1e6)} 1234 {KEY} 1 7"


def translate(records: list[str]) -> list[str]:
    lines: list[str] = []
    tr = Translator(write=lines.append, wall_offset_ns=1_700_000_000 * 10**9)
    for r in records:
        tr.feed(r)
    tr.close_all()
    assert tr.bad == 0
    return lines


def transitions(lines: list[str]) -> list[tuple[str, str, str, int]]:
    out = []
    for line in lines:
        f = dict(kv.split("=", 1) for kv in line.split("QUICSM ", 1)[1].split())
        if "to" in f:
            out.append((f["from"], f["to"], f["trigger"], int(f["t_us"])))
    return out


def test_slow_start_recovery_and_loss_from_cwnd_and_ca_state() -> None:
    lines = translate(
        [
            probe(0, 10),
            probe(10, 20),
            probe(20, 40),
            cong(25, 1),  # Disorder
            cong(26, 3),  # Recovery
            probe(30, 30, 20, ca=3),
            cong(60, 0),  # back to Open: decided by the next ACK, stamped at 60 ms
            probe(70, 21, 20),
            cong(90, 4),  # RTO
            cong(95, 4),  # another RTO in Loss: an update, not a transition
            probe(120, 2, 10, ca=4),
            cong(130, 0),
            probe(140, 3, 10),
            probe(200, 11, 10),
            close(300),
        ]
    )
    assert transitions(lines) == [
        ("Init", "SlowStart", "init", 0),
        ("SlowStart", "Disorder", "reorder", 25_000),
        ("Disorder", "Recovery", "loss", 26_000),
        ("Recovery", "CongestionAvoidance", "recovery_exit", 60_000),
        ("CongestionAvoidance", "Loss", "rto", 90_000),
        ("Loss", "SlowStart", "recovery_exit", 130_000),
        ("SlowStart", "CongestionAvoidance", "ssthresh", 200_000),
    ]
    assert sum("trigger=rto" in x and "ev=update" in x for x in lines) == 1
    assert lines[-1].endswith("ev=close trigger=close") or "ev=close" in lines[-1]
    # cwnd is in bytes (segments x MSS) and the prefix is a Go-log wall clock
    first = lines[0]
    assert " cwnd=14480 " in first and " ssthresh=inf " in first and first.startswith("2023/11/14 ")


def test_hystart_and_application_limited() -> None:
    lines = translate([probe(0, 10, app=1), probe(5, 10), probe(10, 80), probe(20, 80, 80), probe(30, 81, 80, app=1)])
    assert [(a, b, c) for a, b, c, _ in transitions(lines)] == [
        ("Init", "ApplicationLimited", "init"),
        ("ApplicationLimited", "SlowStart", "ack"),
        ("SlowStart", "CongestionAvoidance", "hystart"),
        ("CongestionAvoidance", "ApplicationLimited", "app_limited"),
    ]


def test_bbr_modes_and_probe_bw_phases() -> None:
    lines = translate(
        [
            probe(0, 10, cc="bbr", mode=0, gain=739),
            probe(100, 80, cc="bbr", mode=1, gain=88),
            probe(150, 60, cc="bbr", mode=2, gain=320),
            probe(200, 60, cc="bbr", mode=2, gain=192),
            probe(250, 60, cc="bbr", mode=2, gain=256),
            cong(260, 3),
            probe(261, 40, 30, cc="bbr", mode=2, gain=256, ca=3, cons=1),
            probe(10_000, 4, 30, cc="bbr", mode=3, gain=256),
        ]
    )
    assert [(a, b) for a, b, _, _ in transitions(lines)] == [
        ("Init", "Startup"),
        ("Startup", "Drain"),
        ("Drain", "ProbeBw.Up"),
        ("ProbeBw.Up", "ProbeBw.Down"),
        ("ProbeBw.Down", "ProbeBw.Cruise"),
        ("ProbeBw.Cruise", "ProbeRtt"),
    ]
    assert any("recovery=Conservation" in x and "ev=update" in x for x in lines)
    assert "trigger=full_bw" in lines[1] and "trigger=min_rtt_expired" in lines[-1]


def test_bbr_drain_left_within_one_ack_is_written() -> None:
    """Startup then ProbeBw on the next ACK: the kernel passed Drain in between (bbr_check_drain enters
    and leaves it in one call when inflight is already small), at that ACK's instant."""
    lines = translate(
        [probe(0, 10, cc="bbr", mode=0, gain=739), probe(100, 80, cc="bbr", mode=2, gain=320)]
        + [probe(5_000, 60, cc="bbr", mode=3, gain=256), probe(5_200, 60, cc="bbr", mode=2, gain=256)]
    )
    got = transitions(lines)
    assert [(a, b) for a, b, _, _ in got] == [
        ("Init", "Startup"),
        ("Startup", "Drain"),
        ("Drain", "ProbeBw.Up"),
        ("ProbeBw.Up", "ProbeRtt"),
        ("ProbeRtt", "ProbeBw.Cruise"),  # ProbeRtt goes back to ProbeBw directly: no Drain there
    ]
    assert got[1][2:] == ("full_bw", 100_000) and got[2][2:] == ("ack", 100_000)  # Drain: one instant


def test_lines_parse_as_contract_traces(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        "\n".join(translate([probe(0, 10), probe(10, 40), cong(20, 3), cong(50, 0), probe(60, 30, 30), close(90)]))
    )
    res = parse_inputs([str(log)], require_transitions=False)
    (trace,) = res.traces
    assert trace.cc == "cubic"
    assert [e.state for e in trace.events if e.kind == "transition"] == ["SlowStart", "Recovery", "CongestionAvoidance"]
    assert trace.duration_us == 90_000


def test_malformed_records_are_counted_not_guessed() -> None:
    tr = Translator(write=lambda s: None)
    for bad in ("P 1 2 3", "C x 1 4433 1.2.3.4 5 3", "Attaching 3 probes..."):
        tr.feed(bad)
    assert tr.bad == 2 and tr.records == 0


def test_script_filters_on_the_namespace_inode() -> None:
    s = bpftrace_script(4026532999)
    assert s.count("ns.inum == 4026532999") == 3
    assert "NSINUM" not in s


def test_missing_bpftrace_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ktrace.os, "geteuid", lambda: 0)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(TestbedError) as exc:
        ktrace.check_tracing()
    assert "bpftrace" in str(exc.value) and "\n" not in str(exc.value)


def test_without_root_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ktrace.os, "geteuid", lambda: 1000)
    with pytest.raises(TestbedError, match="needs root"):
        ktrace.check_tracing()


def test_stale_registry_entries_are_removed(tmp_path: Path) -> None:
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    (tmp_path / f"{pid}.json").write_text(f'{{"pid": {pid}, "owner": {pid}}}')
    (tmp_path / "junk.json").write_text("not json")
    assert ktrace.cleanup_stale(tmp_path) == []  # nothing alive to stop, but both entries go
    assert not list(tmp_path.glob("*.json"))
