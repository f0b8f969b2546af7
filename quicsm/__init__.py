"""quicsm: instrument QUIC congestion controllers, infer their state machines, explain performance.

The pipeline, one call per stage (each is also a CLI verb; the verbs only map their options here)::

    parse(inputs)            -> ParseResult (traces + report)       quicsm parse
    summarize(inputs)        -> Summary (distinct sequences, counts) quicsm infer / diagram, reading
    learn(summary, engine)   -> AnnotatedModel                        quicsm infer
    render(model, "m.svg")   -> the diagram                           quicsm render / diagram
    build_sets(inputs)       -> [TraceSet] (connection rows)          quicsm compare, reading
    compare(sets, options)   -> Comparison (tests, effect sizes)      quicsm compare
    apply/revert/port(...)   -> the patch engine                      quicsm patch

Names are imported when first used, so ``import quicsm`` stays cheap (the CLI's start-up).

>>> import quicsm
>>> am = quicsm.learn(quicsm.summarize(["traces/fig13/desktop"]), "dfg")
>>> am.traces
11
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "parse": "quicsm.traces.parse:parse_inputs",
    "ParseResult": "quicsm.traces.parse:ParseResult",
    "summarize": "quicsm.traces.summary:summarize",
    "Summary": "quicsm.traces.summary:Summary",
    "learn": "quicsm.pipeline:learn",
    "render": "quicsm.diagrams.render:write_diagram",
    "build_sets": "quicsm.compare.sets:build_sets",
    "TraceSet": "quicsm.compare.sets:TraceSet",
    "compare": "quicsm.compare.comparison:compare",
    "CompareOptions": "quicsm.compare.comparison:CompareOptions",
    "Comparison": "quicsm.compare.comparison:Comparison",
    "apply": "quicsm.instrumentation:apply",
    "revert": "quicsm.instrumentation:revert",
    "check": "quicsm.instrumentation:check",
    "port": "quicsm.instrumentation:port",
    "Trace": "quicsm.traces.events:Trace",
    "StateView": "quicsm.traces.events:StateView",
}

__all__ = [
    "__version__",
    "parse",
    "ParseResult",
    "summarize",
    "Summary",
    "learn",
    "render",
    "build_sets",
    "TraceSet",
    "compare",
    "CompareOptions",
    "Comparison",
    "apply",
    "revert",
    "check",
    "port",
    "Trace",
    "StateView",
]

if TYPE_CHECKING:
    from quicsm.compare.comparison import CompareOptions, Comparison, compare
    from quicsm.compare.sets import TraceSet, build_sets
    from quicsm.diagrams.render import write_diagram as render
    from quicsm.instrumentation import apply, check, port, revert
    from quicsm.pipeline import learn
    from quicsm.traces.events import StateView, Trace
    from quicsm.traces.parse import ParseResult
    from quicsm.traces.parse import parse_inputs as parse
    from quicsm.traces.summary import Summary, summarize


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'quicsm' has no attribute {name!r}")
    module, _, attr = target.partition(":")
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value
