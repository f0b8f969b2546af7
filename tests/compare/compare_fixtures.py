"""Synthetic connections whose occupancy is known by construction, as Trace objects or contract logs."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from quicsm.compare.sets import TraceSet
from quicsm.traces.contract import format_line
from quicsm.traces.events import Trace, TraceEvent


def connection_plan(
    rng: random.Random, app_share: float, *, cycles: int = 6, total_us: int = 2_000_000, recovery: bool = True
) -> list[tuple[str, int]]:
    """(state, duration) stays: SlowStart, then cycles of CongestionAvoidance / ApplicationLimited.

    ``app_share`` of the time after slow start goes to ApplicationLimited; an optional Recovery spell
    sits in some cycles. Durations jitter so per-connection shares vary.
    """
    ss = int(total_us * rng.uniform(0.05, 0.12))
    rest = total_us - ss
    plan: list[tuple[str, int]] = [("SlowStart", ss)]
    for _ in range(cycles):
        chunk = rest / cycles * rng.uniform(0.8, 1.2)
        al = int(chunk * app_share)
        ca = int(chunk - al)
        if recovery and rng.random() < 0.3:
            rec = int(ca * 0.1)
            plan += [("CongestionAvoidance", ca - rec), ("Recovery", rec)]
        else:
            plan.append(("CongestionAvoidance", ca))
        if al > 0:
            plan.append(("ApplicationLimited", al))
    return plan


def trace_from_plan(
    tid: str,
    plan: list[tuple[str, int]],
    *,
    cc: str = "cubic",
    labels: dict[str, str] | None = None,
    rng: random.Random | None = None,
) -> Trace:
    rng = rng or random.Random(0)
    events = []
    t = 1_000
    prev = "Init"
    cwnd = 14_600
    for state, dur in plan:
        if state == prev:
            t += dur
            continue
        cwnd = max(2_920, int(cwnd * (0.7 if state == "Recovery" else rng.uniform(1.0, 1.6))))
        events.append(TraceEvent(t, state, prev=prev, cwnd=cwnd, inflight=int(cwnd * rng.uniform(0.3, 1.0))))
        for k in range(1, 4):
            events.append(
                TraceEvent(
                    t + dur * k // 4,
                    state,
                    kind="metrics",
                    cwnd=cwnd + 1460 * k,
                    inflight=int(cwnd * rng.uniform(0.2, 1.0)),
                )
            )
        prev = state
        t += dur
    events.append(TraceEvent(t, prev, kind="close"))
    return Trace(tid, cc, events, labels=dict(labels or {}), sources=("synthetic",))


def make_traces(
    name: str,
    n: int,
    app_mean: float,
    *,
    seed: int,
    spread: float = 0.05,
    cc: str = "cubic",
    labels: dict[str, str] | None = None,
    recovery: bool = True,
) -> tuple[Trace, ...]:
    """``n`` connections whose ApplicationLimited share (after slow start) is ~ N(app_mean, spread)."""
    rng = random.Random(seed)
    traces = []
    for i in range(n):
        share = min(0.95, max(0.0, rng.gauss(app_mean, spread)))
        plan = connection_plan(rng, share, recovery=recovery)
        traces.append(trace_from_plan(f"{name}-{i}", plan, cc=cc, labels=labels, rng=rng))
    return tuple(traces)


def make_set(name: str, n: int, app_mean: float, **kw: Any) -> TraceSet:
    """:func:`make_traces` as a set."""
    return TraceSet.from_traces(name, make_traces(name, n, app_mean, **kw), "synthetic")


def write_contract_log(path: Path, traces: list[Trace] | tuple[Trace, ...]) -> Path:
    """The traces as contract lines of one server log (connections interleaved by time)."""
    lines = []
    for k, tr in enumerate(traces):
        conn = f"0x{k + 1:x}"
        for e in tr.events:
            if e.kind == "transition":
                lines.append(
                    (
                        e.t_us,
                        format_line(
                            conn=conn, t_us=e.t_us, cc=tr.cc, frm=e.prev, to=e.state, cwnd=e.cwnd, inflight=e.inflight
                        ),
                    )
                )
            elif e.kind == "close":
                lines.append((e.t_us, format_line(conn=conn, t_us=e.t_us, cc=tr.cc, ev="close")))
            else:
                lines.append(
                    (
                        e.t_us,
                        format_line(
                            conn=conn, t_us=e.t_us, cc=tr.cc, ev="update", to=e.state, cwnd=e.cwnd, inflight=e.inflight
                        ),
                    )
                )
    lines.sort(key=lambda x: x[0])
    path.write_text("".join(f"I1122 10:00:00.000000 1 sender.cc:1] {line}\n" for _, line in lines))
    return path
