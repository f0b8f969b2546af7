"""quicsm: instrument QUIC congestion controllers, infer their state machines, explain performance.

The library API, one call per stage; each is also a CLI verb, and the verb only maps its options here::

    parse(inputs)                    -> ParseResult (traces + report)        quicsm parse
    summarize(inputs)                -> Summary (distinct sequences, counts)  quicsm infer / diagram, reading
    learn(summary, engine)           -> AnnotatedModel                        quicsm infer
    render(model, "m.svg")           -> the diagram                           quicsm render / diagram
    build_sets(inputs)               -> [TraceSet] (connection rows)          quicsm compare, reading
    compare_sets(sets, options)      -> Comparison (tests, effect sizes)      quicsm compare
    check_runs(baseline, inputs)     -> CheckResult (the regression gate)     quicsm check
    apply/revert/check_patch/port    -> the patch engine                      quicsm patch

Names load on first use, so ``import quicsm`` stays cheap (the CLI's start-up). The subpackages
(``quicsm.compare``, ``quicsm.check``, ``quicsm.traces``, ...) are modules and only modules: no
exported name is also a submodule's name, so importing a submodule never hides a function.

Examples
--------
>>> import quicsm
>>> am = quicsm.learn(quicsm.summarize([TRACES / "fig13/desktop"]), "dfg")
>>> am.traces
11
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from quicsm.version import __version__

_EXPORTS = {
    "parse": "quicsm.traces.parse:parse_inputs",
    "ParseResult": "quicsm.traces.parse:ParseResult",
    "summarize": "quicsm.traces.summary:summarize",
    "Summary": "quicsm.traces.summary:Summary",
    "learn": "quicsm.pipeline:learn",
    "AnnotatedModel": "quicsm.inference.annotate:AnnotatedModel",
    "render": "quicsm.diagrams.render:write_diagram",
    "build_sets": "quicsm.compare.sets:build_sets",
    "TraceSet": "quicsm.compare.sets:TraceSet",
    "compare_sets": "quicsm.compare.comparison:compare",
    "CompareOptions": "quicsm.compare.comparison:CompareOptions",
    "Comparison": "quicsm.compare.comparison:Comparison",
    "check_runs": "quicsm.check.inputs:check_runs",
    "CheckResult": "quicsm.check.gate:CheckResult",
    "apply": "quicsm.instrumentation.engine:apply",
    "revert": "quicsm.instrumentation.engine:revert",
    "check_patch": "quicsm.instrumentation.engine:check",
    "port": "quicsm.instrumentation.porter:port",
    "Trace": "quicsm.traces.events:Trace",
    "StateView": "quicsm.traces.events:StateView",
}
"""Public name -> ``module:attribute`` it stands for (imported on first use)."""

SUBMODULES = (
    "check",
    "cli",
    "compare",
    "diagrams",
    "errors",
    "files",
    "fleet",
    "formats",
    "grids",
    "inference",
    "instrumentation",
    "pipeline",
    "plugins",
    "testbed",
    "textsafe",
    "traces",
    "version",
)
"""The package's submodules: ``quicsm.NAME`` imports them on first use, as ``import quicsm.NAME`` does."""

__all__ = [
    "__version__",
    "parse",
    "ParseResult",
    "summarize",
    "Summary",
    "learn",
    "AnnotatedModel",
    "render",
    "build_sets",
    "TraceSet",
    "compare_sets",
    "CompareOptions",
    "Comparison",
    "check_runs",
    "CheckResult",
    "apply",
    "revert",
    "check_patch",
    "port",
    "Trace",
    "StateView",
]
"""The exports (a literal list, as linters read it): the names of :data:`_EXPORTS`."""

if TYPE_CHECKING:
    from quicsm.check.gate import CheckResult
    from quicsm.check.inputs import check_runs
    from quicsm.compare.comparison import CompareOptions, Comparison
    from quicsm.compare.comparison import compare as compare_sets
    from quicsm.compare.sets import TraceSet, build_sets
    from quicsm.diagrams.render import write_diagram as render
    from quicsm.inference.annotate import AnnotatedModel
    from quicsm.instrumentation.engine import apply, revert
    from quicsm.instrumentation.engine import check as check_patch
    from quicsm.instrumentation.porter import port
    from quicsm.pipeline import learn
    from quicsm.traces.events import StateView, Trace
    from quicsm.traces.parse import ParseResult
    from quicsm.traces.parse import parse_inputs as parse
    from quicsm.traces.summary import Summary, summarize


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is not None:
        module, _, attr = target.partition(":")
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    if name in SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")  # the import binds it here
    raise AttributeError(f"module 'quicsm' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *SUBMODULES})
