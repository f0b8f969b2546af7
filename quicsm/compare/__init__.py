"""Compare congestion-control state machines across trace sets (clients, versions), with statistics.

``compare(sets, CompareOptions())`` runs the analysis; :mod:`quicsm.compare.report` and
:mod:`quicsm.compare.html` write it out; :mod:`quicsm.compare.calibration` measures false positives.
"""

from quicsm.compare.comparison import CompareOptions, Comparison, EdgeRow, PairComparison, SetInfo, StateRow, compare
from quicsm.compare.sets import TraceSet, parse_selector, sets_by_label, sets_from_inputs, sets_from_selectors

__all__ = [
    "CompareOptions",
    "Comparison",
    "EdgeRow",
    "PairComparison",
    "SetInfo",
    "StateRow",
    "TraceSet",
    "compare",
    "parse_selector",
    "sets_by_label",
    "sets_from_inputs",
    "sets_from_selectors",
]
