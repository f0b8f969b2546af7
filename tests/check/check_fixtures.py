"""Synthetic connections for the gate's tests: a Reno-like plan, optionally with an extra Recovery entry."""

from __future__ import annotations

import random
import sys
from pathlib import Path

from quicsm.compare.stays import Connection, connections
from quicsm.traces.events import Trace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compare"))
from compare_fixtures import connection_plan, trace_from_plan

__all__ = ["make_rows", "make_traces_for", "trace_from_plan"]


def make_traces_for(
    name: str,
    n: int,
    *,
    seed: int,
    extra_recovery: bool = False,
    cc: str = "reno",
    labels: dict[str, str] | None = None,
) -> list[Trace]:
    """``n`` connections: slow start, cycles of CA/AppLimited with an occasional Recovery; with
    ``extra_recovery`` every connection leaves slow start through a Recovery spell (a new edge
    SlowStart -> Recovery and one more Recovery entry per connection: the injected change)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        plan = connection_plan(rng, rng.gauss(0.3, 0.04), recovery=True)
        if extra_recovery:
            ss_state, ss = plan[0]
            plan = [(ss_state, ss), ("Recovery", int(ss * 0.6)), *plan[1:]]
        out.append(
            trace_from_plan(f"{name}-{i}", plan, cc=cc, labels={**(labels or {}), "run": f"{name}-{i:02d}"}, rng=rng)
        )
    return out


def make_rows(name: str, n: int, *, seed: int, **kw: object) -> list[Connection]:
    return connections(make_traces_for(name, n, seed=seed, **kw))  # type: ignore[arg-type]
