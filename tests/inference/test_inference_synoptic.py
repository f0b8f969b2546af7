"""Our Synoptic: every mined invariant holds on the model, every trace is a path, output is deterministic."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from inference_oracles import brute_invariants, check_paths, holds_on_model

from quicsm.inference import infer, infer_sequences
from quicsm.inference.annotate import annotate
from quicsm.traces.events import Trace, TraceEvent

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


@settings(max_examples=150, deadline=None)
@given(TRACES, st.integers(1, 3))
def test_checker_agrees_with_brute_force_on_coarser_models(seqs: list[list[str]], k: int) -> None:
    """The matrix checker (which decides every merge) against networkx on models that do break invariants."""
    import numpy as np

    from quicsm.inference.checker import violated
    from quicsm.inference.invariants import mine_encoded
    from quicsm.inference.packed import encode_sequences

    inv = mine_encoded(encode_sequences(seqs))
    model = infer_sequences(seqs, "ktails", k=k).model
    code = {name: i for i, name in enumerate(inv.labels)}
    adj = np.zeros((len(model.nodes), len(model.nodes)), dtype=bool)
    for e in model.edges:
        adj[e.src, e.dst] = True
    ptype = np.array([code[n.state] for n in model.nodes])
    got = {f"{inv.labels[a]} {kind} {inv.labels[b]}" for kind, a, b in violated(adj, ptype, inv)}
    want = {f"{i.first} {i.kind} {i.second}" for i in brute_invariants(seqs) if not holds_on_model(model, i)}
    assert got == want
