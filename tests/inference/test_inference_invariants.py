"""Mined invariants against their definitions (brute force), on hand-made and random traces."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st
from inference_oracles import brute_invariants

from quicsm.inference.invariants import Invariant, mine_encoded
from quicsm.inference.packed import encode_sequences

TRACES = st.lists(st.lists(st.sampled_from("abcd"), max_size=8), min_size=1, max_size=6)


def mine_invariants(sequences: Sequence[Sequence[str]]) -> list[Invariant]:
    """All AFby/NFby/AP invariants (and ``INITIAL AFby x``) true of every sequence, sorted."""
    return mine_encoded(encode_sequences(sequences)).invariants()


def test_hand_made_traces_match_definitions() -> None:
    seqs = [
        ["Init", "SlowStart", "CongestionAvoidance", "Recovery", "CongestionAvoidance"],
        ["Init", "SlowStart", "Recovery", "CongestionAvoidance"],
        ["Init", "SlowStart", "ApplicationLimited"],
    ]
    mined = set(mine_invariants(seqs))
    assert mined == brute_invariants(seqs)
    # the facts the brute force establishes, spelled out: Init once and first, SlowStart in every trace
    assert Invariant("NFby", "Init", "Init") in mined
    assert Invariant("AFby", "INITIAL", "SlowStart") in mined
    assert Invariant("AFby", "INITIAL", "Recovery") not in mined
    assert Invariant("AP", "SlowStart", "Recovery") in mined
    assert Invariant("NFby", "CongestionAvoidance", "Recovery") not in mined


def test_invariants_are_sorted_and_named() -> None:
    mined = mine_invariants([["a", "b"], ["a", "b", "b"]])
    assert mined == sorted(mined)
    assert "a AlwaysFollowedBy b" in {str(i) for i in mined}
    assert "a AlwaysPrecedes b" in {str(i) for i in mined}


def test_empty_traces_break_eventually() -> None:
    seqs = [["a"], []]
    mined = set(mine_invariants(seqs))
    assert mined == brute_invariants(seqs)
    assert Invariant("AFby", "INITIAL", "a") not in mined


@settings(max_examples=300, deadline=None)
@given(TRACES)
def test_random_traces_match_definitions(seqs: list[list[str]]) -> None:
    assert set(mine_invariants(seqs)) == brute_invariants(seqs)
