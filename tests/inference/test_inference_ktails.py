"""k-Tails: nodes are exactly the classes of equal (state, future) prefixes, computed by brute force.

k counts as in Synoptic: the k-strings include the node itself, so a node's future is compared on the
strings of length <= k - 1 that follow it.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from inference_oracles import check_paths, k_future

from quicsm.inference import infer_sequences
from quicsm.inference.model import INITIAL, TERMINAL

TRACES = st.lists(st.lists(st.sampled_from("abc"), max_size=7), min_size=1, max_size=7).filter(any)


def expected_classes(seqs: list[list[str]], k: int) -> list[list[tuple[str, frozenset[tuple[str, ...]]]]]:
    """Per trace, per framed event: the (state, (k-1)-future) pair that decides its node."""
    fut = k_future(seqs, k - 1)
    out = []
    for s in seqs:
        f = (INITIAL, *s, TERMINAL)
        out.append([(f[i - 1], fut[f[:i]]) for i in range(1, len(f) + 1)])
    return out


@settings(max_examples=200, deadline=None)
@given(TRACES, st.integers(1, 4))
def test_nodes_are_k_future_classes(seqs: list[list[str]], k: int) -> None:
    res = infer_sequences(seqs, "ktails", k=k)
    check_paths(res.model, res.paths, seqs)
    want = expected_classes(seqs, k)
    pairs = {(node, key) for path, keys in zip(res.paths, want) for node, key in zip(path, keys)}
    node_to_key: dict[int, object] = {}
    key_to_node: dict[object, int] = {}
    for node, key in pairs:
        assert node_to_key.setdefault(node, key) == key, "one node holds prefixes with different k-futures"
        assert key_to_node.setdefault(key, node) == node, "equal k-futures were not merged"


@settings(max_examples=100, deadline=None)
@given(TRACES)
def test_k1_is_the_directly_follows_graph(seqs: list[list[str]]) -> None:
    kt = infer_sequences(seqs, "ktails", k=1)
    dfg = infer_sequences(seqs, "dfg")
    assert kt.model.nodes == dfg.model.nodes and kt.model.edges == dfg.model.edges
    assert kt.paths == dfg.paths


def test_k_separates_states_by_future() -> None:
    seqs = [["a", "b", "c"], ["x", "b", "d"], ["a", "b", "c"]]
    by_k = {k: infer_sequences(seqs, "ktails", k=k) for k in (1, 2, 3)}
    b_nodes = {k: sum(1 for n in r.model.nodes if n.state == "b") for k, r in by_k.items()}
    assert b_nodes == {1: 1, 2: 2, 3: 2}
    assert by_k[2].paths[0] == by_k[2].paths[2]  # identical traces, identical paths
    assert by_k[3].details["distinct_traces"] == 2 and by_k[3].details["traces"] == 3


def test_k_below_one_is_refused() -> None:
    from quicsm.errors import InferenceError

    for engine in ("ktails", "synoptic"):
        with pytest.raises(InferenceError, match="k must be >= 1"):
            infer_sequences([["a"]], engine, k=0)


def test_default_k_is_two_and_long_unique_traces_work() -> None:
    seqs = [["a", "b"] * 500 + ["c"], ["a", "b"] * 499 + ["d"], ["a"]]
    res = infer_sequences(seqs, "ktails")
    assert res.model.params["k"] == 2
    check_paths(res.model, res.paths, seqs)
