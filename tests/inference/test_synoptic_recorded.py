"""Our ``synoptic`` engine against the original Synoptic's recorded models (no Java needed).

``tests/data/synoptic/recorded.json.gz`` holds, per input, the state sequences and Synoptic's final
model for ``--randomSeed`` 1..5 (how it was made: ``tests/data/synoptic/README.md``). Synoptic's
own runs differ between seeds, so the goal is: our model accepts the same traces as Synoptic's model
for at least one seed, and our node count lies within Synoptic's range over the seeds.
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from model_language import Automaton, isomorphic, language_classes, same_language

from quicsm.inference import jvm
from quicsm.inference.synoptic import infer_synoptic


@pytest.fixture(autouse=True)
def _recordings_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """These recordings come from the javac-default, one-jar build of the original (tests/data/synoptic/
    README.md), not the build.xml one the replay follows by default: replay that build's hash order."""
    monkeypatch.setattr(jvm, "SYNOPTIC_HASH_OFFSET", jvm.SYNOPTIC_BUILDS["javac-default-one-jar"])


RECORDED = Path(__file__).parent.parent / "data" / "synoptic" / "recorded.json.gz"
AT_SIZE = RECORDED.with_name("recorded-at-size.json.gz")
"""Synoptic at the sizes people run it on (issue 24): 10^3 - 10^4 events, seeds 1-5 (README.md there)."""
BUNDLED = ("fig13-desktop", "fig13-mobile", "fig10-v0.33.0", "fig10-v0.65.0", "fig10-all")
MEASURED = {  # 305 inputs: (language-equal for some seed >= , node count outside the range <=)
    "consistent": (252, 5),  # 2026-11-23
    "stitch": (301, 0),  # 2026-11-23
    "default": (303, 1),  # 2026-11-26: the replay of seed 1 (the one outside: rand-038, below)
}
"""The default replays ``java -jar synoptic.jar --randomSeed=1``; these recordings were made by one JVM
running Synoptic once per input and seed, whose identity hashes (and so invariant order) differ. On the
6 inputs where the default is not isomorphic to the recorded seed-1 model (fig10-all, fig10-v0.65.0,
rand-038, rand-115, rand-210, rand-283) it is isomorphic to what ``java -jar`` with seed 1 draws (run
2026-11-26 with the jar of README.md); rand-038's 8 nodes, one fewer than every recorded seed, are
that run's."""
ISOMORPHIC = {  # bundled inputs whose model is isomorphic to one of Synoptic's (measured)
    "consistent": {"fig13-desktop", "fig13-mobile"},
    "stitch": set(BUNDLED),
    "default": set(BUNDLED),
}


def _refine(name: str) -> str | None:
    return None if name == "default" else name


@cache
def recorded(path: Path = RECORDED) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)["inputs"]
    return data


def synoptic_models(name: str, path: Path = RECORDED) -> list[Automaton]:
    return [
        Automaton.from_edges(dict(enumerate(m["labels"])), (tuple(e) for e in m["edges"]))
        for m in recorded(path)[name]["synoptic"]
    ]


def test_recording_covers_bundled_traces_and_random_logs() -> None:
    data = recorded()
    assert set(BUNDLED) <= set(data)
    assert sum(name.startswith("rand-") for name in data) >= 300
    assert all([m["seed"] for m in rec["synoptic"]] == [1, 2, 3, 4, 5] for rec in data.values())


@pytest.mark.parametrize("refine", sorted(MEASURED))
def test_node_counts_and_languages_against_synoptic(refine: str) -> None:
    outside: list[tuple[str, int, list[int]]] = []
    equal = 0
    for name, rec in recorded().items():
        ours = infer_synoptic(rec["sequences"], refine=_refine(refine)).model
        theirs = synoptic_models(name)
        sizes = [len(a.labels) for a in theirs]
        if not min(sizes) <= len(ours.nodes) <= max(sizes):
            outside.append((name, len(ours.nodes), sizes))
        equal += any(same_language(ours, a) for a in theirs)
    least_equal, most_outside = MEASURED[refine]
    assert len(outside) <= most_outside, outside
    assert equal >= least_equal, f"{equal} of {len(recorded())} language-equal"


@pytest.mark.parametrize("refine", sorted(ISOMORPHIC))
def test_bundled_traces_give_one_of_synoptics_models(refine: str) -> None:
    got = {
        name
        for name in BUNDLED
        if any(
            isomorphic(infer_synoptic(recorded()[name]["sequences"], refine=_refine(refine)).model, a)
            for a in synoptic_models(name)
        )
    }
    assert got >= ISOMORPHIC[refine]


def test_comparison_tells_different_models_apart() -> None:
    """The checks above could pass vacuously if the comparison said yes to anything."""
    a, b = synoptic_models("fig10-all")[0], synoptic_models("fig13-mobile")[0]
    assert same_language(a, a) and isomorphic(a, a)
    assert not same_language(a, b) and not isomorphic(a, b)


def test_jar_engine_reads_a_real_synoptic_json_export(tmp_path: Path) -> None:
    """The ``synoptic-jar`` reader on Synoptic's real ``-j`` output (fig13-mobile, seed 1; README)."""
    from quicsm.inference.packed import encode_sequences, result_from_nodes
    from quicsm.inference.synoptic_jar import event_nodes, read_synoptic_json

    path = tmp_path / "model.json"
    with gzip.open(RECORDED.parent / "fig13-mobile.s1.json.gz", "rt", encoding="utf-8") as fh:
        path.write_text(fh.read())
    seqs = recorded()["fig13-mobile"]["sequences"]
    model = read_synoptic_json(str(path))
    nodes = event_nodes(model, seqs, str(path))
    _, offsets = encode_sequences(seqs).framed()
    res = result_from_nodes("synoptic-jar", model.labels, nodes, offsets, {})
    seed1 = synoptic_models("fig13-mobile")[0]
    assert isomorphic(res.model, seed1)
    assert len(res.model.nodes) == len(seed1.labels) > len(set(seed1.labels.values()))


AT_SIZE_INPUTS = 38
"""Inputs recorded at size (2026-11-25: 24; 2026-11-26: 38)."""
SEEDS_DISAGREE = {
    "bench-1k",
    "bench-1k-s1",
    "bench-1k-s2",
    "bench-1k-s3",
    "bench-short-1k",
    "bench-long-1k",
    "bench-desktop-1k",
    "bench-throttled-1k",
    "markov-6st-m100-x2-f3-1k",
    "markov-8st-m30-x3-f2-1k",
    "markov-7st-m200-x1-f3-1k",
    "markov-6st-m60-x3-f3-1k",
    "markov-4st-m100-x2-f2-1k",
    "bench-1k-s4",
    "fig10-v0.52.0-jitter",
    "qlog-quiche",
    "fig10-jitter",
    "traces-all",
    "check-reno-a",
    "markov-4st-m60-x3-f2-2.5k",
    "table4-quicgo-tcp4",
}
"""Measured, ``refine="stitch"``: the inputs whose model has none of the seeds' languages. On each
of them Synoptic's own five seeds draw more than one language (2-5), so what the original draws there
is its seeded shuffle's choice (the replay of a seed matches it: test_synoptic_replay.py). Every other
input's model has the language of some seed's model, the single-language inputs included."""
OUTSIDE_NODE_RANGE = {"bench-1k": 46, "markov-7st-m200-x1-f3-1k": 22, "table4-quicgo-tcp4": 30}
"""Measured: our node count where it lies outside the seeds' range (bench-1k 37-44, markov-7st 23-26,
table4-quicgo-tcp4 25-28)."""


def test_at_size_recording_is_at_size_with_every_seed() -> None:
    data = recorded(AT_SIZE)
    assert len(data) >= AT_SIZE_INPUTS
    for name, rec in data.items():
        events = sum(map(len, rec["sequences"]))
        assert 1_000 <= events <= 20_000, (name, events)
        assert [m["seed"] for m in rec["synoptic"]] == [1, 2, 3, 4, 5], name
        assert all(m["command"][-1].endswith("traces.log") and "-j" in m["command"] for m in rec["synoptic"])
    assert SEEDS_DISAGREE | set(OUTSIDE_NODE_RANGE) <= set(data)


@pytest.mark.slow
def test_at_size_default_is_synoptics_seed_1_model_on_every_input() -> None:
    """The default engine at size: the replay of seed 1 on every recorded input (all within its budget),
    so the model is isomorphic to the one ``java -jar synoptic.jar --randomSeed=1`` drew: node count
    inside the seeds' range and some seed's language on 38 of 38."""
    for name, rec in recorded(AT_SIZE).items():
        res = infer_synoptic(rec["sequences"])
        assert res.model.params == {"k": 1, "coarsen": True, "refine": "replay", "seed": 1}, name
        seed1 = synoptic_models(name, AT_SIZE)[0]
        assert isomorphic(res.model, seed1), name
        assert res.details["replay_work"] <= res.details["replay_budget"] / 4, name  # not near the bound


def test_default_replays_seed_1_and_gives_it_up_over_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """One input where Synoptic's seeds disagree: the default draws seed 1's model; with a budget too
    small for that, the stitch refinement's model, and the model's params say which ran."""
    from quicsm.inference import synoptic

    name = "markov-6st-m60-x3-f3-1k"  # five seeds, five languages
    seqs = recorded(AT_SIZE)[name]["sequences"]
    theirs = synoptic_models(name, AT_SIZE)
    res = infer_synoptic(seqs)
    assert res.model.params["refine"] == "replay" and res.model.params["seed"] == 1
    assert isomorphic(res.model, theirs[0]) and not same_language(res.model, theirs[1])
    assert 0 < res.details["replay_work"] <= synoptic.REPLAY_BUDGET
    monkeypatch.setattr(synoptic, "REPLAY_BUDGET", res.details["replay_work"] - 1)
    over = infer_synoptic(seqs)
    stitch = infer_synoptic(seqs, refine="stitch")
    assert over.model.params == {**stitch.model.params, "replay_over_budget": True}
    assert over.model.nodes == stitch.model.nodes and over.model.edges == stitch.model.edges
    assert "seed" not in over.model.params


@pytest.mark.slow
def test_at_size_node_counts_and_languages_against_synoptic() -> None:
    """Per input, the stitch refinement's model against Synoptic's five at size: the language of some
    seed's model unless the seeds disagree (SEEDS_DISAGREE), the node count inside the seeds' range
    unless measured outside (OUTSIDE_NODE_RANGE). Each case is held exactly, so a change either way shows."""
    cases: dict[str, tuple[bool, bool, int]] = {}
    for name, rec in recorded(AT_SIZE).items():
        ours = infer_synoptic(rec["sequences"], refine="stitch").model
        theirs = synoptic_models(name, AT_SIZE)
        sizes = [len(a.labels) for a in theirs]
        hit = any(same_language(ours, a) for a in theirs)
        cases[name] = (hit, min(sizes) <= len(ours.nodes) <= max(sizes), len(ours.nodes))
        if not hit:
            assert len(language_classes(theirs)) > 1, f"{name}: the seeds agree and we miss their language"
    assert {n for n, (hit, _, _) in cases.items() if not hit} == SEEDS_DISAGREE
    assert {n: size for n, (_, inside, size) in cases.items() if not inside} == OUTSIDE_NODE_RANGE
