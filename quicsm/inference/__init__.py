"""State-machine inference from traces: engines behind one :func:`infer` entry point."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from quicsm.errors import InferenceError
from quicsm.inference.model import INITIAL, TERMINAL, Edge, InferenceResult, Model, Node
from quicsm.traces.events import StateView, Trace

__all__ = [
    "ENGINES",
    "infer",
    "infer_sequences",
    "Model",
    "Node",
    "Edge",
    "InferenceResult",
    "INITIAL",
    "TERMINAL",
]


def _dfg(seqs: Sequence[Sequence[str]], **opts: Any) -> InferenceResult:
    from quicsm.inference.dfg import infer_dfg

    return infer_dfg(seqs)


ENGINES: dict[str, Callable[..., InferenceResult]] = {"dfg": _dfg}
"""Engine name -> function(sequences, **options). Engines register themselves here."""


def infer_sequences(sequences: Sequence[Sequence[str]], engine: str = "synoptic", **opts: Any) -> InferenceResult:
    try:
        fn = ENGINES[engine]
    except KeyError:
        raise InferenceError(f"unknown engine {engine!r}; choose one of {', '.join(sorted(ENGINES))}") from None
    if not any(sequences):
        raise InferenceError("no state sequences to learn from")
    return fn(sequences, **opts)


def infer(traces: Sequence[Trace], engine: str = "synoptic", view: StateView = StateView(), **opts: Any) -> InferenceResult:
    """Learn a model from traces; ``paths[i]`` maps ``traces[i].visits(view)`` onto model nodes."""
    res = infer_sequences([t.states(view) for t in traces], engine, **opts)
    res.model.params.setdefault("phases", view.phases)
    res.model.params.setdefault("recovery", view.recovery)
    return res
