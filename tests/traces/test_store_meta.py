"""Trace metadata read back from a Parquet store: the fast split of the writer's layout must give exactly
what decoding each text whole gives, and anything else must take the whole-text path."""

from __future__ import annotations

import json
import random

import pytest

from quicsm.traces.parquet import _meta_json, _shell, _stored_meta

ODD = ["", "a", 'q"uote', "back\\slash", "caf\u00e9", "\u2603", "%s", "tab\there", "\U0001f600", '"}{,:']


def _random_meta(rng: random.Random, i: int) -> dict[str, object]:
    pick = lambda: rng.choice(ODD) + str(rng.randrange(3))  # noqa: E731
    return {
        "id": f"f:{pick()}:{i}",
        "key": pick(),
        "cc": rng.choice(["cubic", "bbr", pick()]),
        "implementation": rng.choice([None, "quic-go", pick()]),
        "version": rng.choice([None, "v1", pick()]),
        "sources": rng.choice([[], ["a.log"], [pick(), pick()]]),
        "labels": rng.choice([{}, {"client": "desktop"}, {pick(): pick(), "z": pick()}]),
    }


def _expanded(texts: list[str]) -> list[tuple[object, ...]]:
    (ids, keys, ccs), shared = _stored_meta(texts)
    out = []
    for i, j in enumerate(shared.of):
        t = shared.templates[j]
        out.append((ids[i], keys[i], ccs[i], t.implementation, t.version, t.sources, t.labels))
    return out


def _whole(texts: list[str]) -> list[tuple[object, ...]]:
    shells = [_shell(json.loads(t)) for t in texts]
    return [(t.id, t.key, t.cc, t.implementation, t.version, t.sources, t.labels) for t in shells]


@pytest.mark.parametrize("seed", range(5))
def test_split_of_the_writers_layout_equals_whole_decoding(seed: int) -> None:
    rng = random.Random(seed)
    texts = [_meta_json(_random_meta(rng, i)) for i in range(300)]
    (_, _, _), shared = _stored_meta(texts)
    assert len(shared.templates) < len(texts)  # the split path was taken: shared parts kept once
    assert _expanded(texts) == _whole(texts)


@pytest.mark.parametrize(
    "forged",
    [
        '{"cc":"a","id":"b","implementation":null,"key":"k","labels":{},"cc":"z"}',  # duplicate key
        '{"id":"b","cc":"a","implementation":null,"key":"k","sources":[]}',  # other order
        '{"cc":"a","id":5,"implementation":null,"key":"k","version":null}',  # a number for an id
        '{"cc":"a","id":"b","implementation":null,"key":"k","version":null,"id":"c"}',
        # a "key" member inside a nested implementation: cutting there would invent a key
        '{"cc":"a","id":"b","implementation":{"q":1,"key":"k","labels":{}},"version":null}',
    ],
)
def test_other_layouts_decode_whole(forged: str) -> None:
    good = _meta_json(_random_meta(random.Random(9), 0))
    texts = [good, forged, good]
    assert _expanded(texts) == _whole(texts)
    (_, _, _), shared = _stored_meta(texts)
    assert len(shared.templates) == 3  # one per trace: the whole-text path


def test_spaces_and_a_last_key_split_exactly_other_shapes_decode_whole() -> None:
    texts = [
        '{"cc":"a","id":"c","implementation":null,"key":"k2","labels":{"l":"v"}}',
        '{"cc":"a","id":"d","implementation":null,"key":"k3","labels":{"l":"v"}}',
        '{"cc": "a" ,"id":"e","implementation":null,"key":"k4"}',  # spaces; the key as the last member
    ]
    assert _expanded(texts) == _whole(texts)
    assert len(_stored_meta(texts)[1].templates) == 2  # split: the shared parts are kept once
    for other in (
        '{"cc":"a","id":"c","implementation":"x","implementation":null,"key":"k2","labels":{}}',
    ):
        assert _expanded([*texts, other]) == _whole([*texts, other])


@pytest.mark.parametrize(
    "broken",
    [
        '{"cc":"a","id":"b\\x","implementation":null,"key":"k","labels":{}}',  # bad escape in an owned string
        '{"cc":"a","id":"b","implementation":null,"key":"k","labels":{]}',  # bad shared part
        '{"cc":"a","id":"b\nc","implementation":null,"key":"k","labels":{}}',  # raw control character
        '{"cc":"a","id":"c","implementation":null,"key":"k2","labels":{}',  # no closing brace
    ],
)
def test_broken_texts_fail_as_whole_decoding_fails(broken: str) -> None:
    with pytest.raises(ValueError):
        json.loads(broken)
    with pytest.raises(ValueError):
        _stored_meta([_meta_json(_random_meta(random.Random(1), 0)), broken])
