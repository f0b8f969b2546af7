"""Per-connection figures the experiments compare: share of time per state, entries into a state,
and Welch's t-test between two groups of runs (the paper reports p < 0.01 as significant)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from quicsm.traces.events import StateView, Trace

__all__ = ["state_share", "state_entries", "state_time_us", "Welch", "welch", "mean_sd", "group_by_label"]


def state_time_us(trace: Trace, state: str, view: StateView = StateView()) -> int:
    return sum(v.end_us - v.start_us for v in trace.visits(view) if v.state == state)


def state_share(trace: Trace, state: str, view: StateView = StateView()) -> float:
    """Share of the connection's lifetime (first to last event) spent in ``state``."""
    visits = trace.visits(view)
    total = sum(v.end_us - v.start_us for v in visits)
    return sum(v.end_us - v.start_us for v in visits if v.state == state) / total if total > 0 else 0.0


def state_entries(trace: Trace, state: str, view: StateView = StateView()) -> int:
    """How often the connection entered ``state`` (e.g. recovery episodes)."""
    return sum(1 for v in trace.visits(view) if v.state == state)


@dataclass(frozen=True, slots=True)
class Welch:
    t: float
    p: float
    n_a: int
    n_b: int

    def significant(self, alpha: float = 0.01) -> bool:
        return not math.isnan(self.p) and self.p < alpha


def welch(a: Sequence[float], b: Sequence[float]) -> Welch:
    """Welch's unequal-variance t-test (two-sided); p is NaN when a group is too small or both are constant."""
    from scipy import stats

    if len(a) < 2 or len(b) < 2:
        return Welch(math.nan, math.nan, len(a), len(b))
    if len(set(a)) == 1 and len(set(b)) == 1:
        return Welch(math.nan, 1.0 if a[0] == b[0] else 0.0, len(a), len(b))
    res = stats.ttest_ind(a, b, equal_var=False)
    return Welch(float(res.statistic), float(res.pvalue), len(a), len(b))


def mean_sd(xs: Sequence[float]) -> tuple[float, float]:
    if not xs:
        return math.nan, math.nan
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
    return m, sd


def group_by_label(traces: Iterable[Trace], key: str) -> dict[str, list[Trace]]:
    out: dict[str, list[Trace]] = {}
    for t in traces:
        out.setdefault(str(t.labels.get(key, "")), []).append(t)
    return out
