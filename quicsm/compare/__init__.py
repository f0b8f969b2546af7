"""Compare congestion-control state machines across trace sets (clients, versions), with statistics.

``compare(sets, CompareOptions())`` runs the analysis; :mod:`quicsm.compare.report` and
:mod:`quicsm.compare.html` write it out; :mod:`quicsm.compare.calibration` measures false positives.
"""

from quicsm.compare.comparison import CompareOptions, Comparison, EdgeRow, PairComparison, SetInfo, StateRow, compare
from quicsm.compare.sets import (
    TraceSet,
    build_sets,
    load_rows,
    parse_selector,
    sets_by_label,
    sets_from_inputs,
    sets_from_selectors,
)
from quicsm.compare.stays import Connection

__all__ = [
    "CompareOptions",
    "Connection",
    "build_sets",
    "load_rows",
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
