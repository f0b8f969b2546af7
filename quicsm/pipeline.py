"""The whole chain in one call: inputs -> traces -> model -> annotated model (-> picture via diagrams).

Each stage stays usable alone (``quicsm.traces.parse_inputs``, ``quicsm.inference.infer``,
``quicsm.inference.annotate.annotate``, ``quicsm.diagrams``); this module only strings them together
and records what was done in the model's metadata, so a diagram's legend can say it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from quicsm.inference import infer, infer_sequences
from quicsm.inference.annotate import AnnotatedModel, annotate, annotate_counts
from quicsm.traces.events import StateView, Trace

if TYPE_CHECKING:
    from quicsm.fleet.summary import Summary

__all__ = ["learn", "learn_stays", "learn_summary", "describe_traces"]


def describe_traces(traces: Sequence[Trace]) -> dict[str, Any]:
    """Metadata worth a legend line: controllers, stacks, versions, labels shared by all traces."""
    meta: dict[str, Any] = {}
    for key in ("cc", "implementation", "version"):
        values = Counter(str(getattr(t, key)) for t in traces if getattr(t, key))
        if values:
            meta[key] = ", ".join(sorted(values))
    if traces:
        common = dict(traces[0].labels)
        for t in traces[1:]:
            common = {k: v for k, v in common.items() if t.labels.get(k) == v}
        if common:
            meta["labels"] = common
    return meta


def learn(
    traces: Sequence[Trace],
    engine: str = "synoptic",
    view: StateView = StateView(),
    **opts: Any,
) -> AnnotatedModel:
    """Infer a model with ``engine`` and annotate it with time shares and edge probabilities."""
    started = time.perf_counter()
    stays = [t.visits(view) for t in traces]
    result = infer(traces, engine, view, sequences=[[v.state for v in s] for s in stays], **opts)
    meta = describe_traces(traces)
    meta["inference_seconds"] = round(time.perf_counter() - started, 3)
    return annotate(result, traces, view, meta=meta, stays_per_trace=stays)


def learn_stays(
    traces: Sequence[Trace],
    sequences: Sequence[Sequence[str]],
    durations_us: Sequence[Sequence[int]],
    events: int,
    engine: str = "synoptic",
    view: StateView = StateView(),
    **opts: Any,
) -> AnnotatedModel:
    """:func:`learn` from each trace's states and stays (``traces`` give only metadata: their events may
    be empty), and the number of events in all: the same model. The sequences are folded as a
    :class:`~quicsm.fleet.summary.Summary` folds them, so the engine sees each distinct one once and
    its work follows the distinct behaviour, not the number of connections."""
    from quicsm.fleet.summary import Summary

    started = time.perf_counter()
    folded = Summary(view=view)
    for seq, stays in zip(sequences, durations_us):
        folded.count_sequence(seq, list(stays), 0, True)
    files = len({f for t in traces for f in t.sources})
    return _learn_folded(folded, engine, describe_traces(traces), events, files, started, **opts)


def learn_summary(summary: Summary, engine: str = "synoptic", **opts: Any) -> AnnotatedModel:
    """:func:`learn` from a :class:`~quicsm.fleet.summary.Summary`: the engine sees each distinct sequence
    once (in order of first appearance), counts and stay times weight the annotation."""
    started = time.perf_counter()
    return _learn_folded(summary, engine, summary.describe(), None, len(summary.sources), started, **opts)


def _learn_folded(
    summary: Summary, engine: str, meta: dict[str, Any], events: int | None, sources: int, started: float, **opts: Any
) -> AnnotatedModel:
    """The model of a summary's distinct sequences, annotated with their counts and stays; ``events``
    None: the summary's own count."""
    from quicsm.inference.packed import EncodedLog, PackedPaths

    seqs = summary.packed()
    res = infer_sequences(EncodedLog.from_codes(summary.names, seqs.codes, seqs.offsets), engine, **opts)
    res.model.params.setdefault("phases", summary.view.phases)
    res.model.params.setdefault("recovery", summary.view.recovery)
    meta["inference_seconds"] = round(time.perf_counter() - started, 3)
    total = int(seqs.events.sum()) if events is None else events
    counts = seqs.counts.tolist()
    return annotate_counts(res, counts, PackedPaths(seqs.durations_us, seqs.offsets), total, sources, meta=meta)
