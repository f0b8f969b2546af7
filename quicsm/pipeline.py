"""Learning: a summary of traces -> model -> annotated model (-> picture via :mod:`quicsm.diagrams`).

:func:`learn` is the one entry point, whatever the traces came from: a :class:`~quicsm.traces.summary.Summary`
(``infer``, ``diagram``), trace objects, or a comparison's connection rows. The engine sees each
distinct state sequence once (in order of first appearance); counts and stay times weight the
annotation, so the work follows the distinct behaviour, not the number of connections.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from quicsm.inference import infer_sequences
from quicsm.inference.annotate import AnnotatedModel, annotate_counts
from quicsm.traces.events import StateView, Trace
from quicsm.traces.summary import Summary, summarize_traces

__all__ = ["learn"]


def learn(
    data: Summary | Iterable[Trace], engine: str = "synoptic", view: StateView | None = None, **opts: Any
) -> AnnotatedModel:
    """Infer a model with ``engine`` and annotate it with time shares and edge probabilities.

    ``data`` is a summary (its own view), or trace objects (folded for ``view``). ``opts`` go to the
    engine (``k``, ``refine``, the jar's options).

    >>> from quicsm import learn, summarize
    >>> am = learn(summarize(["traces/fig13/desktop"]), "dfg")
    >>> am.traces, sorted(n.state for n in am.nodes if n.kind == "state")[:2]
    (11, ['ApplicationLimited', 'CongestionAvoidance'])
    """
    from quicsm.inference.packed import EncodedLog, PackedPaths

    started = time.perf_counter()
    summary = data if isinstance(data, Summary) else summarize_traces(data, view or StateView())
    seqs = summary.packed()
    res = infer_sequences(EncodedLog.from_codes(summary.names, seqs.codes, seqs.offsets), engine, **opts)
    res.model.params.setdefault("phases", summary.view.phases)
    res.model.params.setdefault("recovery", summary.view.recovery)
    meta = summary.describe()
    meta["inference_seconds"] = round(time.perf_counter() - started, 3)
    counts = seqs.counts.tolist()
    paths = PackedPaths(seqs.durations_us, seqs.offsets)
    return annotate_counts(res, counts, paths, int(seqs.events.sum()), len(summary.sources), meta=meta)
