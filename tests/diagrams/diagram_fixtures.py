"""Annotated models built the real way (Trace objects -> dfg inference -> annotate) for the diagram tests."""

from __future__ import annotations

import random
from collections.abc import Sequence

from annotate_oracle import annotate

from quicsm.inference import infer_sequences
from quicsm.inference.annotate import AnnotatedModel
from quicsm.traces.events import StateView, Trace, TraceEvent

__all__ = ["CUBIC_WALK", "make_traces", "make_model", "model_of"]

CUBIC_WALK: dict[str, list[tuple[str, int]]] = {
    "Init": [("SlowStart", 1)],
    "SlowStart": [("CongestionAvoidance", 6), ("Recovery", 2), ("ApplicationLimited", 2)],
    "CongestionAvoidance": [("Recovery", 3), ("ApplicationLimited", 3), ("CongestionAvoidanceMaxed", 1)],
    "CongestionAvoidanceMaxed": [("CongestionAvoidance", 3), ("Recovery", 1)],
    "ApplicationLimited": [("CongestionAvoidance", 6), ("SlowStart", 1)],
    "Recovery": [("CongestionAvoidance", 8), ("TailLossProbe", 1)],
    "TailLossProbe": [("Recovery", 2), ("RetransmissionTimeout", 1), ("CongestionAvoidance", 3)],
    "RetransmissionTimeout": [("SlowStart", 1)],
}
"""Cubic states and the moves a sender makes between them, with relative weights."""


def make_traces(n: int = 12, seed: int = 0, app_limited_weight: float = 1.0, files: int = 2) -> list[Trace]:
    """``n`` connections walking over :data:`CUBIC_WALK` with random stays, each ending in a close event."""
    rng = random.Random(seed)
    traces = []
    for c in range(n):
        t, state, events = rng.randrange(10**6), "Init", []
        for _ in range(rng.randrange(4, 25)):
            moves = CUBIC_WALK[state]
            weights = [w * (app_limited_weight if s == "ApplicationLimited" else 1) for s, w in moves]
            nxt = rng.choices([s for s, _ in moves], weights=weights)[0]
            t += rng.randrange(1, 400_000)
            events.append(TraceEvent(t, nxt, prev=state, cwnd=rng.randrange(14600, 10**6)))
            state = nxt
        events.append(TraceEvent(t + rng.randrange(1, 50_000), state, kind="close"))
        traces.append(
            Trace(
                f"conn{c}",
                "cubic",
                events,
                key=f"0x{c:x}",
                implementation="quic-go",
                sources=(f"server{c % files}.log",),
                labels={"client": "desktop"},
            )
        )
    return traces


def model_of(traces: Sequence[Trace], meta: dict[str, object] | None = None) -> AnnotatedModel:
    view = StateView()
    result = infer_sequences([t.states(view) for t in traces], "dfg")
    return annotate(result, traces, view, meta=dict(meta or {"cc": "cubic", "labels": {"client": "desktop"}}))


def make_model(n: int = 12, seed: int = 0, app_limited_weight: float = 1.0) -> AnnotatedModel:
    return model_of(make_traces(n, seed, app_limited_weight))
