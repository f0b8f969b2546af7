"""Our Synoptic: every mined invariant holds on the model, every trace is a path, output is deterministic."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import pytest
from annotate_oracle import annotate, infer
from hypothesis import given, settings
from hypothesis import strategies as st
from inference_oracles import brute_invariants, check_paths, holds_on_model, random_split

from quicsm.inference import infer_sequences
from quicsm.traces.events import Trace, TraceEvent

if TYPE_CHECKING:
    from quicsm.inference.invariants import InvariantSet
    from quicsm.inference.model import Model

TRACES = st.lists(st.lists(st.sampled_from("abcd"), max_size=7), min_size=1, max_size=6).filter(any)


def two_modes(n: int, seed: int = 3) -> list[list[str]]:
    """Throttled connections go ApplicationLimited, others CongestionAvoidanceMaxed, never both."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        other = "ApplicationLimited" if i % 2 else "CongestionAvoidanceMaxed"
        seq = ["Init", "SlowStart"]
        for _ in range(rng.randrange(1, 6)):
            seq += ["CongestionAvoidance", rng.choice([other, "Recovery"])]
        out.append(seq)
    return out


@settings(max_examples=150, deadline=None)
@given(TRACES)
def test_model_satisfies_every_mined_invariant_and_accepts_every_trace(seqs: list[list[str]]) -> None:
    res = infer_sequences(seqs, "synoptic")
    check_paths(res.model, res.paths, seqs)
    mined = brute_invariants(seqs)
    assert len(res.details["invariants"]) == len(mined)
    broken = [str(i) for i in mined if not holds_on_model(res.model, i)]
    assert broken == []


@settings(max_examples=60, deadline=None)
@given(TRACES)
def test_without_coarsening_still_sound_and_never_smaller(seqs: list[list[str]]) -> None:
    fine = infer_sequences(seqs, "synoptic", coarsen=False)
    coarse = infer_sequences(seqs, "synoptic")
    check_paths(fine.model, fine.paths, seqs)
    assert all(holds_on_model(fine.model, i) for i in brute_invariants(seqs))
    assert len(fine.model.nodes) >= len(coarse.model.nodes)


@settings(max_examples=60, deadline=None)
@given(TRACES, st.randoms(use_true_random=False))
def test_same_input_same_model(seqs: list[list[str]], rnd: random.Random) -> None:
    a = infer_sequences(seqs, "synoptic")
    b = infer_sequences([list(s) for s in seqs], "synoptic")
    assert a.model.nodes == b.model.nodes and a.model.edges == b.model.edges
    assert a.paths == b.paths


def test_refinement_splits_what_the_dfg_merges() -> None:
    seqs = two_modes(40)
    dfg = infer_sequences(seqs, "dfg")
    syn = infer_sequences(seqs, "synoptic")
    mined = brute_invariants(seqs)
    from quicsm.inference.invariants import Invariant

    key = Invariant("NFby", "ApplicationLimited", "CongestionAvoidanceMaxed")
    assert key in mined and not holds_on_model(dfg.model, key)
    assert all(holds_on_model(syn.model, i) for i in mined)
    assert syn.details["refinement_splits"] > 0 and syn.details["refinement_rounds"] > 0
    assert len(syn.model.nodes) > len(dfg.model.nodes)
    check_paths(syn.model, syn.paths, seqs)
    # the model keeps the two kinds apart: a connection that mixes them is not a walk of it (the DFG allows it)
    mixed = [
        "Init",
        "SlowStart",
        "CongestionAvoidance",
        "ApplicationLimited",
        "CongestionAvoidance",
        "CongestionAvoidanceMaxed",
    ]
    assert dfg.model.accepts(mixed) and not syn.model.accepts(mixed)


def test_details_report_the_run() -> None:
    res = infer_sequences(two_modes(10), "synoptic", k=2)
    d = res.details
    assert d["k"] == 2 and d["traces"] == 10
    assert sum(d["invariant_counts"].values()) == len(d["invariants"]) > 0
    assert d["partitions_final"] == len(res.model.nodes)
    assert d["seconds_total"] >= 0 and set(d["seconds"]) >= {"mine", "refine", "coarsen"}


def _traces(seqs: list[list[str]]) -> list[Trace]:
    out = []
    for i, seq in enumerate(seqs):
        events = [TraceEvent(1000 * (j + 1) + 7 * i, s) for j, s in enumerate(seq)]
        out.append(Trace(f"c{i}", "cubic", events, sources=("mem",)))
    return out


@settings(max_examples=60, deadline=None)
@given(TRACES)
def test_annotated_probabilities_sum_to_one(seqs: list[list[str]]) -> None:
    traces = _traces(seqs)
    res = infer(traces, "synoptic")
    am = annotate(res, traces)
    out: dict[int, float] = {}
    for e in am.edges:
        out[e.src] = out.get(e.src, 0.0) + e.probability
    non_terminal = {n.id for n in am.model.nodes if n.kind != "terminal"}
    assert set(out) == non_terminal
    assert all(abs(v - 1.0) < 1e-9 for v in out.values())


def test_negative_k_is_refused() -> None:
    from quicsm.errors import InferenceError

    with pytest.raises(InferenceError, match="k must be >= 1"):
        infer_sequences([["a"]], "synoptic", k=-1)


def _coarser_model(seqs: list[list[str]], k: int) -> tuple[InvariantSet, Model, list[int]]:
    """The invariants mined from ``seqs``, a k-Tails model of them (coarser than Synoptic's, so it breaks
    some), and each model node's event type as the invariants number them."""
    from quicsm.inference.invariants import mine_encoded
    from quicsm.inference.packed import encode_sequences

    inv = mine_encoded(encode_sequences(seqs))
    model = infer_sequences(seqs, "ktails", k=k).model
    code = {name: i for i, name in enumerate(inv.labels)}
    return inv, model, [code[n.state] for n in model.nodes]


@settings(max_examples=150, deadline=None)
@given(TRACES, st.integers(1, 3))
def test_checker_agrees_with_brute_force_on_coarser_models(seqs: list[list[str]], k: int) -> None:
    """The matrix checker (which decides every merge) against networkx on models that do break invariants."""
    import numpy as np

    from quicsm.inference.checker import violated

    inv, model, types = _coarser_model(seqs, k)
    adj = np.zeros((len(model.nodes), len(model.nodes)), dtype=bool)
    for e in model.edges:
        adj[e.src, e.dst] = True
    ptype = np.array(types)
    got = {f"{inv.labels[a]} {kind} {inv.labels[b]}" for kind, a, b in violated(adj, ptype, inv)}
    want = {f"{i.first} {i.kind} {i.second}" for i in brute_invariants(seqs) if not holds_on_model(model, i)}
    assert got == want


@settings(max_examples=150, deadline=None)
@given(TRACES, st.integers(1, 3))
def test_synoptic_counterexample_finds_a_violation_exactly_when_one_exists(seqs: list[list[str]], k: int) -> None:
    """Synoptic's worklist checker against the breadth-first one: same verdict, and a real violating walk."""
    from quicsm.inference.checker import _step, counterexample, synoptic_counterexample
    from quicsm.inference.invariants import KINDS

    inv, model, ptype = _coarser_model(seqs, k)
    succ: list[list[int]] = [[] for _ in model.nodes]
    for e in model.edges:
        succ[e.src].append(e.dst)
    initial = next(n.id for n in model.nodes if n.kind == "initial")
    terminal = len(inv.labels) - 1
    size = len(inv.labels)
    for kind in KINDS:
        for a in range(size):
            for b in range(size):
                if (a == b and kind != "NFby") or b >= size - 2 or a == terminal or (a == size - 2 and kind != "AFby"):
                    continue  # never mined: x AFby x, x AP x, anything about INITIAL/TERMINAL but INITIAL AFby x
                walk = synoptic_counterexample(succ, ptype, kind, a, b, initial, terminal)
                assert (walk is None) == (counterexample(succ, ptype, kind, a, b, initial, terminal) is None)
                if walk is None:
                    continue
                assert walk[0] == initial and all(v in succ[u] for u, v in zip(walk, walk[1:]))
                states = [0]
                for node in walk:
                    states.append(_step(kind, a, b, states[-1], ptype[node]))
                if kind == "AFby":
                    assert ptype[walk[-1]] == terminal and states[-1] == 1
                else:  # cut right after the violation
                    assert states[-1] == 2 and states[-2] != 2


@settings(max_examples=60, deadline=None)
@given(TRACES, st.randoms(use_true_random=False))
def test_ordered_successors_follow_the_first_event_after_splits(seqs: list[list[str]], rnd: random.Random) -> None:
    """Synoptic's successor order (first event of the partition, in log order, stepping there), kept
    up to date lazily through splits and merges; a trial split's successors."""

    from quicsm.inference.packed import encode_sequences
    from quicsm.inference.partitions import PartitionGraph

    g = PartitionGraph(encode_sequences(seqs))

    def brute() -> list[list[int]]:
        out: list[list[int]] = [[] for _ in range(g.size)]
        for i in range(len(g.part) - 1):
            if g.has_succ[i] and g.part[i + 1] not in out[g.part[i]]:
                out[g.part[i]].append(int(g.part[i + 1]))
        return out

    assert g.ordered_successors() == brute() == g.ordered_csr().lists()
    for _ in range(6):
        chosen = random_split(g, rnd)
        if chosen is None:
            break
        p, moving = chosen
        trial = g.successors_if_split(p, moving).lists()
        q = g.split(p, moving)
        assert trial == g.successors()
        if rnd.random() < 0.2:
            g.merge(p, q)
        assert g.ordered_successors() == brute() == g.ordered_csr().lists()


def test_combined_splits_come_in_synoptics_order() -> None:
    """PartitionMultiSplit.incorporate: [s & X, s - X for s in L]; the first class keeps the id."""
    import numpy as np

    from quicsm.inference.packed import encode_sequences
    from quicsm.inference.partitions import PartitionGraph
    from quicsm.inference.synoptic import _multi_split

    g = PartitionGraph(encode_sequences([["a"] * 8]))
    p = g.ptype.index(0)
    members = g.members[p].copy()
    first = np.array([1, 1, 1, 1, 0, 0, 0, 0], dtype=bool)
    second = np.array([1, 1, 0, 0, 1, 1, 0, 0], dtype=bool)
    _multi_split(g, p, [first, second])
    # L = [first, rest] -> [first & second, first - second, rest & second, rest - second]
    want = [members[first & second], members[first & ~second], members[~first & second], members[~first & ~second]]
    got = [g.members[p]] + g.members[-3:]
    assert [x.tolist() for x in got] == [w.tolist() for w in want]


def test_arbitrary_split_takes_the_smallest_piece_then_the_most_proposed() -> None:
    import numpy as np

    from quicsm.inference.synoptic import _arbitrary_split

    big = (3, np.array([1, 1, 0, 0], dtype=bool))  # sides 2 / 2
    small_once = (4, np.array([1, 0, 0, 0, 0], dtype=bool))  # sides 1 / 4
    small_twice = (5, np.array([1, 1, 1, 0], dtype=bool))  # sides 3 / 1, proposed twice
    part, keep = _arbitrary_split([big, small_once, small_twice, (5, small_twice[1].copy())])
    assert part == 5 and keep.tolist() == [True, True, True, False]
    part, keep = _arbitrary_split([big, small_once])
    assert part == 4


def test_more_states_than_the_engine_takes_are_refused_at_once() -> None:
    from quicsm.errors import InferenceError
    from quicsm.inference.synoptic import MAX_STATES, infer_synoptic

    seqs = [[f"S{i}", f"S{i + 1}"] for i in range(0, MAX_STATES + 1, 2)]
    with pytest.raises(InferenceError, match=rf"{MAX_STATES + 2} distinct states, more than the {MAX_STATES}"):
        infer_synoptic(seqs)
    assert len(infer_synoptic(seqs[: MAX_STATES // 2]).model.nodes) == MAX_STATES + 2  # 100 states: taken
