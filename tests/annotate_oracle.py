"""Learn and annotate a model trace object by trace object: the oracle for quicsm's one pass over distinct
sequences (:func:`quicsm.inference.annotate.annotate_counts`, :func:`quicsm.pipeline.learn`).

Written the plain way (each trace's own stays, Counters, no packing), so a test can hold the library's
array sums to it; and handy where a test has trace objects and wants their model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from quicsm.errors import InferenceError
from quicsm.inference import infer_sequences
from quicsm.inference.annotate import AnnotatedModel, EdgeStats, NodeStats
from quicsm.inference.model import Edge, InferenceResult, Model, Node
from quicsm.traces.events import StateView, Trace, Visit

_DEFAULT_VIEW = StateView()


def infer(
    traces: Sequence[Trace],
    engine: str = "synoptic",
    view: StateView = _DEFAULT_VIEW,
    *,
    sequences: Sequence[Sequence[str]] | None = None,
    **opts: Any,
) -> InferenceResult:
    """Learn a model from traces; ``paths[i]`` maps ``traces[i].visits(view)`` onto model nodes."""
    seqs = sequences if sequences is not None else [t.states(view) for t in traces]
    res = infer_sequences(seqs, engine, **opts)
    res.model.params.setdefault("phases", view.phases)
    res.model.params.setdefault("recovery", view.recovery)
    return res


def annotate(
    result: InferenceResult,
    traces: Sequence[Trace],
    view: StateView = _DEFAULT_VIEW,
    meta: dict[str, Any] | None = None,
    stays_per_trace: Sequence[list[Visit]] | None = None,
) -> AnnotatedModel:
    """Visits, dwell times and time shares per node and probabilities per edge, trace by trace.

    ``stays_per_trace`` (each trace's ``visits(view)``) saves recomputing them when the caller has them.
    When no time passed at all, a state's share is its share of the state visits (as the library does).
    """
    model = result.model
    if len(result.paths) != len(traces):
        raise InferenceError(f"model has {len(result.paths)} paths for {len(traces)} traces")
    visits: Counter[int] = Counter()
    time_us: Counter[int] = Counter()
    steps: Counter[tuple[int, int]] = Counter()
    events = 0
    for i, (trace, path) in enumerate(zip(traces, result.paths)):
        stays = stays_per_trace[i] if stays_per_trace is not None else trace.visits(view)
        inner = path[1:-1]
        if len(inner) != len(stays):
            raise InferenceError(f"trace {trace.id}: model path has {len(inner)} steps for {len(stays)} states")
        for node_id, stay in zip(inner, stays):
            time_us[node_id] += stay.duration_us
        for node_id in path:
            visits[node_id] += 1
        for src, dst in zip(path, path[1:]):
            steps[src, dst] += 1
        events += len(trace.events)
    total = sum(time_us.values())
    state_visits = sum(c for nid, c in visits.items() if model.nodes[nid].kind == "state")
    nodes = []
    for n in model.nodes:
        if total:
            share = time_us[n.id] / total
        elif n.kind == "state" and state_visits:
            share = visits[n.id] / state_visits
        else:
            share = 0.0
        nodes.append(NodeStats(n.id, n.state, n.kind, visits[n.id], time_us[n.id], share))
    leaving: Counter[int] = Counter()
    for (src, _), c in steps.items():
        leaving[src] += c
    edges = [EdgeStats(s, d, c, c / leaving[s]) for (s, d), c in sorted(steps.items())]
    files = {f for t in traces for f in t.sources}
    return AnnotatedModel(model, nodes, edges, len(traces), events, total, len(files), dict(meta or {}))


def model_from_paths(engine: str, labels: Sequence[str], paths: list[list[int]], **params: Any) -> InferenceResult:
    """A model whose edges are exactly the steps the paths take; ``labels[i]`` is node ``i``'s state."""
    nodes = [Node(i, s) for i, s in enumerate(labels)]
    res = InferenceResult(Model(engine, nodes, [], dict(params)), paths)
    res.model.edges = [Edge(s, d, c) for (s, d), c in sorted(res.edge_counts().items())]
    return res
