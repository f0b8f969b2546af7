"""Annotate a model with what the traces did in it: time share per node, probability per edge.

These are the numbers of the IMC'17 figures: red = share of total time in a state, black = probability
of leaving a state along an edge. A connection's last state lasts until the connection's end.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

from quicsm.errors import InferenceError
from quicsm.inference.model import InferenceResult, Model
from quicsm.traces.events import StateView, Trace

__all__ = ["NodeStats", "EdgeStats", "AnnotatedModel", "annotate", "MODEL_FORMAT_VERSION"]

MODEL_FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class NodeStats:
    id: int
    state: str
    kind: str
    visits: int
    time_us: int
    time_fraction: float

    @property
    def mean_dwell_us(self) -> float:
        return self.time_us / self.visits if self.visits else 0.0


@dataclass(frozen=True, slots=True)
class EdgeStats:
    src: int
    dst: int
    count: int
    probability: float


@dataclass(slots=True)
class AnnotatedModel:
    model: Model
    nodes: list[NodeStats]
    edges: list[EdgeStats]
    traces: int
    events: int
    total_time_us: int
    sources: int
    """Distinct input files the traces came from."""
    meta: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """The documented model JSON (docs/model-format.md)."""
        return {
            "format": "quicsm-model",
            "format_version": MODEL_FORMAT_VERSION,
            "engine": self.model.engine,
            "params": self.model.params,
            "traces": self.traces,
            "sources": self.sources,
            "events": self.events,
            "total_time_us": self.total_time_us,
            "meta": self.meta,
            "nodes": [
                {
                    "id": n.id,
                    "state": n.state,
                    "kind": n.kind,
                    "initial": n.kind == "initial",
                    "terminal": n.kind == "terminal",
                    "visits": n.visits,
                    "time_us": n.time_us,
                    "mean_dwell_us": round(n.mean_dwell_us, 3),
                    "time_fraction": n.time_fraction,
                }
                for n in self.nodes
            ],
            "edges": [
                {"src": e.src, "dst": e.dst, "count": e.count, "probability": e.probability} for e in self.edges
            ],
        }


def annotate(
    result: InferenceResult,
    traces: Sequence[Trace],
    view: StateView = StateView(),
    meta: dict[str, Any] | None = None,
) -> AnnotatedModel:
    """Attach visits, dwell times and time shares to nodes and probabilities to edges."""
    model = result.model
    if len(result.paths) != len(traces):
        raise InferenceError(f"model has {len(result.paths)} paths for {len(traces)} traces")
    visits: Counter[int] = Counter()
    time_us: Counter[int] = Counter()
    events = 0
    for trace, path in zip(traces, result.paths):
        stays = trace.visits(view)
        inner = path[1:-1]
        if len(inner) != len(stays):
            raise InferenceError(f"trace {trace.id}: model path has {len(inner)} steps for {len(stays)} states")
        for node_id, stay in zip(inner, stays):
            visits[node_id] += 1
            time_us[node_id] += stay.duration_us
        events += len(trace.events)
        visits[path[0]] += 1
        visits[path[-1]] += 1
    total = sum(time_us.values())
    nodes = [
        NodeStats(
            n.id,
            n.state,
            n.kind,
            visits[n.id],
            time_us[n.id],
            (time_us[n.id] / total) if total else (0.0 if n.kind != "state" else _zero_time_share(visits, n.id, model)),
        )
        for n in model.nodes
    ]
    counts = result.edge_counts()
    out_total: Counter[int] = Counter()
    for (s, _), c in counts.items():
        out_total[s] += c
    edges = [EdgeStats(s, d, c, c / out_total[s]) for (s, d), c in sorted(counts.items())]
    files = {f for t in traces for f in t.sources}
    return AnnotatedModel(model, nodes, edges, len(traces), events, total, len(files), dict(meta or {}))


def _zero_time_share(visits: Counter[int], node_id: int, model: Model) -> float:
    """Share by visit count when no time passed at all (instantaneous traces), so shares still sum to 1."""
    state_visits = sum(c for nid, c in visits.items() if model.nodes[nid].kind == "state")
    return visits[node_id] / state_visits if state_visits else 0.0
