"""Occupancy: each connection's share of time in each state, summarised per set and tested per state.

The IMC'17 Fig. 13 numbers are pooled shares (all time in a state / all time). A test needs one
number per connection, so the unit here is the connection: its share of its own lifetime per state.
Both are reported; the tests run on the per-connection shares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from quicsm.compare.stats import SAMPLE_TESTS, TestResult, bootstrap_mean_ci
from quicsm.compare.stays import Connection
from quicsm.traces.events import StateView, Trace

__all__ = [
    "OccupancyTable",
    "StateSummary",
    "occupancy_table",
    "state_entries",
    "state_share",
    "summarise",
    "test_states",
]


@dataclass(frozen=True, slots=True)
class OccupancyTable:
    """``shares[i, j]``: share of connection ``i``'s time in ``states[j]``; rows sum to 1.

    ``states`` holds only states where some time passed: instantaneous ones (``Init``) have no share.
    """

    states: tuple[str, ...]
    shares: np.ndarray
    time_us: np.ndarray
    """Microseconds per connection and state (for the pooled share)."""
    visits: np.ndarray
    """Times each connection entered each state (recovery episodes, ...), int64."""
    trace_ids: tuple[str, ...]
    dropped: tuple[str, ...]
    """Connections left out because no time passed in any state (a single event)."""

    @property
    def n(self) -> int:
        return len(self.trace_ids)

    def column(self, state: str) -> np.ndarray:
        """Shares of ``state``; zeros when the set never visited it."""
        if state in self.states:
            return self.shares[:, self.states.index(state)]
        return np.zeros(self.n)

    def visited(self, state: str) -> int:
        return int((self.column(state) > 0).sum()) if state in self.states else 0

    def subset(self, rows: np.ndarray) -> OccupancyTable:
        return OccupancyTable(
            self.states,
            self.shares[rows],
            self.time_us[rows],
            self.visits[rows],
            tuple(self.trace_ids[i] for i in rows),
            (),
        )


def state_share(trace: Trace, state: str, view: StateView = StateView()) -> float:
    """Share of one connection's lifetime (first event to its end) spent in ``state``; 0 when no time passed."""
    visits = trace.visits(view)
    total = sum(v.duration_us for v in visits)
    return sum(v.duration_us for v in visits if v.state == state) / total if total > 0 else 0.0


def state_entries(trace: Trace, state: str, view: StateView = StateView()) -> int:
    """How often one connection entered ``state`` (e.g. recovery episodes)."""
    return sum(1 for v in trace.visits(view) if v.state == state)


def occupancy_table(rows: Sequence[Connection]) -> OccupancyTable:
    """One row per connection, from the connections' :class:`~quicsm.compare.stays.Connection` rows."""
    per: list[dict[str, int]] = []
    entered: list[dict[str, int]] = []
    ids: list[str] = []
    dropped: list[str] = []
    names: set[str] = set()
    for t in rows:
        acc: dict[str, int] = {}
        count: dict[str, int] = {}
        for state, us in zip(t.states, t.durations_us):
            acc[state] = acc.get(state, 0) + us
            count[state] = count.get(state, 0) + 1
        if sum(acc.values()) <= 0:
            dropped.append(t.id)
            continue
        per.append(acc)
        entered.append(count)
        ids.append(t.id)
        names.update(k for k, us in acc.items() if us > 0)
    states = tuple(sorted(names))
    index = {s: j for j, s in enumerate(states)}
    time_us = np.zeros((len(per), len(states)))
    visits = np.zeros((len(per), len(states)), np.int64)
    for i, (acc, count) in enumerate(zip(per, entered)):
        for s, us in acc.items():
            if us > 0:
                time_us[i, index[s]] = us
                visits[i, index[s]] = count[s]
    totals = time_us.sum(1, keepdims=True)
    shares = np.divide(time_us, totals, out=np.zeros_like(time_us), where=totals > 0)
    return OccupancyTable(states, shares, time_us, visits, tuple(ids), tuple(dropped))


@dataclass(frozen=True, slots=True)
class StateSummary:
    """One set's occupancy of one state."""

    state: str
    n: int
    visited: int
    """Connections that spent any time in the state."""
    mean: float
    median: float
    ci_low: float | None
    ci_high: float | None
    pooled: float
    """Share of the set's total time (the Fig. 13 number)."""


def summarise(
    table: OccupancyTable, states: Sequence[str], *, resamples: int, confidence: float, rng: np.random.Generator
) -> list[StateSummary]:
    """Mean, median, bootstrap CI of the mean and pooled share for each of ``states``."""
    cols = np.column_stack([table.column(s) for s in states]) if states else np.zeros((table.n, 0))
    total = float(table.time_us.sum())
    if table.n == 0:
        return [StateSummary(s, 0, 0, 0.0, 0.0, None, None, 0.0) for s in states]
    lo, hi = bootstrap_mean_ci(cols, resamples=resamples, confidence=confidence, rng=rng)
    out = []
    for j, s in enumerate(states):
        pooled = float(table.time_us[:, table.states.index(s)].sum()) / total if s in table.states and total else 0.0
        ci = (None, None) if table.n < 2 else (float(lo[j]), float(hi[j]))
        out.append(
            StateSummary(
                s,
                table.n,
                table.visited(s),
                float(cols[:, j].mean()),
                float(np.median(cols[:, j])),
                ci[0],
                ci[1],
                pooled,
            )
        )
    return out


def test_states(a: OccupancyTable, b: OccupancyTable, states: Sequence[str], test: str = "welch") -> list[TestResult]:
    """One two-sample test per state on per-connection shares (b versus a)."""
    fn = SAMPLE_TESTS[test]
    return [fn(a.column(s), b.column(s)) for s in states]


test_states.__test__ = False  # type: ignore[attr-defined]  # not a pytest test
