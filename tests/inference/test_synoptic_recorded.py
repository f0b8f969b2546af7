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

from quicsm.inference.language import Automaton, isomorphic, same_language
from quicsm.inference.synoptic import infer_synoptic

RECORDED = Path(__file__).parent.parent / "data" / "synoptic" / "recorded.json.gz"
BUNDLED = ("fig13-desktop", "fig13-mobile", "fig10-v0.33.0", "fig10-v0.65.0", "fig10-all")
NOT_YET_ISOMORPHIC = {"fig13-desktop", "fig10-all"}
"""Bundled inputs where our model has Synoptic's size but another shape (issue 12, open)."""
MIN_LANGUAGE_EQUAL = 290
"""Measured 2026-11-23: 290 of 305 inputs language-equal to Synoptic for some seed (notes: synoptic)."""


@cache
def recorded() -> dict[str, Any]:
    with gzip.open(RECORDED, "rt", encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)["inputs"]
    return data


def synoptic_models(name: str) -> list[Automaton]:
    return [
        Automaton.from_edges(dict(enumerate(m["labels"])), (tuple(e) for e in m["edges"]))
        for m in recorded()[name]["synoptic"]
    ]


def test_recording_covers_bundled_traces_and_random_logs() -> None:
    data = recorded()
    assert set(BUNDLED) <= set(data)
    assert sum(name.startswith("rand-") for name in data) >= 300
    assert all([m["seed"] for m in rec["synoptic"]] == [1, 2, 3, 4, 5] for rec in data.values())


def test_node_counts_within_synoptic_range_and_languages_equal() -> None:
    outside: list[tuple[str, int, list[int]]] = []
    equal = 0
    for name, rec in recorded().items():
        ours = infer_synoptic(rec["sequences"]).model
        theirs = synoptic_models(name)
        sizes = [len(a.labels) for a in theirs]
        if not min(sizes) <= len(ours.nodes) <= max(sizes):
            outside.append((name, len(ours.nodes), sizes))
        equal += any(same_language(ours, a) for a in theirs)
    assert outside == []
    assert equal >= MIN_LANGUAGE_EQUAL, f"{equal} of {len(recorded())} language-equal"


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason="split choice differs"))
        if n in NOT_YET_ISOMORPHIC
        else n
        for n in BUNDLED
    ],
)
def test_bundled_traces_give_one_of_synoptics_models(name: str) -> None:
    ours = infer_synoptic(recorded()[name]["sequences"]).model
    assert any(isomorphic(ours, a) for a in synoptic_models(name))


def test_comparison_tells_different_models_apart() -> None:
    """The checks above could pass vacuously if the comparison said yes to anything."""
    a, b = synoptic_models("fig10-all")[0], synoptic_models("fig13-mobile")[0]
    assert same_language(a, a) and isomorphic(a, a)
    assert not same_language(a, b) and not isomorphic(a, b)
