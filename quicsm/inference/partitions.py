"""Synoptic's partition graph over event instances held in integer arrays.

Every framed event (INITIAL, the states, TERMINAL of every trace) is one slot of ``part``; event
``i``'s successor is ``i + 1`` unless ``i`` is a TERMINAL. A partition is a set of events of one type;
the partition graph has an edge p -> q when some event of p is directly followed by an event of q.
Splitting and merging move index arrays and update edge counts for just the events that moved, so
a split costs the size of the partition split, never a pass over the whole log.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np

from quicsm.inference.checker import Csr, fastcheck
from quicsm.inference.packed import CHUNK, EncodedLog, count_pairs

__all__ = ["PartitionGraph"]

SCAN_EVENTS = 1 << 18
"""Logs up to this many framed events get their edges from one pass over every step (a sort of
the steps' edge keys, tens of microseconds) instead of the incremental bookkeeping, whose Python
loops over edges cost more on small graphs that refinement changes thousands of times."""


class PartitionGraph:
    def __init__(self, log: EncodedLog) -> None:
        self.types, self.offsets = log.framed()
        self.initial_type = log.initial
        self.terminal_type = log.terminal
        n = len(self.types)
        self.has_succ = self.types != self.terminal_type
        self.has_pred = self.types != self.initial_type
        self.part = self.types.astype(np.int32)  # one partition per event type to start with
        index = np.int32 if n < 2**31 else np.int64  # event positions: half the memory of int64
        self.members: list[np.ndarray] = [np.flatnonzero(self.part == p).astype(index) for p in range(log.terminal + 1)]
        self.ptype: list[int] = list(range(log.terminal + 1))
        self.edges: Counter[tuple[int, int]] = Counter()
        self._positions: dict[int, np.ndarray] = {}
        self._starts: np.ndarray | None = None
        # per edge (p, q), the first event of p (in log order) that steps into q: Synoptic's successor
        # order (see ordered_successors); recomputed lazily for partitions changed since the last call
        self._first: dict[tuple[int, int], int] = {}
        self._dirty: set[int] = set(range(len(self.members)))
        self._frames: dict[int, tuple[np.ndarray, ...]] = {}
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None
        self._ordered: Csr | None = None
        self._steps = np.flatnonzero(self.has_succ).astype(self.part.dtype) if n <= SCAN_EVENTS else None
        self.recount()

    def recount(self) -> None:
        """Count :attr:`edges` anew from every step ``i -> i + 1`` out of a non-TERMINAL event."""
        self.edges = Counter()
        n = len(self.part)
        for a in range(0, n - 1, CHUNK):
            b = min(a + CHUNK, n - 1)
            mask = self.has_succ[a:b]
            self._add_pairs(self.part[a:b][mask], self.part[a + 1 : b + 1][mask], +1)

    @property
    def size(self) -> int:
        return len(self.members)

    def initial(self) -> int:
        return self.initial_type

    def _count(self, steps: np.ndarray, sign: int) -> None:
        """Add (or remove) the edges taken by the steps ``i -> i + 1`` to the edge counts."""
        self._arrays = self._ordered = None
        if len(steps):
            self._add_pairs(self.part[steps], self.part[steps + 1], sign)

    def _add_pairs(self, src_parts: np.ndarray, dst_parts: np.ndarray, sign: int) -> None:
        self._arrays = self._ordered = None
        src, dst, cnt = count_pairs(src_parts, dst_parts, len(self.members) + 1)
        for edge, c in zip(zip(src.tolist(), dst.tolist()), cnt.tolist()):
            self.edges[edge] += sign * c
            if self.edges[edge] == 0:
                del self.edges[edge]

    def _touching(self, events: np.ndarray) -> np.ndarray:
        """Steps (by source index) into or out of the sorted ``events``, each once."""
        out = events[self.has_succ[events]]
        # the step into event i comes from i - 1; skip it when i - 1 is itself moving (counted in `out`)
        follows_moved = np.zeros(len(events), dtype=bool)
        follows_moved[1:] = events[1:] - 1 == events[:-1]
        into = events[self.has_pred[events] & ~follows_moved] - 1
        return np.concatenate([out, into])

    def split(self, p: int, moving: np.ndarray) -> int:
        """Move the members of ``p`` selected by the boolean mask ``moving`` into a new partition."""
        members = self.members[p]
        moved, kept = members[moving], members[~moving]
        assert len(moved) and len(kept), "a split must leave both sides non-empty"
        q = len(self.members)
        self._frames.clear()
        self._arrays = self._ordered = None
        self._dirty.update((p, q))
        steps = self._touching(moved)
        self._count(steps, -1)
        self.part[moved] = q
        self.members[p] = kept
        self.members.append(moved)
        self.ptype.append(self.ptype[p])
        self._count(steps, +1)
        return q

    def merge(self, p: int, q: int) -> None:
        """Put q's events into p; q stays as an empty slot (ids of other partitions do not move)."""
        self._dirty.update((p, q))
        self._frames.clear()
        self._arrays = self._ordered = None
        moved = self.members[q]
        steps = self._touching(moved)
        self._count(steps, -1)
        self.part[moved] = p
        self.members[p] = np.sort(np.concatenate([self.members[p], moved]))
        self.members[q] = moved[:0]
        self.ptype[q] = -1
        self._count(steps, +1)

    def merge_many(self, pairs: np.ndarray) -> None:
        """:meth:`merge` of each (kept, merged) row in turn, done at once: one pass over the log."""
        if not len(pairs):
            return
        rep = np.arange(len(self.members), dtype=np.int64)
        for p, q in pairs.tolist():  # a kept partition may itself be merged later: follow the chain at the end
            rep[q] = p
        while True:
            up = rep[rep]
            if np.array_equal(up, rep):
                break
            rep = up
        self.part = rep[self.part].astype(self.part.dtype)
        ptype = list(self.ptype)
        for q in pairs[:, 1].tolist():
            ptype[q] = -1
        self.repartition(ptype)

    def repartition(self, ptype: list[int]) -> None:
        """Take :attr:`part` as it now is (changed in place, e.g. by the replay's rounds in C), with ``ptype``
        the type of each of its partitions: members, edge counts and caches made again in one pass."""
        order = np.argsort(self.part, kind="stable")
        bounds = np.searchsorted(self.part[order], np.arange(len(ptype) + 1))
        index = self.members[0].dtype
        self.members = [order[bounds[p] : bounds[p + 1]].astype(index) for p in range(len(ptype))]
        self.ptype = list(ptype)
        self._frames.clear()
        self._arrays = self._ordered = None
        self._dirty.update(range(len(self.members)))
        self.recount()

    def edge_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The partition graph's edges as (src, dst) arrays, sorted."""
        if self._arrays is None:
            if not self.edges:
                return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
            flat = np.fromiter((x for edge in self.edges for x in edge), dtype=np.int64, count=2 * len(self.edges))
            keys = flat[0::2] * (len(self.members) + 1) + flat[1::2]
            keys.sort()
            self._arrays = keys // (len(self.members) + 1), keys % (len(self.members) + 1)
        return self._arrays

    def _scan(self, part: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every edge of the graph ``part`` gives (small logs): (src, dst) sorted, and the first event
        (in log order) taking each."""
        steps = self._steps
        assert steps is not None
        keys = part[steps].astype(np.int64) * width + part[steps + 1]
        uniq, first = np.unique(keys, return_index=True)
        return uniq // width, uniq % width, steps[first]

    def successors(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in range(self.size)]
        for s, d in sorted(self.edges):
            out[s].append(d)
        return out

    def _split_frame(self, p: int) -> tuple[np.ndarray, ...]:
        """The steps touching ``p``'s events, independent of how ``p`` is split (cached until the graph changes).

        (out_at, out_dst, out_total, in_at, in_src, in_total, inner_from, inner_to, outside), positions
        into ``p``'s members: ``out_at`` the events stepping out of p, into partition ``out_dst``
        (``out_total`` counts them per partition); ``in_at`` the events entered from outside p, from
        ``in_src`` (``in_total``); ``inner_from`` -> ``inner_to`` the steps within p; ``outside`` the
        edges touching neither side, as sorted keys ``src * (size + 1) + dst``.
        """
        hit = self._frames.get(p)
        if hit is None:
            members = self.members[p]
            width = len(self.members) + 1
            at = np.flatnonzero(self.has_succ[members])
            dst = self.part[members[at] + 1]
            inner = dst == p
            outer = ~inner
            out_dst = dst[outer].astype(np.intp)
            inner_from = at[inner]  # members are sorted: a step within p goes to the next member
            came = np.flatnonzero(self.has_pred[members])
            src = self.part[members[came] - 1]
            entered = src != p
            in_src = src[entered].astype(np.intp)
            src_all, dst_all = self.edge_arrays()
            kept = (src_all != p) & (dst_all != p)
            hit = self._frames[p] = (
                at[outer],
                out_dst,
                np.bincount(out_dst, minlength=width),
                came[entered],
                in_src,
                np.bincount(in_src, minlength=width),
                inner_from,
                inner_from + 1,
                src_all[kept] * width + dst_all[kept],
            )
        return hit

    def successors_if_split(self, p: int, moving: np.ndarray) -> Csr:
        """:meth:`successors` as they would be after ``split(p, moving)`` (new partition: ``size``),
        without changing the graph: the edges not touching ``p``, and those the steps touching ``p``
        would take, so the cost follows ``p``'s size, not the log's.

        The steps touching p come from :data:`SPLIT_STEPS`. No key per step is built: on a 10^7-event
        log a partition holds millions of events and each candidate split is tried."""
        q = len(self.members)
        width = q + 1
        out_stay, out_move, in_stay, in_move, bits, outside = SPLIT_STEPS(self, p, moving)
        sides = (p, q)
        keys = np.concatenate(
            [
                outside,
                np.flatnonzero(out_stay) + p * width,
                np.flatnonzero(out_move) + q * width,
                np.flatnonzero(in_stay) * width + p,
                np.flatnonzero(in_move) * width + q,
                np.array([sides[i >> 1] * width + sides[i & 1] for i in range(4) if bits >> i & 1], dtype=np.int64),
            ]
        )
        keys.sort()
        return Csr.from_edges(keys // width, keys % width, width)

    def ordered_csr(self) -> Csr:
        """:meth:`ordered_successors` as :class:`~quicsm.inference.checker.Csr` arrays (cached until the graph changes)."""
        if self._ordered is None:
            if self._steps is not None:
                src, dst, first = self._scan(self.part, self.size + 1)
                order = np.lexsort((first, src))
                self._ordered = Csr.from_edges(src[order], dst[order], self.size)
            else:
                self._ordered = Csr.from_lists(self.ordered_successors())
        return self._ordered

    def ordered_successors(self) -> list[list[int]]:
        """Successors of each partition in Synoptic's order (``Partition.getAllSuccessors``): by the
        first event of the partition, in log order, that steps into them.

        Synoptic keeps a partition's events in log order while it refines (splits keep the order) and
        lists successors as its events reach them; its model checker explores them in that order,
        which decides between equally short counterexamples.
        """
        part = self.part
        succ: dict[int, list[int]] = {}
        pred: dict[int, list[int]] = {}
        for s, d in self.edges:
            succ.setdefault(s, []).append(d)
            pred.setdefault(d, []).append(s)
        for d in self._dirty:
            if d >= len(self.members) or self.ptype[d] < 0:
                continue
            members = self.members[d]  # sorted: the first match below is the first event in log order
            if d in succ:  # edges d -> s
                out = members[self.has_succ[members]]
                nxt = part[out + 1]
                for s in succ[d]:
                    self._first[(d, s)] = int(out[np.argmax(nxt == s)])
            if d in pred:  # edges r -> d
                into = members[self.has_pred[members]] - 1
                prev = part[into]
                for r in pred[d]:
                    self._first[(r, d)] = int(into[np.argmax(prev == r)])
        self._dirty.clear()
        out_lists: list[list[int]] = [[] for _ in range(self.size)]
        for s, d in sorted(self.edges, key=self._first.__getitem__):
            out_lists[s].append(d)
        return out_lists

    def types_array(self) -> np.ndarray:
        return np.asarray(self.ptype, dtype=np.int64)

    def trace_starts(self) -> np.ndarray:
        """Index of the INITIAL event of each event's trace (built on first use)."""
        if self._starts is None:
            lengths = np.diff(self.offsets)
            dtype = np.int32 if len(self.types) < 2**31 else np.int64
            self._starts = np.repeat(self.offsets[:-1].astype(dtype), lengths)
        return self._starts

    def positions(self, code: int) -> np.ndarray:
        """Sorted indices of the events of type ``code`` (cached: one pass over the log per type)."""
        hit = self._positions.get(code)
        if hit is None:
            hit = self._positions[code] = np.flatnonzero(self.types == code).astype(self.trace_starts().dtype)
        return hit

    def _last_before(self, code: int, events: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """Index of the last ``code`` event at or before each event within its trace, -1 if none."""
        pos = self.positions(code)
        i = np.searchsorted(pos, events, side="right") - 1
        found = np.where(i >= 0, pos[np.maximum(i, 0)], -1)
        return np.where(found >= starts, found, -1)

    def concrete_state(self, kind: str, a: int, b: int, events: np.ndarray) -> np.ndarray:
        """State of the ``a kind b`` automaton (see :mod:`quicsm.inference.checker`) right after each event.

        AFby: 1 while an ``a`` waits for its ``b``; NFby and AP: 1 once an ``a`` has occurred. Traces
        satisfy the mined invariant, so the violation state never occurs here.
        """
        starts = self.trace_starts()[events]
        last_a = self._last_before(a, events, starts)
        if kind == "AFby":
            return ((last_a >= 0) & (last_a > self._last_before(b, events, starts))).astype(np.int8)
        return (last_a >= 0).astype(np.int8)


SplitSteps = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, np.ndarray]
"""The steps touching partition p if it were split: per partition, whether the staying / moving side steps
out into it, whether it steps into the staying / moving side (bool rows of the graph's width); the steps
within p as bits ``1 << (2 * from_moving + to_moving)``; the edges touching neither side as sorted keys
``src * width + dst``."""


def _split_steps_py(graph: PartitionGraph, p: int, moving: np.ndarray) -> SplitSteps:
    """The steps out of and into p counted per partition on the moving side (the staying side has the
    rest of :meth:`PartitionGraph._split_frame`'s counts)."""
    width = len(graph.members) + 1
    out_at, out_dst, out_total, in_at, in_src, in_total, inner_from, inner_to, outside = graph._split_frame(p)
    out_moving = np.bincount(out_dst[moving[out_at]], minlength=width)
    in_moving = np.bincount(in_src[moving[in_at]], minlength=width)
    a, b = moving[inner_from], moving[inner_to]
    n_a, n_b, n_ab = int(np.count_nonzero(a)), int(np.count_nonzero(b)), int(np.count_nonzero(a & b))
    counts = (len(a) - n_a - n_b + n_ab, n_b - n_ab, n_a - n_ab, n_ab)  # bit 2 * from + to, 1 = moving
    bits = sum(1 << i for i, n in enumerate(counts) if n > 0)
    return out_total > out_moving, out_moving > 0, in_total > in_moving, in_moving > 0, bits, outside


def _split_steps_c(graph: PartitionGraph, p: int, moving: np.ndarray) -> SplitSteps:
    """One pass over p's events in the C extension (``fastcheck.split_steps``); logs of 2^31 events and
    more (int64 positions, which it does not take) go to :func:`_split_steps_py`."""
    members = graph.members[p]
    if members.dtype != np.int32:
        return _split_steps_py(graph, p, moving)
    width = len(graph.members) + 1
    seen = np.zeros((4, width), dtype=np.uint8)
    bits = fastcheck.split_steps(
        graph.part, graph.has_succ, graph.has_pred, members, np.ascontiguousarray(moving, dtype=bool), p, seen
    )
    src_all, dst_all = graph.edge_arrays()
    kept = (src_all != p) & (dst_all != p)
    out_stay, out_move, in_stay, in_move = seen.astype(bool)
    return out_stay, out_move, in_stay, in_move, bits, src_all[kept] * width + dst_all[kept]


PYTHON_SPLIT_STEPS = _split_steps_py
SPLIT_STEPS: Callable[[PartitionGraph, int, np.ndarray], SplitSteps] = (
    _split_steps_c if fastcheck is not None else PYTHON_SPLIT_STEPS
)
"""How :meth:`PartitionGraph.successors_if_split` finds the steps touching a partition, chosen once: C
where the extension is built. Tests set it to :data:`PYTHON_SPLIT_STEPS` to run the twin on the same inputs."""
