"""Connections as ``compare`` uses them: the one row kind of every table of a comparison.

Every table of a comparison (occupancy, edges, models, the traces a model rejects) reads one row per
connection: its metadata, its folded state sequence with the stay in each state (as
:meth:`Trace.visits` gives it), its number of events, its length and whether it has cwnd samples.
Rows are built from column batches (:func:`column_connections`, no Python object per event); trace
objects go through their columns (:func:`connections`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from quicsm.traces.events import StateView, Trace

if TYPE_CHECKING:
    from quicsm.traces.columnar import TraceColumns
    from quicsm.traces.summary import Summary

__all__ = ["Connection", "column_connections", "connections", "rows_of", "rows_summary"]


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


def connections(traces: Iterable[Trace], view: StateView = StateView()) -> list[Connection]:
    """The rows of non-empty trace objects (through their columns: one row builder)."""
    from quicsm.traces.columnar import columns_of

    return column_connections(columns_of(list(traces)), view)


def rows_of(items: Iterable[TraceColumns], view: StateView = StateView()) -> list[Connection]:
    """The rows of every trace of some column batches, in order."""
    return [r for tc in items for r in column_connections(tc, view)]


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


def rows_summary(rows: Sequence[Connection], view: StateView) -> Summary:
    """The rows folded as :func:`quicsm.traces.summary.fold` folds their traces (what
    :func:`quicsm.pipeline.learn` reads)."""
    import numpy as np

    from quicsm.traces.distinct import PackedSequences
    from quicsm.traces.summary import Summary

    names: dict[str, int] = {}
    codes = np.fromiter((names.setdefault(st, len(names)) for r in rows for st in r.states), np.int64)
    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum([len(r.states) for r in rows], out=offsets[1:])
    events = np.fromiter((r.events for r in rows), np.int64, len(rows))
    stays = np.fromiter((d for r in rows for d in r.durations_us), np.int64, len(codes))
    s = Summary(view=view)
    seqs = PackedSequences.build(list(names), codes, offsets, np.ones(len(rows), np.int64), events, stays)
    s.add_packed(list(names), seqs, any(r.has_transition for r in rows))
    for r in rows:
        s.note_metadata(r.trace)
    return s
