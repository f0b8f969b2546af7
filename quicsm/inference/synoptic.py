"""Synoptic (Beschastnikh et al., FSE'11), our implementation: invariant-constrained model inference.

1. Mine AFby / NFby / AP invariants from the traces (:mod:`quicsm.inference.invariants`).
2. Start from one partition per event type (the directly-follows graph), which over-approximates the
   traces and may break invariants.
3. Refine: while some mined invariant fails on the partition graph, take a shortest counterexample
   walk in the product of the graph with the invariant's two-state automaton
   (:func:`~quicsm.inference.checker.counterexample`) and split the first partition on the walk whose
   events do not all agree with the automaton state the walk gives them there: events are split by
   the state their own trace prefix leaves the automaton in. Such a partition always exists (a walk
   whose partitions all agree would be a trace breaking an invariant mined from the traces), both
   sides are non-empty, and sides stay consistent, so refinement ends after few splits with every
   invariant holding.
4. Coarsen: merge partitions of one type whose k-step futures match (k-Tails, k=1 by default) when
   the merged graph still satisfies every invariant.

Every event belongs to exactly one partition throughout, so each trace is a walk of the final graph
by construction: ``paths`` lists its partitions. Partition state lives in integer arrays
(:mod:`quicsm.inference.partitions`); the graph-level work scales with partitions, not events.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from quicsm.errors import InferenceError
from quicsm.inference.checker import counterexample, violated, walk_states
from quicsm.inference.invariants import InvariantSet, mine_encoded
from quicsm.inference.model import InferenceResult
from quicsm.inference.packed import EncodedLog, encode_sequences, result_from_nodes
from quicsm.inference.partitions import PartitionGraph

__all__ = ["DEFAULT_K", "infer_synoptic", "synoptic_encoded"]

DEFAULT_K = 1
MAX_LOGGED_STEPS = 1000
"""Refinement splits and coarsening merges listed in ``details["steps"]`` (all are counted)."""


def infer_synoptic(sequences: Sequence[Sequence[str]], k: int = DEFAULT_K, coarsen: bool = True) -> InferenceResult:
    """Learn a Synoptic model of ``sequences``; ``k`` is the k-Tails depth of the coarsening merges."""
    started = time.perf_counter()
    log = encode_sequences(sequences)
    return synoptic_encoded(log, k=k, coarsen=coarsen, started=started)


def synoptic_encoded(
    log: EncodedLog, k: int = DEFAULT_K, coarsen: bool = True, started: float | None = None
) -> InferenceResult:
    if k < 0:
        raise InferenceError(f"synoptic: k must be >= 0, got {k}")
    t0 = time.perf_counter() if started is None else started
    timings: dict[str, float] = {"encode": time.perf_counter() - t0}
    mark = time.perf_counter()
    inv = mine_encoded(log)
    timings["mine"] = time.perf_counter() - mark

    mark = time.perf_counter()
    graph = PartitionGraph(log)
    initial_partitions = sum(1 for t in graph.ptype if t >= 0)
    steps: list[dict[str, Any]] = []
    splits = _refine(graph, inv, steps)
    timings["refine"] = time.perf_counter() - mark
    refined_partitions = sum(1 for t in graph.ptype if t >= 0)

    mark = time.perf_counter()
    merges = _coarsen(graph, inv, k, steps) if coarsen else 0
    timings["coarsen"] = time.perf_counter() - mark

    left = violated(graph.edge_arrays(), graph.types_array(), inv)
    if left:  # cannot happen: refinement ends with none and merges are kept only without any
        raise InferenceError(f"synoptic: internal error, {len(left)} invariant(s) still fail after inference")
    labels = [log.labels[t] if t >= 0 else "" for t in graph.ptype]
    mark = time.perf_counter()
    details: dict[str, Any] = {
        "invariants": [str(i) for i in inv.invariants()],
        "invariant_counts": inv.counts(),
        "traces": log.traces,
        "events": log.events,
        "partitions_initial": initial_partitions,
        "partitions_refined": refined_partitions,
        "refinement_splits": splits,
        "coarsening_merges": merges,
        "steps": steps,
        "k": k,
    }
    res = result_from_nodes("synoptic", labels, graph.part, graph.offsets, details, k=k, coarsen=coarsen)
    timings["paths"] = time.perf_counter() - mark
    res.details["partitions_final"] = len(res.model.nodes)
    res.details["seconds"] = {name: round(v, 4) for name, v in timings.items()}
    res.details["seconds_total"] = round(time.perf_counter() - t0, 4)
    return res


def _refine(graph: PartitionGraph, inv: InvariantSet, steps: list[dict[str, Any]]) -> int:
    """Split partitions along counterexamples until every mined invariant holds; returns the splits."""
    splits = 0
    agreed: set[tuple[str, int, int, int, int]] = set()  # (invariant, partition, state) known consistent
    limit = len(graph.part)  # each split adds a non-empty partition: never more than there are events
    while True:
        bad = violated(graph.edge_arrays(), graph.types_array(), inv)
        if not bad:
            return splits
        progressed = False
        for kind, a, b in bad:
            walk = counterexample(graph.successors(), graph.ptype, kind, a, b, graph.initial(), graph.terminal_type)
            if walk is None:  # an earlier split in this round already fixed it
                continue
            at, moving = _split_for(graph, walk, kind, a, b, agreed)
            if 2 * int(moving.sum()) > len(moving):  # move the smaller side: cheaper, same model
                moving = ~moving
            graph.split(walk[at], moving)
            splits += 1
            if len(steps) < MAX_LOGGED_STEPS:
                steps.append(
                    {
                        "step": "split",
                        "invariant": f"{inv.labels[a]} {kind} {inv.labels[b]}",
                        "state": inv.labels[graph.ptype[walk[at]]],
                        "moved": int(moving.sum()),
                        "kept": int(len(moving) - moving.sum()),
                        "walk_length": len(walk),
                    }
                )
            progressed = True
            if splits > limit:
                raise InferenceError("synoptic: internal error, refinement does not converge")
        if not progressed:
            raise InferenceError("synoptic: internal error, violated invariants without counterexample")


def _split_for(
    graph: PartitionGraph, walk: list[int], kind: str, a: int, b: int, agreed: set[tuple[str, int, int, int, int]]
) -> tuple[int, np.ndarray]:
    """Where and how to cut a counterexample walk: the first partition on it whose events disagree
    with the invariant automaton's state along the walk, split into agreeing and disagreeing events.

    Such a partition exists: if every partition on the walk held only events whose concrete state
    (after their own trace's prefix) equals the walk's state there, then, edge by edge, some trace
    would reach the violating state, which no trace does for an invariant mined from all of them.
    Both sides are non-empty: the edge into the partition comes from an agreeing predecessor.
    Splitting by automaton state keeps each side consistent, so refinement needs few splits.
    """
    states = walk_states(kind, a, b, [graph.ptype[p] for p in walk])
    for at, (p, q) in enumerate(zip(walk, states)):
        if (kind, a, b, p, q) in agreed:  # splits only shrink partitions: agreement lasts
            continue
        members = graph.members[p]
        disagree = graph.concrete_state(kind, a, b, members) != q
        if not disagree.any():
            agreed.add((kind, a, b, p, q))
        else:
            if disagree.all():
                break
            return at, disagree
    raise InferenceError(
        f"synoptic: internal error, no split found for the counterexample to {kind}({graph.ptype[walk[0]]}, ...)"
    )


def _signatures(succ: list[list[int]], ptype: list[int], k: int) -> list[int]:
    """k-Tails equivalence class of every partition: same type, and (k > 0) same set of (k-1)-classes after it."""
    sig = list(ptype)
    for _ in range(k):
        table: dict[tuple[int, frozenset[int]], int] = {}
        sig = [
            table.setdefault((ptype[p], frozenset(sig[s] for s in succ[p])), len(table)) if ptype[p] >= 0 else -1
            for p in range(len(ptype))
        ]
    return sig


def _coarsen(graph: PartitionGraph, inv: InvariantSet, k: int, steps: list[dict[str, Any]]) -> int:
    """Greedily merge k-equivalent partitions whose merge keeps every invariant; returns the merges."""
    merges = 0
    failed: set[tuple[int, int]] = set()  # a merge that broke an invariant breaks it in any coarser graph too
    edges = graph.edge_arrays()
    ptype = graph.types_array()
    synthetic = {graph.initial_type, graph.terminal_type}
    while True:
        sig = _signatures(graph.successors(), graph.ptype, k)
        groups: dict[int, list[int]] = {}
        for p, s in enumerate(sig):
            if s >= 0 and graph.ptype[p] not in synthetic:
                groups.setdefault(s, []).append(p)
        merged = _merge_one(graph, inv, groups, edges, ptype, failed, steps)
        if merged is None:
            return merges
        edges, ptype = merged
        merges += 1


def _merge_one(
    graph: PartitionGraph,
    inv: InvariantSet,
    groups: dict[int, list[int]],
    edges: tuple[np.ndarray, np.ndarray],
    ptype: np.ndarray,
    failed: set[tuple[int, int]],
    steps: list[dict[str, Any]],
) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray] | None:
    """Make the first merge (in partition order) that keeps every invariant; the new graph, or None."""
    for members in groups.values():
        for i, keep in enumerate(members):
            for q in members[i + 1 :]:
                if (keep, q) in failed:
                    continue
                trial = (np.where(edges[0] == q, keep, edges[0]), np.where(edges[1] == q, keep, edges[1]))
                trial_types = ptype.copy()
                trial_types[q] = -1
                if violated(trial, trial_types, inv):
                    failed.add((keep, q))
                    continue
                if len(steps) < MAX_LOGGED_STEPS:
                    steps.append(
                        {
                            "step": "merge",
                            "state": inv.labels[graph.ptype[keep]],
                            "sizes": [len(graph.members[keep]), len(graph.members[q])],
                        }
                    )
                graph.merge(keep, q)
                return trial, trial_types
    return None


_ = np  # numpy arrays flow through graph and result_from_nodes
