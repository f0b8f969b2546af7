"""The C extension (quicsm/inference/fastcheck.c) against its pure-Python twins (checker.PySearches,
partitions' split steps, replay.PyReplay), on the same inputs.

Random typed graphs (self-loops, unreachable nodes, empty slots, several INITIAL/TERMINAL nodes) and
every kind of invariant: the same failing invariants, the same walks, node for node; whole inferences:
the same models.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from inference_oracles import C_BUILT, python_twins, random_split

from quicsm.inference import checker
from quicsm.inference.checker import Csr, counterexample, synoptic_counterexample, violations
from quicsm.inference.invariants import KINDS, InvariantSet

pytestmark = pytest.mark.skipif(not C_BUILT, reason="the C checker is not built (no compiler)")


def _graph(rnd: random.Random) -> tuple[list[list[int]], list[int], InvariantSet]:
    states = rnd.randint(1, 5)
    size = states + 2
    nodes = rnd.randint(2, 14)
    ptype = [rnd.randrange(states) for _ in range(nodes)]
    ptype[0] = size - 2  # INITIAL
    ptype[-1] = size - 1  # TERMINAL
    for u in range(1, nodes - 1):
        roll = rnd.random()
        if roll < 0.05:
            ptype[u] = -1  # an empty slot (merged away): no edges
        elif roll < 0.1:
            ptype[u] = size - 1
    succ: list[list[int]] = [[] for _ in range(nodes)]
    for u in range(nodes):
        if ptype[u] < 0 or ptype[u] == size - 1:
            continue
        for v in rnd.sample(range(nodes), rnd.randint(0, min(4, nodes))):
            if ptype[v] >= 0 and ptype[v] != size - 2 and v not in succ[u]:
                succ[u].append(v)
    labels = tuple(f"s{i}" for i in range(states)) + ("INITIAL", "TERMINAL")

    def mined() -> np.ndarray:
        return np.array([[rnd.random() < 0.4 for _ in range(size)] for _ in range(size)], dtype=bool)

    return succ, ptype, InvariantSet(labels, mined(), mined(), mined())


@settings(max_examples=120, deadline=None)
@given(st.randoms(use_true_random=False))
def test_c_checker_equals_the_python_one(rnd: random.Random) -> None:
    succ, ptype, inv = _graph(rnd)
    size = len(inv.labels)
    src = np.array([u for u, vs in enumerate(succ) for _ in vs], dtype=np.int64)
    dst = np.array([v for vs in succ for v in vs], dtype=np.int64)
    types = np.array(ptype, dtype=np.int64)
    c_fail = violations((src, dst), types, inv)
    walks = {}
    for kind in KINDS:
        for a in range(size):
            for b in range(size):
                walks[kind, a, b] = (
                    counterexample(Csr.from_lists(succ), ptype, kind, a, b, 0, size - 1),
                    synoptic_counterexample(succ, ptype, kind, a, b, 0, size - 1),
                )
    with python_twins():
        assert checker.SEARCHES is checker.PYTHON_SEARCHES
        py_fail = violations((src, dst), types, inv)
        for (kind, a, b), (short, syn) in walks.items():
            assert counterexample(succ, ptype, kind, a, b, 0, size - 1) == short, (kind, a, b)
            assert synoptic_counterexample(Csr.from_lists(succ), ptype, kind, a, b, 0, size - 1) == syn, (kind, a, b)
    for kind in KINDS:
        assert np.array_equal(c_fail[kind], py_fail[kind]), kind


def test_walks_are_found_on_a_small_graph() -> None:
    """Not vacuous: on INITIAL -> x -> y -> TERMINAL, both checkers find the walk breaking x NFby y."""
    succ = [[1], [2], [3], []]
    ptype = [2, 0, 1, 3]
    for twin in (checker.CSearches(), checker.PYTHON_SEARCHES):
        assert twin.shortest(succ, ptype, "NFby", 0, 1, 0, 3) == [0, 1, 2, 3]
        assert twin.synoptic_walk(succ, ptype, "NFby", 0, 1, 0, 3) == [0, 1, 2, 3]
        assert twin.shortest(succ, ptype, "NFby", 1, 0, 0, 3) is None
    assert synoptic_counterexample(succ, ptype, "NFby", 0, 1, 0, 3) == [0, 1, 2]  # cut after the violation


def test_csr_round_trip_keeps_successor_order() -> None:
    succ = [[3, 1], [], [2, 0, 1], [0]]
    g = Csr.from_lists(succ)
    assert g.lists() == succ
    src = np.array([2, 0, 2, 3, 0, 2])
    dst = np.array([2, 3, 0, 0, 1, 1])
    assert Csr.from_edges(src, dst, 4).lists() == succ


@settings(max_examples=40, deadline=None)
@given(st.randoms(use_true_random=False))
def test_engine_draws_the_same_model_with_either_checker(rnd: random.Random) -> None:
    """Whole refinement and coarsening, each way of refining: the C extension changes the speed, never the
    model."""
    from quicsm.inference.synoptic import infer_synoptic

    letters = "ABCDE"[: rnd.randint(2, 5)]
    seqs = [[rnd.choice(letters) for _ in range(rnd.randint(1, 12))] for _ in range(rnd.randint(1, 8))]
    for refine in (None, "stitch", "consistent"):
        with_c = infer_synoptic(seqs, refine=refine)
        with python_twins():
            without = infer_synoptic(seqs, refine=refine)
        assert with_c.model == without.model and with_c.paths == without.paths, refine


@settings(max_examples=25, deadline=None)
@given(st.randoms(use_true_random=False))
def test_split_preview_in_c_equals_numpy_and_the_split(rnd: random.Random) -> None:
    """PartitionGraph.successors_if_split through fastcheck.split_steps and through numpy: the same CSR,
    and the successors the graph really has after that split (self-steps within the partition included)."""
    from quicsm.inference.packed import encode_sequences
    from quicsm.inference.partitions import PartitionGraph

    seqs = [[rnd.choice("abc") for _ in range(rnd.randint(1, 12))] for _ in range(rnd.randint(1, 6))]
    g = PartitionGraph(encode_sequences(seqs))
    for _ in range(4):
        chosen = random_split(g, rnd)
        if chosen is None:
            break
        p, moving = chosen
        in_c = g.successors_if_split(p, moving)
        with python_twins():
            in_numpy = g.successors_if_split(p, moving)
        assert np.array_equal(in_c.indptr, in_numpy.indptr) and np.array_equal(in_c.indices, in_numpy.indices)
        g.split(p, moving)
        assert in_c.lists() == g.successors()


@settings(max_examples=60, deadline=None)
@given(st.randoms(use_true_random=False))
def test_seeded_replay_draws_the_same_model_with_either_checker(rnd: random.Random) -> None:
    """The replay of one seed (``seed=S``): its C rounds and incremental coarsening change the speed, never
    the model; long random logs, so that refinement makes arbitrary splits and coarsening fails merges."""
    from quicsm.inference.synoptic import infer_synoptic

    letters = "ABCDEF"[: rnd.randint(2, 6)]
    seqs = [[rnd.choice(letters) for _ in range(rnd.randint(1, 30))] for _ in range(rnd.randint(1, 8))]
    seed = rnd.randint(1, 5)
    with_c = infer_synoptic(seqs, seed=seed)
    with python_twins():
        without = infer_synoptic(seqs, seed=seed)
    assert with_c.model == without.model and with_c.paths == without.paths
    assert with_c.details["refinement_rounds"] == without.details["refinement_rounds"]
    assert with_c.details["coarsening_merges"] == without.details["coarsening_merges"]
