"""Model differences: structure by state names, shortest distinguishing sequences checked by brute force."""

from __future__ import annotations

import itertools

from annotate_oracle import model_from_paths

from quicsm.compare.modeldiff import behavioural_diff, diff_models, structural_diff
from quicsm.compare.stays import connections
from quicsm.inference import infer_sequences
from quicsm.inference.model import INITIAL, TERMINAL, Model
from quicsm.traces.events import Trace, TraceEvent

DESKTOP = [
    ["SlowStart", "CongestionAvoidance"],
    ["SlowStart", "CongestionAvoidance", "Recovery", "CongestionAvoidance"],
]
MOBILE = [
    ["SlowStart", "CongestionAvoidance", "ApplicationLimited", "CongestionAvoidance"],
    ["SlowStart", "ApplicationLimited"],
]


def dfg(seqs: list[list[str]]) -> Model:
    return infer_sequences(seqs, "dfg").model


def brute_shortest(a: Model, b: Model, max_len: int = 6) -> int | None:
    """Length of the shortest sequence a accepts and b rejects, by enumerating all sequences."""
    alphabet = sorted(set(a.state_names()) | set(b.state_names()))
    for n in range(max_len + 1):
        for seq in itertools.product(alphabet, repeat=n):
            if a.accepts(seq) and not b.accepts(seq):
                return n
    return None


def test_structural_difference_by_state_names() -> None:
    a, b = dfg(DESKTOP), dfg(MOBILE)
    s_a, s_b, e_a, e_b = structural_diff(a, b)
    assert s_a == ("Recovery",) and s_b == ("ApplicationLimited",)
    assert ("CongestionAvoidance", "Recovery") in e_a and ("CongestionAvoidance", TERMINAL) not in e_a
    assert ("SlowStart", "ApplicationLimited") in e_b


def test_witnesses_are_shortest_and_really_distinguish() -> None:
    a, b = dfg(DESKTOP), dfg(MOBILE)
    for x, y in ((a, b), (b, a)):
        found, cut = behavioural_diff(x, y, limit=4)
        assert found and not cut
        assert len({w.sequence for w in found}) == len(found)
        for w in found:
            assert x.accepts(w.sequence) and not y.accepts(w.sequence)
        assert len(found[0].sequence) == brute_shortest(x, y)
        assert [len(w.sequence) for w in found] == sorted(len(w.sequence) for w in found)


def test_divergence_names_the_missing_step() -> None:
    a, b = dfg(DESKTOP), dfg(MOBILE)
    found, _ = behavioural_diff(b, a, limit=1)
    assert found[0].sequence == ("SlowStart", "ApplicationLimited")
    assert "SlowStart -> ApplicationLimited" in found[0].divergence


def test_identical_models_have_no_difference() -> None:
    a, b = dfg(DESKTOP), dfg(list(reversed(DESKTOP)))
    md = diff_models(a, b)
    assert md.to_json()["identical_language"]
    assert not (md.states_only_in_a or md.states_only_in_b or md.edges_only_in_a or md.edges_only_in_b)
    assert not (md.a_not_b or md.b_not_a)


def test_nfa_with_split_states_is_handled() -> None:
    # B splits CongestionAvoidance in two nodes: the first may not end, the second may; same language as
    # "SS CA (AL CA)*" only when the split is undone, so a search over subsets must find SS CA.
    labels = [INITIAL, "SlowStart", "CongestionAvoidance", "ApplicationLimited", "CongestionAvoidance", TERMINAL]
    b = model_from_paths("ktails", labels, [[0, 1, 2, 3, 4, 5]]).model
    a = dfg([["SlowStart", "CongestionAvoidance"]])
    found, _ = behavioural_diff(a, b, limit=2)
    assert found[0].sequence == ("SlowStart", "CongestionAvoidance")
    assert "cannot end" in found[0].divergence
    assert brute_shortest(a, b) == 2
    back, _ = behavioural_diff(b, a, limit=2)
    assert back[0].sequence == ("SlowStart", "CongestionAvoidance", "ApplicationLimited", "CongestionAvoidance")


def _trace(tid: str, states: list[str]) -> Trace:
    evs = [TraceEvent(i * 1000, s, prev=(states[i - 1] if i else "Init")) for i, s in enumerate(states)]
    evs.append(TraceEvent(len(states) * 1000, states[-1], kind="close"))
    return Trace(tid, "cubic", evs)


def test_traces_rejected_by_the_other_model_are_counted() -> None:
    ta = [_trace(f"a{i}", ["Init", *s]) for i, s in enumerate(DESKTOP)]
    tb = [_trace(f"b{i}", ["Init", *s]) for i, s in enumerate(MOBILE)]
    a = dfg([t.states() for t in ta])
    b = dfg([t.states() for t in tb])
    md = diff_models(a, b, names=("desktop", "mobile"), rows=(connections(ta), connections(tb)))
    assert md.rejected["a_by_b"]["count"] == 1 and md.rejected["a_by_b"]["example"] == "a1"
    assert md.rejected["b_by_a"]["count"] == 2
