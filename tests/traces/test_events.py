from __future__ import annotations

from quicsm.traces.events import StateView, Trace, TraceEvent


def _trace(events: list[TraceEvent]) -> Trace:
    return Trace(id="t", cc="bbr", events=events)


def test_visits_fold_repeats_and_last_stay_lasts_until_end() -> None:
    t = _trace(
        [
            TraceEvent(0, "Startup", prev="Init"),
            TraceEvent(10, "Startup"),  # repeat: folded
            TraceEvent(30, "Drain"),
            TraceEvent(35, "Drain", kind="metrics", cwnd=9),
            TraceEvent(80, "Drain", kind="close"),
        ]
    )
    v = t.visits()
    assert [(x.state, x.start_us, x.end_us) for x in v] == [("Startup", 0, 30), ("Drain", 30, 80)]
    assert sum(x.duration_us for x in v) == t.duration_us


def test_first_stay_is_the_first_from_unless_it_is_the_start_marker() -> None:
    """Init, the contract's start marker, is never a stay; a changes-only logger's first ``from`` is; a reset
    into Init is a stay and the state it left belonged to the connection before (decisions.md, 2026-11-28)."""
    marker = _trace([TraceEvent(5, "SlowStart", prev="Init"), TraceEvent(9, "Recovery", prev="SlowStart")])
    changes_only = _trace([TraceEvent(5, "Recovery", prev="SlowStart"), TraceEvent(9, "SlowStart", prev="Recovery")])
    reset = _trace([TraceEvent(5, "Init", prev="Recovery"), TraceEvent(9, "SlowStart", prev="Init")])
    assert marker.states() == ["SlowStart", "Recovery"]
    assert [(x.state, x.start_us, x.end_us) for x in changes_only.visits()] == [
        ("SlowStart", 5, 5),
        ("Recovery", 5, 9),
        ("SlowStart", 9, 9),
    ]
    assert [(x.state, x.start_us, x.end_us) for x in reset.visits()] == [("Init", 5, 9), ("SlowStart", 9, 9)]


def test_phases_and_recovery_views() -> None:
    t = _trace(
        [
            TraceEvent(0, "ProbeBw.Up"),
            TraceEvent(5, "ProbeBw.Down"),
            TraceEvent(9, "ProbeBw.Down", kind="update", recovery="Conservation"),
            TraceEvent(12, "ProbeRtt"),
        ]
    )
    assert t.states(StateView(phases=True)) == ["ProbeBw.Up", "ProbeBw.Down", "ProbeRtt"]
    assert t.states(StateView(phases=False)) == ["ProbeBw", "ProbeRtt"]
    assert t.states(StateView(phases=False, recovery=True)) == ["ProbeBw", "ProbeBw/Conservation", "ProbeRtt"]
