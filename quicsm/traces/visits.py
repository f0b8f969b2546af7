"""The stays rule, written once: which states a connection went through and how long it stayed in each.

Every model, occupancy table and timeline rests on it. :meth:`quicsm.traces.events.Trace.visits` (one
trace object) and :func:`quicsm.traces.columnar.stay_arrays` (column batches of many traces) both label
their records for a :class:`~quicsm.traces.events.StateView` and hand them to :func:`stays`:

- only transitions and updates make stays; a record whose label equals the current one continues it;
- a connection's first stay is the ``from`` of its first transition when the emitter named one other
  than ``Init`` (a changes-only logger's first ``old``), and the transition is no reset into ``Init``;
  ``Init`` is the log contract's start marker, which a model's INITIAL node stands for;
- each stay ends where the next begins; the last one at the connection's end (its close, or its last
  record of any kind).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

__all__ = ["Stays", "stays"]


class Stays(NamedTuple):
    """Stays of many traces, trace by trace: trace ``i``'s are ``bounds[i]:bounds[i + 1]``."""

    label: np.ndarray
    start_us: np.ndarray
    stop_us: np.ndarray
    bounds: np.ndarray


def stays(
    trace: np.ndarray,
    t_us: np.ndarray,
    label: np.ndarray,
    transition: np.ndarray,
    prev: np.ndarray,
    state: np.ndarray,
    init: int,
    end_us: np.ndarray,
    from_labels: Callable[[np.ndarray], np.ndarray],
) -> Stays:
    """The stays of the transition and update records of ``len(end_us)`` traces, given trace by trace in
    time order: per record its trace, time, label id, whether it is a transition, and the name ids of
    the state it left (``prev``, -1: not named) and entered (``state``); ``init`` is the id of ``Init``
    (any id no record uses when absent). ``from_labels(records)`` gives the label ids of the states
    those records left, for the first stays that start there."""
    ntr = len(end_us)
    n = len(trace)
    first = np.ones(n, bool)
    first[1:] = trace[1:] != trace[:-1]
    at = np.flatnonzero(first)
    opens = transition[at] & (prev[at] >= 0) & (prev[at] != init) & (state[at] != init)
    if opens.any():
        where = at[opens]
        label = np.insert(label, where, from_labels(where))
        t_us = np.insert(t_us, where, t_us[where])
        trace = np.insert(trace, where, trace[where])
        first = np.ones(len(trace), bool)
        first[1:] = trace[1:] != trace[:-1]
    keep = first.copy()
    keep[1:] |= label[1:] != label[:-1]
    label, t_us, trace, first = label[keep], t_us[keep], trace[keep], first[keep]
    last = np.ones(len(label), bool)
    last[:-1] = first[1:]
    stop = np.empty(len(label), np.int64)
    stop[:-1] = t_us[1:]
    stop[last] = np.maximum(end_us[trace[last]], t_us[last])
    bounds = np.searchsorted(trace, np.arange(ntr + 1)).astype(np.int64)
    return Stays(label, t_us.astype(np.int64, copy=False), stop, bounds)
