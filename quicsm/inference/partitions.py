"""Synoptic's partition graph over event instances held in integer arrays.

Every framed event (INITIAL, the states, TERMINAL of every trace) is one slot of ``part``; event
``i``'s successor is ``i + 1`` unless ``i`` is a TERMINAL. A partition is a set of events of one type;
the partition graph has an edge p -> q when some event of p is directly followed by an event of q.
Splitting and merging move index arrays and update edge counts for just the events that moved, so
a split costs the size of the partition split, never a pass over the whole log.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from quicsm.inference.packed import EncodedLog

__all__ = ["PartitionGraph"]


class PartitionGraph:
    def __init__(self, log: EncodedLog) -> None:
        self.types, self.offsets = log.framed()
        self.initial_type = log.initial
        self.terminal_type = log.terminal
        n = len(self.types)
        self.has_succ = self.types != self.terminal_type
        self.has_pred = self.types != self.initial_type
        self.part = self.types.astype(np.int32)  # one partition per event type to start with
        order = np.argsort(self.part, kind="stable")
        bounds = np.searchsorted(self.part[order], np.arange(log.terminal + 2))
        self.members: list[np.ndarray] = [order[bounds[p] : bounds[p + 1]] for p in range(log.terminal + 1)]
        self.ptype: list[int] = list(range(log.terminal + 1))
        self.edges: Counter[tuple[int, int]] = Counter()
        steps = np.nonzero(self.has_succ[: n - 1])[0] if n else np.zeros(0, dtype=np.int64)
        self._count(steps, +1)

    @property
    def size(self) -> int:
        return len(self.members)

    def initial(self) -> int:
        return self.initial_type

    def _count(self, steps: np.ndarray, sign: int) -> None:
        """Add (or remove) the edges taken by the steps ``i -> i + 1`` to the edge counts."""
        if len(steps) == 0:
            return
        width = len(self.members) + 1
        keys = self.part[steps].astype(np.int64) * width + self.part[steps + 1]
        uniq, cnt = np.unique(keys, return_counts=True)
        for k, c in zip(uniq.tolist(), cnt.tolist()):
            edge = (k // width, k % width)
            self.edges[edge] += sign * c
            if self.edges[edge] == 0:
                del self.edges[edge]

    def _touching(self, events: np.ndarray) -> np.ndarray:
        """Steps (by source index) into or out of ``events``."""
        into = events[self.has_pred[events]] - 1
        out = events[self.has_succ[events]]
        return np.unique(np.concatenate([into, out]))

    def split(self, p: int, moving: np.ndarray) -> int:
        """Move the members of ``p`` selected by the boolean mask ``moving`` into a new partition."""
        members = self.members[p]
        moved, kept = members[moving], members[~moving]
        assert len(moved) and len(kept), "a split must leave both sides non-empty"
        q = len(self.members)
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
        moved = self.members[q]
        steps = self._touching(moved)
        self._count(steps, -1)
        self.part[moved] = p
        self.members[p] = np.sort(np.concatenate([self.members[p], moved]))
        self.members[q] = moved[:0]
        self.ptype[q] = -1
        self._count(steps, +1)

    def adjacency(self) -> np.ndarray:
        adj = np.zeros((self.size, self.size), dtype=bool)
        if self.edges:
            src, dst = np.array(list(self.edges), dtype=np.int64).T
            adj[src, dst] = True
        return adj

    def successors(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in range(self.size)]
        for s, d in sorted(self.edges):
            out[s].append(d)
        return out

    def types_array(self) -> np.ndarray:
        return np.asarray(self.ptype, dtype=np.int64)

    def realize(self, walk: list[int]) -> tuple[int, np.ndarray] | None:
        """Follow ``walk`` through concrete events; where no event continues it, say how to cut it.

        Returns ``(i, mask)``: partition ``walk[i]`` should be split by ``mask`` over its members (the
        events whose successor lies in ``walk[i + 1]``), which the events reaching ``walk[i]`` along the
        walk all lack. None if some trace really follows the whole walk.
        """
        reach = self.members[walk[0]]
        for i in range(1, len(walk)):
            nxt = reach[self.has_succ[reach]] + 1
            nxt = nxt[self.part[nxt] == walk[i]]
            if len(nxt) == 0:
                members = self.members[walk[i - 1]]
                ok = self.has_succ[members]
                mask = np.zeros(len(members), dtype=bool)
                mask[ok] = self.part[members[ok] + 1] == walk[i]
                return i - 1, mask
            reach = nxt
        return None
