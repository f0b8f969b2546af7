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
   invariant holding. That is ``refine="consistent"``; ``stitch`` chooses its splits as Synoptic does
   (:func:`_refine_stitch`) with a fixed order where Synoptic draws at random; the default replays
   Synoptic's own draws for seed 1 (:mod:`quicsm.inference.replay`) where that is affordable
   (:data:`REPLAY_BUDGET`), else runs ``stitch``.
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
from quicsm.inference.checker import counterexample, synoptic_counterexample, violated, walk_states
from quicsm.inference.invariants import InvariantSet, mine_encoded
from quicsm.inference.jvm import JavaRandom
from quicsm.inference.model import InferenceResult
from quicsm.inference.packed import EncodedLog, encode_sequences, first_positions, result_from_nodes
from quicsm.inference.partitions import PartitionGraph
from quicsm.inference.replay import (
    MIN_ROUNDS,
    OverBudget,
    ReplayStats,
    mined_order,
    replay_coarsen,
    replay_refine,
    split_masks,
    stitch,
)

__all__ = ["DEFAULT_K", "MAX_STATES", "infer_synoptic", "synoptic_encoded"]

DEFAULT_K = 1
"""Synoptic's default coarsening (``mergePartitions(pGraph, invs, 1)``): k = 1 merges partitions of one type."""
REFINEMENTS = ("consistent", "stitch")
"""``stitch``: Synoptic's split selection (below) with a fixed order where Synoptic draws at random
(301 of 305 small recorded inputs language-equal to Synoptic's model for some seed). ``consistent``:
split the first partition of a counterexample whose events disagree with it, by automaton state:
fewer rounds, further from Synoptic (252 of 305). 10^6 / 10^7 bench events: stitch 1.3 s / 13 s,
consistent 0.6 s / 4.2 s. Without either (the default), the replay of Synoptic's seed
:data:`DEFAULT_SEED` within :data:`REPLAY_BUDGET`, else ``stitch``."""
DEFAULT_REFINE: str | None = None
MAX_STATES = 100
"""Distinct states the synoptic engine takes; more is refused at once (``dfg`` and ``ktails`` take any
number). The invariants are types x types matrices (10^5 states asked for 9.3 GiB) and refinement makes a
split per violated invariant per round: 1,000 random states took 74 s, and sparse logs of 40-60 states
can already take 20 s and more (1,000 events). Congestion-control models have 5-30 states, with phases
and recovery sub-states up to about 40."""
DEFAULT_SEED = 1
"""The seed the default replays: Synoptic's choices for ``--randomSeed=1``."""
REPLAY_BUDGET = 300_000_000
"""Work (:attr:`~quicsm.inference.replay.ReplayStats.work`) the default's replay may take before it is
given up for ``stitch``: about 2.5 s of CPU on this project's machine with the C rounds
(``fastcheck.replay_rounds``). Measured work: every recorded input (10^3 - 6.8 x 10^3 events) 0.02 - 4.7 x
10^6 (real trace sets need few arbitrary splits, random logs hundreds); ``bench_infer.synth`` random logs
4.7 x 10^6 at 10^3 events, 3.4 x 10^7 at 3 x 10^3, 2.37 x 10^8 at 10^4 (the recorded 10^4-event input,
``recorded-10k.json.gz``: 2.1 s of refinement in process): the replay's work grows with the square of the
events (a round per arbitrary split, each over the whole graph). Where it is over, the original itself
takes well over an hour (3,416 s of CPU at 10^4 events), so there is no recording to match. It was 2 x
10^7 (0.6-1 s) until the rounds moved to C, which left the 10^4-event input to ``stitch``."""
ARBITRARY_ROUNDS = 16
"""Refinement rounds without an invariant-satisfying split that make Synoptic's arbitrary split
(:func:`_arbitrary_split`); later ones make the consistent split. Language-equal recorded inputs
with 8 / 12 / 16 / 32 such rounds: 299 / 300 / 301 / 301 of 305 small ones. Unbounded, as Synoptic
goes on, a 10^3-event random log needs ~670 rounds (5-20 s even with the C checker) and, on the
recordings at size (``tests/data/synoptic/recorded-at-size.json.gz``), matched no seed the bounded
refinement misses and left one input outside Synoptic's node range: on random logs each of
Synoptic's seeds draws another language, so no fixed choice follows "Synoptic's" arbitrary split."""
MAX_LOGGED_STEPS = 1000
"""Refinement splits and coarsening merges listed in ``details["steps"]`` (all are counted)."""


def infer_synoptic(
    sequences: Sequence[Sequence[str]],
    k: int = DEFAULT_K,
    coarsen: bool = True,
    refine: str | None = DEFAULT_REFINE,
    seed: int | None = None,
) -> InferenceResult:
    """Learn a Synoptic model of ``sequences``; ``k`` is Synoptic's k of the coarsening merges.

    With ``seed``, refinement and coarsening replay the original's choices for ``--randomSeed=seed``
    (:mod:`quicsm.inference.replay`; ``refine`` is then not used): the model
    ``java -jar synoptic.jar --randomSeed=seed`` draws. With neither ``seed`` nor ``refine`` (and k = 1),
    the replay of seed :data:`DEFAULT_SEED` as long as its work stays within :data:`REPLAY_BUDGET`,
    else ``stitch``; ``params["refine"]`` says which ran (``replay``, with ``seed``; or ``stitch``, with
    ``replay_over_budget``)."""
    started = time.perf_counter()
    log = encode_sequences(sequences)
    return synoptic_encoded(log, k=k, coarsen=coarsen, started=started, refine=refine, seed=seed)


def synoptic_encoded(
    log: EncodedLog,
    k: int = DEFAULT_K,
    coarsen: bool = True,
    started: float | None = None,
    refine: str | None = DEFAULT_REFINE,
    seed: int | None = None,
) -> InferenceResult:
    if k < 1:
        raise InferenceError(f"synoptic: k must be >= 1 (k = 1 merges partitions of one state), got {k}")
    if len(log.names) > MAX_STATES:
        raise InferenceError(
            f"synoptic: {len(log.names):,} distinct states, more than the {MAX_STATES} this engine takes "
            "(its invariant checks grow with the square of the states); use --engine dfg or ktails, or "
            "a coarser view (without --phases/--recovery)"
        )
    if seed is not None and k != 1:
        raise InferenceError(f"synoptic: a seed replays Synoptic's own coarsening, which has k = 1 (got k = {k})")
    t0 = time.perf_counter() if started is None else started
    timings: dict[str, float] = {"encode": time.perf_counter() - t0}
    mark = time.perf_counter()
    inv = mine_encoded(log)
    timings["mine"] = time.perf_counter() - mark

    mark = time.perf_counter()
    graph = PartitionGraph(log)
    initial_partitions = sum(1 for t in graph.ptype if t >= 0)
    steps: list[dict[str, Any]] = []
    if refine is not None and refine not in REFINEMENTS:
        raise InferenceError(f"synoptic: refine must be one of {', '.join(REFINEMENTS)}, got {refine!r}")
    stats = ReplayStats()
    budget = None
    over_budget = False
    if seed is None and refine is None:
        if k == 1:  # Synoptic's own arbitrary split, seed 1's, where it is affordable
            seed, budget = DEFAULT_SEED, REPLAY_BUDGET
        else:  # the replay's coarsening is Synoptic's, k = 1
            refine = "stitch"
    if budget is not None and len(graph.part) * MIN_ROUNDS > budget:  # not even a few rounds would fit
        over_budget, seed, refine = True, None, "stitch"
    if seed is not None:
        try:
            replay_refine(graph, mined_order(log, inv), JavaRandom(seed), stats, budget=budget)
            splits = stats.rounds
            refine = "replay"
        except OverBudget:
            graph = PartitionGraph(log)  # start over, half refined is no model
            over_budget, seed, refine = True, None, "stitch"
    if seed is None:
        assert refine is not None
        splits = (_refine_stitch if refine == "stitch" else _refine_consistent)(graph, inv, steps)
    timings["refine"] = time.perf_counter() - mark
    refined_partitions = sum(1 for t in graph.ptype if t >= 0)

    mark = time.perf_counter()
    if not coarsen:
        merges = 0
    elif seed is not None:
        merges = replay_coarsen(graph, inv, log, stats)
    else:
        merges = _coarsen(graph, inv, k, steps, _first_seen_order(log))
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
        "refinement_rounds": splits,
        "refinement_splits": refined_partitions - initial_partitions,
        "coarsening_merges": merges,
        "steps": steps,
        "k": k,
        "refine": refine,
    }
    if seed is not None:
        details["seed"] = seed
        details["arbitrary_splits"] = stats.arbitrary
    if budget is not None:
        details["replay_work"] = stats.work
        details["replay_budget"] = budget
    params: dict[str, Any] = {"k": k, "coarsen": coarsen, "refine": refine}
    if seed is not None:
        params["seed"] = seed
    if over_budget:  # the default gave the replay up: say so in the model
        params["replay_over_budget"] = True
    res = result_from_nodes("synoptic", labels, graph.part, graph.offsets, details, **params)
    timings["paths"] = time.perf_counter() - mark
    res.details["partitions_final"] = len(res.model.nodes)
    res.details["seconds"] = {name: round(v, 4) for name, v in timings.items()}
    res.details["seconds_total"] = round(time.perf_counter() - t0, 4)
    return res


def _refine_consistent(graph: PartitionGraph, inv: InvariantSet, steps: list[dict[str, Any]]) -> int:
    """Split the first disagreeing partition of each counterexample by automaton state (fast; default)."""
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


def _refine_stitch(graph: PartitionGraph, inv: InvariantSet, steps: list[dict[str, Any]]) -> int:
    """Split partitions along counterexamples until every mined invariant holds; returns the rounds.

    One round is Synoptic's ``performSplits``: per violated invariant the counterexample Synoptic's
    model checker reports (:func:`~quicsm.inference.checker.synoptic_counterexample`, successors in
    Synoptic's order), the candidate splits at its stitch, and for each invariant the first candidate
    that makes it hold on the whole graph. All such splits of a round are applied together (splits of
    one partition combined into their common refinement, :func:`_multi_split`).

    A round that finds none makes an arbitrary split, as Synoptic does, for the first
    :data:`ARBITRARY_ROUNDS` such rounds (:func:`_arbitrary_split`); coarsening later merges most of
    them back. After that, the consistent split of the first counterexample (:func:`_split_for`),
    which always converges quickly: unbounded arbitrary splits need hundreds of rounds on a
    1,000-event bench log.

    Where Synoptic shuffles with its random seed, the order here is fixed: counterexamples in the
    order of :meth:`InvariantSet.coded` (kind, then type codes), and candidates outgoing-first for
    the 1st, 3rd, 5th ... counterexample of the whole refinement and incoming-first for the others.
    Alternating stands in for the shuffle: a fixed outgoing-first order always peels the same side
    and needs many more rounds than Synoptic does. Synoptic's own pre-shuffle order cannot be
    reproduced: it comes from its miner's ``HashSet`` of trace paths (identity hash codes).
    """
    rounds = 0
    arbitrary = 0
    agreed: set[tuple[str, int, int, int, int]] = set()  # (invariant, partition, state) known consistent
    turn = 0  # counterexamples seen so far: which kind of candidate goes first alternates with it
    limit = len(graph.part)  # each round adds a non-empty partition: never more than there are events
    while True:
        bad = violated(graph.edge_arrays(), graph.types_array(), inv)
        if not bad:
            return rounds
        succ = graph.ordered_csr()
        ptype = graph.types_array()
        chosen: dict[int, list[np.ndarray]] = {}
        first: tuple[list[int], tuple[str, int, int]] | None = None
        proposed: list[tuple[int, np.ndarray]] = []  # every candidate of the round, for an arbitrary split
        for kind, a, b in bad:
            walk = synoptic_counterexample(succ, ptype, kind, a, b, graph.initial(), graph.terminal_type)
            if walk is None:  # cannot happen: the graph does not change within a round
                continue
            candidates = _stitch_splits(graph, walk)
            if turn % 2:  # where Synoptic shuffles the candidates: outgoing and incoming first in turn
                candidates = candidates[::-1]
            turn += 1
            if first is None:
                first = walk, (kind, a, b)
            proposed.extend(candidates)
            for part, keep in candidates:
                if _split_satisfies(graph, part, keep, kind, a, b):
                    chosen.setdefault(part, []).append(keep)
                    if len(steps) < MAX_LOGGED_STEPS:
                        steps.append(
                            {
                                "step": "split",
                                "round": rounds + 1,
                                "invariant": f"{inv.labels[a]} {kind} {inv.labels[b]}",
                                "state": inv.labels[graph.ptype[part]],
                                "kept": int(keep.sum()),
                                "moved": int(len(keep) - keep.sum()),
                                "walk_length": len(walk),
                            }
                        )
                    break
        if first is None:
            raise InferenceError("synoptic: internal error, violated invariants without a counterexample")
        if chosen:
            for part, masks in chosen.items():
                _multi_split(graph, part, masks)
        elif arbitrary < ARBITRARY_ROUNDS and proposed:  # Synoptic: one arbitrary candidate
            part, keep = _arbitrary_split(proposed)
            graph.split(part, keep)  # Synoptic's PartitionSplit: the split events form the new partition
            arbitrary += 1
            if len(steps) < MAX_LOGGED_STEPS:
                steps.append(
                    {
                        "step": "split",
                        "round": rounds + 1,
                        "arbitrary": True,
                        "state": inv.labels[graph.ptype[part]],
                        "kept": int(len(keep) - keep.sum()),
                        "moved": int(keep.sum()),
                    }
                )
        else:  # ours: the consistent split of the first walk
            at, disagree = _split_for(graph, first[0], *first[1], agreed)
            graph.split(first[0][at], disagree)
        rounds += 1
        if rounds > limit:
            raise InferenceError("synoptic: internal error, refinement does not converge")


def _arbitrary_split(proposed: list[tuple[int, np.ndarray]]) -> tuple[int, np.ndarray]:
    """The split a round without an invariant-satisfying one makes: of all candidates of the round,
    the one whose smaller side is smallest, on a tie the one the most counterexamples proposed, then
    the first proposed.

    Synoptic takes the first candidate of its (shuffled) first counterexample. Any fixed stand-in
    for that random pick sends refinement elsewhere on some logs; peeling the smallest piece off
    changes the graph least, and coarsening merges it back when it was not needed. Language-equal
    recorded inputs (test_synoptic_recorded.py, 16 rounds) by rule: first candidate of the first
    counterexample 293, smallest side 296, most proposed 298, most proposed then smallest 300, this
    one 301; all but the first and the most proposed draw one of Synoptic's fig10-all models.
    """
    votes: dict[tuple[int, bytes], list[Any]] = {}
    for part, keep in proposed:
        entry = votes.setdefault((part, keep.tobytes()), [0, part, keep])
        entry[0] += 1
    _, part, keep = min(votes.values(), key=lambda v: (min(int(v[2].sum()), len(v[2]) - int(v[2].sum())), -v[0]))
    return part, keep


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


def _stitch_splits(graph: PartitionGraph, walk: list[int]) -> list[tuple[int, np.ndarray]]:
    """Synoptic's candidate splits for a counterexample walk (``Bisimulation.getSplitsUnconstrained``).

    Follow the events that really take the walk from its first partition; the stitch is the partition
    ``cur`` after which none of them goes on into the walk's next partition ``nxt``. Candidates split
    ``cur`` into the events that step into ``nxt`` and the rest (outgoing), and into the events entered
    from the walk's partition before ``cur`` and the rest (incoming). Each is (partition, mask of the
    events that stay) and both sides are non-empty. The stitch exists: a walk whose events all went on
    would be a trace breaking an invariant mined from the traces.
    """
    prev, cur, nxt = stitch(graph, walk)
    return [(cur, mask) for mask in split_masks(graph, graph.members[cur], prev, nxt)]


def _split_satisfies(graph: PartitionGraph, part: int, keep: np.ndarray, kind: str, a: int, b: int) -> bool:
    """Would splitting ``part`` by ``keep`` make ``a kind b`` hold on the whole graph? (graph unchanged)"""
    succ = graph.successors_if_split(part, ~keep)
    ptype = np.append(graph.types_array(), graph.ptype[part])
    return counterexample(succ, ptype, kind, a, b, graph.initial(), graph.terminal_type) is None


def _multi_split(graph: PartitionGraph, part: int, masks: list[np.ndarray]) -> None:
    """Split ``part`` into the common refinement of the chosen splits (Synoptic's PartitionMultiSplit).

    The classes come in Synoptic's order (``PartitionMultiSplit.incorporate(PartitionMultiSplit)``):
    the first split gives [stays, rest]; each further split ``X`` turns the list ``L`` into
    ``[s & X, s - X for s in L]`` (empty ones dropped), i.e. the classes sorted by (in split 1, in
    split 2, ...) with "in" first. The first class keeps the partition's id, the others become new
    partitions in that order, which is the order coarsening later tries them in.
    """
    outside = ~np.array(masks)  # one row per split, False where an event is in it
    order = np.lexsort(outside[::-1])  # by the first split, then the second, ...
    starts = np.any(outside[:, order[1:]] != outside[:, order[:-1]], axis=0)
    key = np.empty(len(order), dtype=np.int64)
    key[order] = np.concatenate([[0], np.cumsum(starts)])
    for cls in range(1, int(key.max()) + 1):
        graph.split(part, key == cls)
        key = key[key != cls]


def _k_strings(succ: list[list[int]], ptype: list[int], k: int) -> list[frozenset[tuple[int, ...]]]:
    """Per partition, Synoptic's k-strings: the type strings of length 1..k along paths starting there."""
    size = len(ptype)
    level: list[frozenset[tuple[int, ...]]] = [
        frozenset([(ptype[p],)]) if ptype[p] >= 0 else frozenset() for p in range(size)
    ]
    for _ in range(k - 1):
        level = [
            frozenset([(ptype[p],), *((ptype[p], *s) for q in succ[p] for s in level[q])])
            if ptype[p] >= 0
            else frozenset()
            for p in range(size)
        ]
    return level


def _first_seen_order(log: EncodedLog) -> dict[int, int]:
    """Rank of each type by its first occurrence in the log: the order of Synoptic's initial partitions."""
    first = first_positions(log.codes, len(log.names))
    present = np.flatnonzero(first < len(log.codes))
    return {int(t): rank for rank, t in enumerate(present[np.argsort(first[present], kind="stable")].tolist())}


def _coarsen(
    graph: PartitionGraph, inv: InvariantSet, k: int, steps: list[dict[str, Any]], first_seen: dict[int, int]
) -> int:
    """Synoptic's ``mergePartitions``: merge the first k-equal pair that keeps every invariant, repeat.

    Pairs are tried in partition order (p before q, p kept); a pair whose merge broke an invariant is
    never tried again (Synoptic's blacklist). k = 1 compares types only; k > 1 also the k-strings.
    """
    merges = 0
    failed: set[tuple[int, int]] = set()
    edges = graph.edge_arrays()
    ptype = graph.types_array()
    synthetic = {graph.initial_type, graph.terminal_type}
    while True:
        live = sorted(
            (p for p, t in enumerate(graph.ptype) if t >= 0 and t not in synthetic),
            key=lambda p: (0, first_seen[p]) if p in first_seen else (1, p),
        )
        strings = _k_strings(graph.successors(), graph.ptype, k) if k > 1 else None
        merged = None
        for i, keep in enumerate(live):
            for q in live[i + 1 :]:
                if graph.ptype[q] != graph.ptype[keep] or (keep, q) in failed:
                    continue
                if strings is not None and strings[q] != strings[keep]:
                    continue
                trial = (np.where(edges[0] == q, keep, edges[0]), np.where(edges[1] == q, keep, edges[1]))
                trial_types = ptype.copy()
                trial_types[q] = -1
                if violated(trial, trial_types, inv):
                    failed.add((keep, q))
                    continue
                merged = keep, q, trial, trial_types
                break
            if merged is not None:
                break
        if merged is None:
            return merges
        keep, q, edges, ptype = merged
        if len(steps) < MAX_LOGGED_STEPS:
            steps.append(
                {
                    "step": "merge",
                    "state": inv.labels[graph.ptype[keep]],
                    "sizes": [len(graph.members[keep]), len(graph.members[q])],
                }
            )
        graph.merge(keep, q)
        merges += 1
