"""BBR state-timeline measures shared by the BBR experiments: the ProbeBw cycle's timing (Cruise length,
Up/Down/Refill per cycle), ProbeRtt entries and their spacing, and per-connection time shares.

The patch sets print ``ApplicationLimited`` while the newest bandwidth sample is app-limited, with the BBR
mode unchanged underneath. For the cycle's timing that stay belongs to the mode: :func:`mode_visits` folds
it into the state before it (a mode change during it is seen when it ends, so it is dated then).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from quicsm.traces import Trace
from quicsm.traces.events import StateView, Visit

__all__ = ["CycleStats", "cycle_stats", "mode_visits", "summarise", "up_episodes"]

APP_LIMITED = "ApplicationLimited"


def mode_visits(trace: Trace) -> list[Visit]:
    """The connection's stays with ApplicationLimited folded into the stay before it (repeats merged)."""
    out: list[Visit] = []
    for v in trace.visits(StateView()):
        state = v.state
        if state == APP_LIMITED and out:
            state = out[-1].state
        if out and out[-1].state == state:
            out[-1] = Visit(state, out[-1].start_us, v.end_us)
        else:
            out.append(Visit(state, v.start_us, v.end_us))
    return out


@dataclass
class CycleStats:
    """Per-connection measures of one trace (times in seconds)."""

    duration_s: float
    cruise_s: list[float] = field(default_factory=list)
    """Complete ProbeBw.Cruise stays (entered and left before the connection ended)."""
    up_s: list[float] = field(default_factory=list)
    down_s: list[float] = field(default_factory=list)
    refill_s: list[float] = field(default_factory=list)
    cycle_s: list[float] = field(default_factory=list)
    """Time from one ProbeBw.Up entry to the next (one bandwidth-probing cycle)."""
    ups_per_cycle: list[int] = field(default_factory=list)
    downs_per_cycle: list[int] = field(default_factory=list)
    probe_rtt_at_s: list[float] = field(default_factory=list)
    """Times of ProbeRtt entries since the connection's start."""
    probe_rtt_s: list[float] = field(default_factory=list)
    up_ended_by: list[str] = field(default_factory=list)
    """What each ProbeBw.Up stay was left for (the next mode state)."""


def cycle_stats(trace: Trace) -> CycleStats:
    visits = mode_visits(trace)
    t0 = trace.start_us
    st = CycleStats(duration_s=trace.duration_us / 1e6)
    complete = visits[:-1]  # the last stay is cut by the connection's end
    for i, v in enumerate(complete):
        d = v.duration_us / 1e6
        if v.state == "ProbeBw.Cruise":
            st.cruise_s.append(d)
        elif v.state == "ProbeBw.Up":
            st.up_s.append(d)
            st.up_ended_by.append(visits[i + 1].state)
        elif v.state == "ProbeBw.Down":
            st.down_s.append(d)
        elif v.state == "ProbeBw.Refill":
            st.refill_s.append(d)
        elif v.state == "ProbeRtt":
            st.probe_rtt_s.append(d)
    st.probe_rtt_at_s = [(v.start_us - t0) / 1e6 for v in visits if v.state == "ProbeRtt"]
    ups = [i for i, v in enumerate(visits) if v.state == "ProbeBw.Up"]
    for a, b in zip(ups, ups[1:], strict=False):
        st.cycle_s.append((visits[b].start_us - visits[a].start_us) / 1e6)
        between = visits[a:b]
        st.ups_per_cycle.append(sum(v.state == "ProbeBw.Up" for v in between))
        st.downs_per_cycle.append(sum(v.state == "ProbeBw.Down" for v in between))
    return st


def up_episodes(trace: Trace) -> list[tuple[float, float]]:
    """(start, length) in seconds of every ProbeBw.Up stay (mode view)."""
    t0 = trace.start_us
    return [((v.start_us - t0) / 1e6, v.duration_us / 1e6) for v in mode_visits(trace) if v.state == "ProbeBw.Up"]


def _fmt(xs: Sequence[float], unit: str = "s", scale: float = 1.0) -> str:
    if not xs:
        return "—"
    med = statistics.median(xs) * scale
    lo, hi = min(xs) * scale, max(xs) * scale
    digits = 3 if unit == "s" else 0
    return f"{med:.{digits}f} ({lo:.{digits}f}–{hi:.{digits}f}) {unit}, n={len(xs)}"


def summarise(stats: Iterable[CycleStats]) -> dict[str, str]:
    """Median (min–max) of each measure pooled over connections, as table cells."""
    s = list(stats)

    def pool(attr: str) -> list[float]:
        return [x for c in s for x in getattr(c, attr)]

    intervals = [b - a for c in s for a, b in zip(c.probe_rtt_at_s, c.probe_rtt_at_s[1:], strict=False)]
    first = [c.probe_rtt_at_s[0] for c in s if c.probe_rtt_at_s]
    return {
        "cruise": _fmt(pool("cruise_s")),
        "up": _fmt(pool("up_s"), "ms", 1000),
        "down": _fmt(pool("down_s"), "ms", 1000),
        "refill": _fmt(pool("refill_s"), "ms", 1000),
        "cycle": _fmt(pool("cycle_s")),
        "ups_per_cycle": _fmt([float(x) for x in pool("ups_per_cycle")], ""),
        "downs_per_cycle": _fmt([float(x) for x in pool("downs_per_cycle")], ""),
        "probe_rtt_first": _fmt(first),
        "probe_rtt_interval": _fmt(intervals),
        "probe_rtt": _fmt(pool("probe_rtt_s"), "ms", 1000),
    }
