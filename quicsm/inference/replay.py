"""The original Synoptic's refinement and coarsening, replayed choice for choice for one ``--randomSeed``.

Synoptic (a2b6a0d, ``Bisimulation``) is deterministic once its seed is fixed; what makes its runs
differ is where it draws from its ``java.util.Random`` and a few orders that come from Java
collections. This module makes the same draws in the same places and keeps the same orders:

- Invariants are checked in the order Synoptic's miner lists them (:func:`mined_order`): per pair of
  event types in the order its ``LinkedHashMap`` of type counts first saw them, walking the trace
  paths in the order of a ``HashSet`` of them (identity hashes, :mod:`quicsm.inference.jvm`), NFby,
  AFby, AP; then ``INITIAL AFby x`` in the order of the first path's ``HashSet`` of types.
- A round (``performSplits``): the counterexample of every still-violated invariant (Synoptic's model
  checker, :func:`~quicsm.inference.checker.synoptic_counterexample`, which explores successors in
  the order a partition's events reach them), sorted by length (stable), shuffled; per
  counterexample its candidate splits (outgoing, incoming), shuffled; each candidate tried until one
  makes the invariant hold. Trying a candidate applies and rewinds it, and the rewind appends the
  split-off events after the others: the partition's event order changes, and with it the order
  successors are explored in later. All satisfying splits of a round are applied (one partition's
  combined in ``PartitionMultiSplit.incorporate`` order); a round without one applies the first
  candidate of the first counterexample that has one (the split events form the new partition).
- The next round checks the invariants still violated, in the sorted order of the last round.
- Coarsening (``mergePartitions``, k = 1): the first pair of one type, in the graph's partition
  order, whose merge keeps every invariant; a pair that failed is never tried again, and a failed
  trial moves the second partition to the end of the order (the rewind re-adds it).

Every choice Synoptic makes at random is drawn here from the same generator in the same order, so
``infer_synoptic(sequences, seed=S)`` (:mod:`quicsm.inference.synoptic`) ends with the partitions ``java -jar synoptic.jar --randomSeed=S``
ends with, as long as the invariant order is Synoptic's (it is, for the JVM the recordings used; see
:data:`~quicsm.inference.jvm.SYNOPTIC_HASH_OFFSET`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quicsm.errors import InferenceError
from quicsm.inference.checker import KIND_CODES, Csr, counterexample, fastcheck, synoptic_counterexample, violated
from quicsm.inference.invariants import InvariantSet
from quicsm.inference.jvm import JavaRandom, hashset_order, identity_hashes, string_hash, trace_path_hash_index
from quicsm.inference.packed import EncodedLog, first_positions
from quicsm.inference.partitions import PartitionGraph

__all__ = [
    "MIN_ROUNDS",
    "PYTHON_REPLAY",
    "REPLAY",
    "CReplay",
    "PyReplay",
    "OverBudget",
    "ReplayStats",
    "mined_order",
    "replay_coarsen",
    "replay_refine",
    "split_masks",
    "stitch",
]

EVENT_TYPE_HASH = 1301 + 1907
"""``EventType.hashCode()`` of an ordinary (neither INITIAL nor TERMINAL) type; ``StringEventType``
adds its label's ``String.hashCode()``."""

Invariant = tuple[str, int, int]
Hint = tuple[np.ndarray, np.ndarray]
MIN_ROUNDS = 64
"""A budgeted replay is not started when this many rounds' passes over the log alone exceed the budget."""
EXIT_ERRORS = {
    2: "violated invariants without a candidate split",
    3: "refinement does not converge",
    4: "a counterexample is taken by a trace",
}
"""``fastcheck.replay_rounds``' statuses that cannot happen, as :meth:`PyReplay.refine` words them."""


def _first_occurrence(codes: np.ndarray) -> list[int]:
    """Distinct codes of one trace in the order they first occur."""
    uniq, first = np.unique(codes, return_index=True)
    return uniq[np.argsort(first, kind="stable")].tolist()


def mined_order(log: EncodedLog, inv: InvariantSet) -> list[Invariant]:
    """The mined invariants in the order Synoptic's ``ChainWalkingTOInvMiner`` lists them, the trace paths
    placed in the JVM's identity-hash sequence at :data:`~quicsm.inference.jvm.SYNOPTIC_HASH_OFFSET` (the
    original built by its build.xml, run with ``java -jar``).
    """
    nonempty = [t for t in range(log.traces) if log.offsets[t + 1] > log.offsets[t]]
    if not nonempty:
        return []
    hashes = identity_hashes(trace_path_hash_index(log.events, len(nonempty)), len(nonempty)).tolist()
    paths = [nonempty[i] for i in hashset_order(hashes)]
    types: list[int] = []
    known: set[int] = set()
    first_path: list[int] = []
    for n, t in enumerate(paths):
        occurring = _first_occurrence(log.codes[log.offsets[t] : log.offsets[t + 1]])
        if n == 0:
            first_path = occurring
        for c in occurring:
            if c not in known:
                known.add(c)
                types.append(c)
    out: list[Invariant] = []
    for e1 in types:
        for e2 in types:
            if inv.nfby[e1, e2]:
                out.append(("NFby", e1, e2))
            if inv.afby[e1, e2]:
                out.append(("AFby", e1, e2))
            if inv.ap[e1, e2]:
                out.append(("AP", e1, e2))
    seen_order = [
        first_path[i] for i in hashset_order([string_hash(log.names[c]) + EVENT_TYPE_HASH for c in first_path])
    ]
    out.extend(("AFby", log.initial, c) for c in seen_order if inv.afby[log.initial, c])
    return out


@dataclass
class ReplayStats:
    rounds: int = 0
    arbitrary: int = 0
    trials: int = 0
    draws: int = 0
    witnessed: int = 0
    """Split trials decided by a walk an earlier trial found breaking the invariant (no search)."""
    work: int = 0
    """Refinement's work so far, in steps of the graph walked: per round the log's events (the ordered
    successors) and the partitions times the searches (counterexamples and split trials); it predicts
    the replay's time within a factor of about two, machine-independently."""
    steps: list[dict[str, Any]] = field(default_factory=list)


class OverBudget(Exception):
    """The replay's refinement needed more than its work budget (:attr:`ReplayStats.work`)."""


class _Ordered:
    """Each partition's events in Synoptic's order (its ``LinkedHashSet``), beside the graph."""

    def __init__(self, graph: PartitionGraph) -> None:
        self.graph = graph
        self.order: list[np.ndarray] = [m.copy() for m in graph.members]  # log order to start with
        # INITIAL: one event per trace here, Synoptic's one dummy event whose successors come in trace order
        self.mark = np.zeros(len(graph.part), dtype=bool)
        self.steps = np.flatnonzero(graph.has_succ).astype(np.int64)
        self.rank = np.zeros(len(graph.part), dtype=np.int64)
        self._dirty: set[int] = set(range(len(self.order)))
        self.ptype = np.asarray(graph.ptype, dtype=np.int32)

    def mask(self, p: int, events: np.ndarray) -> np.ndarray:
        """Which of ``order[p]`` are in ``events``."""
        self.mark[events] = True
        out = self.mark[self.order[p]]
        self.mark[events] = False
        return out

    def reorder_first(self, p: int, events: np.ndarray, hint: Hint) -> np.ndarray:
        """Try-and-rewind of a split keeping ``events`` in ``p``: they come first; returns the rest (old order).
        ``hint``: (order, mask) the events were taken from, used while ``p``'s order is still that one."""
        o = self.order[p]
        inside = hint[1] if hint[0] is o else self.mask(p, events)
        rest = o[~inside]
        self.order[p] = np.concatenate([o[inside], rest])
        self._dirty.add(p)
        return rest

    def split_off(self, p: int, events: np.ndarray) -> int:
        """Move ``events`` (in this order) into a new partition, as Synoptic's split commits do."""
        g = self.graph
        self.mark[events] = True
        q = g.split(p, self.mark[g.members[p]])
        keep = ~self.mark[self.order[p]]
        self.mark[events] = False
        self.order[p] = self.order[p][keep]
        self.order.append(events)
        self._dirty.update((p, q))
        self.ptype = np.append(self.ptype, np.int32(g.ptype[q]))
        return q

    def ordered_csr(self) -> Csr:
        """Successors of every partition in the order its events (in Synoptic's order) reach them."""
        for p in self._dirty:
            o = self.order[p]
            self.rank[o] = np.arange(len(o))
        self._dirty.clear()
        part = self.graph.part
        steps = self.steps
        width = len(self.order) + 1
        keys = part[steps].astype(np.int64) * width + part[steps + 1]
        by = np.lexsort((self.rank[steps], keys))
        keys = keys[by]
        first = np.ones(len(keys), dtype=bool)
        first[1:] = keys[1:] != keys[:-1]
        keys = keys[first]
        ranks = self.rank[steps[by][first]]
        src, dst = keys // width, keys % width
        order = np.lexsort((ranks, src))
        return Csr.from_edges(src[order], dst[order], len(self.order))


def stitch(graph: PartitionGraph, walk: list[int]) -> tuple[int, int, int]:
    """(prev, cur, nxt) of a counterexample walk: ``cur`` is the partition after which none of the events
    that really take the walk from its start goes on into ``nxt``; ``prev`` the walk's partition before
    ``cur`` (-1 if none). It exists: a walk whose events all went on would be a trace breaking an
    invariant mined from the traces."""
    return REPLAY.stitch(graph, walk)


def split_masks(graph: PartitionGraph, members: np.ndarray, prev: int, nxt: int) -> list[np.ndarray]:
    """Masks over ``members`` (one partition's events) of Synoptic's candidate splits at a stitch: the
    events stepping into ``nxt`` (outgoing), then those entered from ``prev`` (incoming), each only
    when it leaves both sides non-empty."""
    part = graph.part
    out: list[np.ndarray] = []
    has_succ = graph.has_succ[members]
    outgoing = np.zeros(len(members), dtype=bool)
    outgoing[has_succ] = part[members[has_succ] + 1] == nxt
    if outgoing.any() and not outgoing.all():
        out.append(outgoing)
    if prev >= 0:
        has_pred = graph.has_pred[members]
        incoming = np.zeros(len(members), dtype=bool)
        incoming[has_pred] = part[members[has_pred] - 1] == prev
        if incoming.any() and not incoming.all():
            out.append(incoming)
    return out


def _incorporate(sets: list[np.ndarray], split: list[np.ndarray], mark: np.ndarray) -> list[np.ndarray]:
    """``PartitionMultiSplit.incorporate``: every old set cut by every set of ``split``, in that order."""
    out: list[np.ndarray] = []
    for s in sets:
        for other in split:
            mark[other] = True
            piece = s[mark[s]]
            mark[other] = False
            if len(piece):
                out.append(piece)
    return out


def replay_refine(
    graph: PartitionGraph,
    order: list[Invariant],
    rng: JavaRandom,
    stats: ReplayStats,
    *,
    budget: int | None = None,
) -> None:
    """``Bisimulation.splitUntilAllInvsSatisfied`` on ``graph`` with Synoptic's draws from ``rng``.

    With ``budget``, raise :class:`OverBudget` once ``stats.work`` exceeds it (the graph is then half
    refined: start over from a new one)."""
    if budget is not None and len(graph.part) * MIN_ROUNDS > budget:
        raise OverBudget  # not even MIN_ROUNDS rounds would fit
    REPLAY.refine(graph, order, rng, stats, len(graph.part), budget)


def replay_coarsen(graph: PartitionGraph, inv: InvariantSet, log: EncodedLog, stats: ReplayStats) -> int:
    """``Bisimulation.mergePartitions(pGraph, invs, 1)``: merge the first same-type pair (in the graph's
    partition order) whose merge keeps every invariant, and start over; a pair that failed is never
    tried again.

    The graph's partition order is a ``LinkedHashSet``: INITIAL, TERMINAL, the types as the log first
    shows them, then the partitions refinement made, in the order it made them. A failed trial's
    rewind removes and re-adds the second partition, which moves it to the end; each pass scans the
    order it started with.
    """
    first = first_positions(log.codes, len(log.names))
    present = np.flatnonzero(first < len(log.codes))
    seen = present[np.argsort(first[present], kind="stable")].tolist()
    start = [graph.initial_type, graph.terminal_type, *seen]
    known = set(start)
    plist = start + [p for p in range(len(graph.ptype)) if p not in known and graph.ptype[p] >= 0]
    return REPLAY.coarsen(graph, inv, plist, stats)


class PyReplay:
    """The replay's refinement rounds, coarsening and stitch in Python (numpy): what runs where the C
    extension is not built, and the twin the tests hold :class:`CReplay` to."""

    def stitch(self, graph: PartitionGraph, walk: list[int]) -> tuple[int, int, int]:
        """:func:`stitch`."""
        part = graph.part
        hot = graph.members[walk[0]]
        prev = cur = nxt = -1
        for node in walk:
            prev, cur, nxt = cur, nxt, node
            hot = hot[part[hot] == node]
            if len(hot) == 0:
                return prev, cur, nxt
            hot = hot[graph.has_succ[hot]] + 1
        raise InferenceError("synoptic: internal error, a counterexample is taken by a trace")

    def refine(
        self,
        graph: PartitionGraph,
        order: list[Invariant],
        rng: JavaRandom,
        stats: ReplayStats,
        limit: int,
        budget: int | None,
    ) -> None:
        """The rounds of :func:`replay_refine` (``performSplits`` until every invariant holds).

        A round: the counterexample of every still-violated invariant, sorted by length (stable) and
        shuffled; per counterexample its candidate splits, shuffled, each tried (and rewound, which puts
        its events first in the partition's order) until one makes the invariant hold; then the
        round's satisfying splits, or else its first candidate (an arbitrary split)."""
        state = _Ordered(graph)
        unsat = list(order)
        while True:
            trials = stats.trials
            succ = state.ordered_csr()
            ptype = state.ptype
            cexs: list[tuple[Invariant, list[int]]] = []
            for i in unsat:
                walk = synoptic_counterexample(succ, ptype, i[0], i[1], i[2], graph.initial(), graph.terminal_type)
                if walk is not None:
                    cexs.append((i, walk))
            if not cexs:
                return
            cexs.sort(key=lambda c: len(c[1]))
            unsat = [i for i, _ in cexs]
            rng.shuffle(cexs)
            todo: dict[int, list[np.ndarray]] = {}
            arbitrary: tuple[int, np.ndarray] | None = None
            for i, walk in cexs:
                cands = self._candidates(state, walk)
                rng.shuffle(cands)
                if arbitrary is None and cands:
                    arbitrary = cands[0][:2]
                for p, events, hint in cands:
                    rest = state.reorder_first(p, events, hint)
                    stats.trials += 1
                    if self._holds_after_split(state, ptype, p, events, i):
                        split = [events, rest]
                        todo[p] = _incorporate(todo[p], split, state.mark) if p in todo else split
                        break
            stats.rounds += 1
            stats.work += len(graph.part) + len(ptype) * (len(cexs) + stats.trials - trials)
            if budget is not None and stats.work > budget:
                raise OverBudget
            if todo:
                for p, sets in todo.items():
                    for s in sets[1:]:
                        state.split_off(p, s)
            elif arbitrary is not None:
                stats.arbitrary += 1
                state.split_off(*arbitrary)
            else:
                raise InferenceError("synoptic replay: internal error, violated invariants without a candidate split")
            if stats.rounds > limit:
                raise InferenceError("synoptic replay: internal error, refinement does not converge")

    def _candidates(self, state: _Ordered, walk: list[int]) -> list[tuple[int, np.ndarray, Hint]]:
        """``Bisimulation.getSplitsUnconstrained``: (partition, events split out in its current order, the
        order and mask they were taken with)."""
        g = state.graph
        prev, cur, nxt = self.stitch(g, walk)
        o = state.order[cur]
        return [(cur, o[mask], (o, mask)) for mask in split_masks(g, o, prev, nxt)]

    def _holds_after_split(
        self, state: _Ordered, ptype: np.ndarray, p: int, events: np.ndarray, inv: Invariant
    ) -> bool:
        """Would ``inv`` hold if ``events`` were split off ``p``? ``ptype``: the graph's types as they are
        (splits are tried, not made, within a round)."""
        g = state.graph
        state.mark[events] = True
        moving = ~state.mark[g.members[p]]
        state.mark[events] = False
        trial = g.successors_if_split(p, moving)
        kind, a, b = inv
        return counterexample(trial, np.append(ptype, g.ptype[p]), kind, a, b, g.initial(), g.terminal_type) is None

    def coarsen(self, graph: PartitionGraph, inv: InvariantSet, plist: list[int], stats: ReplayStats) -> int:
        """:func:`replay_coarsen`'s scan from the partition order ``plist``: each trial checks every
        invariant on the merged graph."""
        synthetic = {graph.initial_type, graph.terminal_type}
        failed: set[tuple[int, int]] = set()
        edges = graph.edge_arrays()
        ptype = graph.types_array()
        merges = 0
        while True:
            merged = None
            moved: list[int] = []
            for i, p in enumerate(plist):
                tp = graph.ptype[p]
                if tp in synthetic:
                    continue
                for q in plist[i + 1 :]:
                    if graph.ptype[q] != tp or (p, q) in failed:
                        continue
                    trial = (np.where(edges[0] == q, p, edges[0]), np.where(edges[1] == q, p, edges[1]))
                    trial_types = ptype.copy()
                    trial_types[q] = -1
                    stats.trials += 1
                    if violated(trial, trial_types, inv):
                        failed.add((p, q))
                        failed.add((q, p))
                        if q in moved:
                            moved.remove(q)
                        moved.append(q)
                        continue
                    merged = p, q, trial, trial_types
                    break
                if merged is not None:
                    break
            if merged is None:
                return merges
            p, q, edges, ptype = merged
            gone = {q, *moved}
            plist = [x for x in plist if x not in gone] + [x for x in moved if x != q]
            graph.merge(p, q)
            merges += 1


class CReplay(PyReplay):
    """The same in the C extension (``fastcheck``): every round in one call, the coarsening's trials
    checked incrementally."""

    def stitch(self, graph: PartitionGraph, walk: list[int]) -> tuple[int, int, int]:
        start = graph.members[walk[0]]
        if start.dtype != np.int32:  # 2^31 events and more: positions the C does not take
            return super().stitch(graph, walk)
        found = fastcheck.stitch(graph.part, graph.terminal_type, graph.types, start, np.asarray(walk, dtype=np.int32))
        if found is None:
            raise InferenceError("synoptic: internal error, a counterexample is taken by a trace")
        return found

    def refine(
        self,
        graph: PartitionGraph,
        order: list[Invariant],
        rng: JavaRandom,
        stats: ReplayStats,
        limit: int,
        budget: int | None,
    ) -> None:
        """``fastcheck.replay_rounds``: the same searches, draws, trials and splits as :meth:`PyReplay.refine`
        without a numpy call or a Python object per round (successor lists made again only where a round
        changes them, a trial decided at once by a walk an earlier trial found breaking the invariant
        while it is still in the graph); ``graph`` then takes the refined partition."""
        invariants = np.array([(KIND_CODES[k], a, b) for k, a, b in order], dtype=np.int32).reshape(-1, 3)
        counts = np.array([stats.rounds, stats.arbitrary, stats.trials, stats.witnessed, stats.work], dtype=np.int64)
        seed = np.array([rng.state], dtype=np.int64)
        ptype = np.empty(len(graph.part) + len(graph.ptype), dtype=np.int32)
        status, parts = fastcheck.replay_rounds(
            graph.part,
            graph.types,
            graph.has_succ,
            graph.has_pred,
            np.asarray(graph.ptype, dtype=np.int32),
            invariants,
            graph.initial_type,
            graph.terminal_type,
            seed,
            -1 if budget is None else budget,
            limit,
            counts,
            ptype,
        )
        rng.state = int(seed[0])
        stats.rounds, stats.arbitrary, stats.trials, stats.witnessed, stats.work = counts.tolist()
        graph.repartition(ptype[:parts].tolist())
        if status == 1:
            raise OverBudget
        if status:
            raise InferenceError(f"synoptic replay: internal error, {EXIT_ERRORS[status]}")

    def coarsen(self, graph: PartitionGraph, inv: InvariantSet, plist: list[int], stats: ReplayStats) -> int:
        """``fastcheck.coarsen`` (at most 64 types, on a graph that holds every invariant, as refinement
        leaves it): the same scan and merges, a trial checking only what the merge adds, per partition bit
        masks of the types reaching it and of the invariants' automaton states it reaches, grown from the
        merged partition and rewound when an invariant breaks; and a pass starts where the last merge's
        kept partition stood, as every pair before it has failed already."""
        edges = graph.edge_arrays()
        ptype = graph.types_array()
        if len(inv.labels) > 64 or violated(edges, ptype, inv):
            return super().coarsen(graph, inv, plist, stats)
        out = np.empty(2 * len(ptype), dtype=np.int32)
        merges, trials = fastcheck.coarsen(
            np.ascontiguousarray(edges[0], dtype=np.int32),
            np.ascontiguousarray(edges[1], dtype=np.int32),
            np.ascontiguousarray(ptype, dtype=np.int32),
            np.asarray(plist, dtype=np.int32),
            _type_masks(inv.nfby, 0),
            _type_masks(inv.ap, 0),
            _type_masks(inv.afby, 1),
            graph.initial_type,
            graph.terminal_type,
            out,
        )
        stats.trials += trials
        graph.merge_many(out[: 2 * merges].reshape(-1, 2))
        return int(merges)


def _type_masks(matrix: np.ndarray, axis: int) -> np.ndarray:
    """Each row (``axis`` 1) or column (``axis`` 0) of a types x types matrix as a 64-bit mask of the
    other index."""
    bits = np.left_shift(np.uint64(1), np.arange(len(matrix), dtype=np.uint64))
    spread = np.where(matrix, bits[None, :] if axis == 1 else bits[:, None], np.uint64(0))
    return np.ascontiguousarray(np.bitwise_or.reduce(spread, axis=axis), dtype=np.uint64)


PYTHON_REPLAY = PyReplay()
REPLAY: PyReplay = CReplay() if fastcheck is not None else PYTHON_REPLAY
"""The replay this install runs, chosen once: C where the extension is built. Tests set it to
:data:`PYTHON_REPLAY` to run the twin on the same inputs."""
