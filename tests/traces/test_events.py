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
    assert [(x.state, x.start_us, x.end_us) for x in v] == [("Init", 0, 0), ("Startup", 0, 30), ("Drain", 30, 80)]
    assert sum(x.duration_us for x in v) == t.duration_us


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
