"""Connections as ``compare`` uses them: the one row kind of every table of a comparison.

Every table of a comparison (occupancy, edges, models, the traces a model rejects) reads one row per
connection: its metadata, its folded state sequence with the stay in each state (as
:meth:`Trace.visits` gives it), its number of events, its length and whether it has cwnd samples.
Rows come from the columns of text logs and Parquet stores (:func:`column_connections`, no Python
object per event) or from trace objects (:func:`connection`); :func:`rows_of` takes either.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from quicsm.traces.events import StateView, Trace

if TYPE_CHECKING:
    from quicsm.traces.columnar import TraceColumns
    from quicsm.traces.summary import Summary

__all__ = ["Connection", "column_connections", "connection", "rows_of", "rows_summary", "shell"]


@dataclass(frozen=True, slots=True, eq=False)
class Connection:
    """One connection: ``trace`` carries its metadata (a trace without events), ``states`` and
    ``durations_us`` are its ``visits(view)``, ``events`` its number of events."""

    trace: Trace
    states: tuple[str, ...]
    durations_us: tuple[int, ...]
    events: int
    duration_us: int
    """First event to its end (:attr:`Trace.duration_us`)."""
    has_cwnd: bool
    """Some event carries a cwnd sample (what the HTML report's timelines draw)."""
    has_transition: bool

    @property
    def id(self) -> str:
        return self.trace.id


def shell(t: Trace) -> Trace:
    """``t`` without its events."""
    return Trace(t.id, t.cc, [], t.key, t.implementation, t.version, t.sources, dict(t.labels))


def connection(trace: Trace, view: StateView = StateView()) -> Connection:
    """The row of one trace object."""
    visits = trace.visits(view)
    return Connection(
        shell(trace),
        tuple(v.state for v in visits),
        tuple(v.duration_us for v in visits),
        len(trace.events),
        trace.duration_us,
        any(e.cwnd is not None for e in trace.events),
        any(e.kind == "transition" for e in trace.events),
    )


def rows_of(items: Iterable[Trace | TraceColumns], view: StateView = StateView()) -> list[Connection]:
    """The rows of non-empty traces, given as objects or as column batches (in order)."""
    out: list[Connection] = []
    for item in items:
        if isinstance(item, Trace):
            if item.events:
                out.append(connection(item, view))
        else:
            out.extend(column_connections(item, view))
    return out


def column_connections(tc: TraceColumns, view: StateView, shells: Sequence[Trace] | None = None) -> list[Connection]:
    """The rows of one batch of columns (a row per trace, none per event)."""
    import numpy as np

    from quicsm.traces.columnar import NULL, stay_sequences
    from quicsm.traces.events import METRIC_FIELDS

    stays = stay_sequences(tc, view)
    ntr = len(tc)
    t = tc.events.t_us[tc.order]
    starts = tc.offsets[:-1]
    if ntr:
        begin = t[starts]
        end = np.maximum.reduceat(t, starts)
        cwnd = tc.events.metrics[tc.order, METRIC_FIELDS.index("cwnd")] != NULL
        has_cwnd = np.logical_or.reduceat(cwnd, starts) if len(cwnd) else np.zeros(ntr, bool)
    else:
        begin = end = np.zeros(0, np.int64)
        has_cwnd = np.zeros(0, bool)
    span = (end - begin).tolist()
    cw = has_cwnd.tolist()
    metas = shells if shells is not None else [tc.shell(i) for i in range(ntr)]
    return [
        Connection(
            metas[i],
            stays.states[i],
            tuple(stays.durations_us[i]),
            stays.events[i],
            span[i],
            cw[i],
            stays.has_transition[i],
        )
        for i in range(ntr)
    ]


def rows_summary(rows: Iterable[Connection], view: StateView) -> Summary:
    """The rows folded as :func:`quicsm.traces.summary.fold` folds traces (what :func:`quicsm.pipeline.learn` reads)."""
    from quicsm.traces.summary import Summary

    s = Summary(view=view)
    for r in rows:
        s.count_sequence(r.states, list(r.durations_us), r.events, r.has_transition)
        s.note_metadata(r.trace)
    return s
