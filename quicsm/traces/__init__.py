"""Logs and qlogs in, normalized per-connection traces out."""

from quicsm.traces.events import StateView, Trace, TraceEvent, Visit
from quicsm.traces.parse import ParseResult, iter_traces, parse_inputs, parse_label
from quicsm.traces.report import Issue, ParseReport
from quicsm.traces.store import read_traces, write_traces

__all__ = [
    "Trace",
    "TraceEvent",
    "StateView",
    "Visit",
    "ParseResult",
    "ParseReport",
    "Issue",
    "parse_inputs",
    "iter_traces",
    "parse_label",
    "read_traces",
    "write_traces",
]
