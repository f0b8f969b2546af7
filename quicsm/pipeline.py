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
    """Infer a state machine with ``engine`` and annotate it with time shares and edge probabilities.

    The engine sees each distinct state sequence once; counts and stays weight the annotation, so the
    work follows the distinct behaviour, not the number of connections.

    Parameters
    ----------
    data : Summary or iterable of Trace
        A summary (:func:`quicsm.summarize`, which carries its state view), or trace objects (folded
        for ``view``).
    engine : str
        ``synoptic`` (the default, as ``quicsm infer``), ``ktails``, ``dfg`` or ``synoptic-jar``
        (docs/inference.md).
    view : StateView, optional
        For trace objects: how events become states.
    **opts
        The engine's options (``k``, ``refine``, ``seed``, the jar's ``synoptic_jar``, ``java``, ...);
        an option the engine does not take is refused.

    Returns
    -------
    AnnotatedModel
        The model, with visits, time shares, edge counts and probabilities, and the traces' metadata.

    Raises
    ------
    quicsm.errors.InferenceError
        An unknown engine or option, no sequence to learn from, or a failed external engine.

    See Also
    --------
    render : draw the model.

    Examples
    --------
    >>> import quicsm
    >>> am = quicsm.learn(quicsm.summarize([TRACES / "fig13/desktop"]), "dfg")
    >>> am.traces, sorted(n.state for n in am.nodes if n.kind == "state")[:2]
    (11, ['ApplicationLimited', 'CongestionAvoidance'])
    >>> quicsm.learn(quicsm.summarize([TRACES / "fig13/desktop"])).model.engine
    'synoptic'
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
