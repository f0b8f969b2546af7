"""Trace metadata read back from a Parquet store: every fast way of splitting the writer's layout must
give exactly what decoding each text whole gives, and anything else must take the whole-text path."""

from __future__ import annotations

import json
import random

import numpy as np
import pyarrow as pa
import pytest

from quicsm.traces import store_meta
from quicsm.traces.parquet import _meta_json
from quicsm.traces.store_meta import shell, split_texts, stored_meta

ODD = ["", "a", 'q"uote', "back\\slash", "caf\u00e9", "\u2603", "%s", "tab\there", "\U0001f600", '"}{,:']
PLAIN = ["a", "cubic", "0x7f01", "%s", "}{:[", " ", ",", "~"]
"""Values JSON writes without an escape (it escapes non-ASCII too: those take way 2)."""


def _random_meta(rng: random.Random, i: int, values: list[str] = ODD) -> dict[str, object]:
    pick = lambda: rng.choice(values) + str(rng.randrange(3))  # noqa: E731
    return {
        "id": f"f:{pick()}:{i}",
        "key": pick(),
        "cc": rng.choice(["cubic", "bbr", pick()]),
        "implementation": rng.choice([None, "quic-go", pick()]),
        "version": rng.choice([None, "v1", pick()]),
        "sources": rng.choice([[], ["a.log"], [pick(), pick()]]),
        "labels": rng.choice([{}, {"client": "desktop"}, {pick(): pick(), "z": pick()}]),
    }


def _rows(owned: tuple[list[str], list[str], list[str]], shared: object) -> list[tuple[object, ...]]:
    ids, keys, ccs = owned
    out = []
    for i, j in enumerate(shared.of):  # type: ignore[attr-defined]
        t = shared.templates[j]  # type: ignore[attr-defined]
        out.append((ids[i], keys[i], ccs[i], t.implementation, t.version, t.sources, t.labels))
    return out


def _read(texts: list[str], pick: list[int] | None = None) -> list[tuple[object, ...]]:
    """What the store reader gets for trace i = texts[pick[i]]."""
    order = np.arange(len(texts)) if pick is None else np.asarray(pick)
    return _rows(*stored_meta(pa.array(texts, pa.string()), order))


def _whole(texts: list[str], pick: list[int] | None = None) -> list[tuple[object, ...]]:
    chosen = texts if pick is None else [texts[i] for i in pick]
    shells = [shell(json.loads(t)) for t in chosen]
    return [(t.id, t.key, t.cc, t.implementation, t.version, t.sources, t.labels) for t in shells]


def _way(texts: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    """Which way read ``texts``: 1 (buffers), 2 (text by text) or 3 (whole)."""
    taken = []
    for name, way in (("_split_buffers", 1), ("split_texts", 2)):
        real = getattr(store_meta, name)

        def spy(*a: object, _real: object = real, _way: int = way) -> object:
            got = _real(*a)  # type: ignore[operator]
            if got is not None:
                taken.append(_way)
            return got

        monkeypatch.setattr(store_meta, name, spy)
    stored_meta(pa.array(texts, pa.string()), np.arange(len(texts)))
    monkeypatch.undo()
    return taken[0] if taken else 3


@pytest.mark.parametrize("seed", range(5))
def test_every_way_equals_whole_decoding(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    odd = [_meta_json(_random_meta(rng, i)) for i in range(300)]
    assert _read(odd) == _whole(odd) and _way(odd, monkeypatch) == 2
    assert len(split_texts(odd)[1].templates) < len(odd)  # type: ignore[index]
    shared = {k: v for k, v in _random_meta(rng, 0, PLAIN).items() if k not in ("id", "key", "cc")}
    plain = [_meta_json({**_random_meta(rng, i, PLAIN), **shared}) for i in range(300)]
    assert all("\\" not in t for t in plain)
    assert _read(plain) == _whole(plain) and _way(plain, monkeypatch) == 1
    parts = [{k: v for k, v in _random_meta(rng, j, PLAIN).items() if k not in ("id", "key", "cc")} for j in range(3)]
    runs = [_meta_json({**_random_meta(rng, i, PLAIN), **parts[(i // 50) % 3]}) for i in range(300)]
    assert _read(runs) == _whole(runs) and _way(runs, monkeypatch) == 1  # a shared part per run of 50
    mixed = [_meta_json({**_random_meta(rng, i, PLAIN), **rng.choice(parts)}) for i in range(300)]
    assert _read(mixed) == _whole(mixed) and _way(mixed, monkeypatch) == 1
    pick = [rng.randrange(300) for _ in range(500)]  # traces in any order, texts repeated
    assert _read(plain, pick) == _whole(plain, pick)
    assert _read(odd, pick) == _whole(odd, pick)


@pytest.mark.parametrize(
    "forged",
    [
        '{"cc":"a","id":"b","implementation":null,"key":"k","labels":{},"cc":"z"}',  # duplicate key
        '{"id":"b","cc":"a","implementation":null,"key":"k","sources":[]}',  # other order
        '{"cc":"a","id":5,"implementation":null,"key":"k","version":null}',  # a number for an id
        '{"cc":"a","id":"b","implementation":null,"key":"k","version":null,"id":"c"}',
        # a "key" member inside a nested implementation: cutting there would invent a key
        '{"cc":"a","id":"b","implementation":{"q":1,"key":"k","labels":{}},"version":null}',
        '{"cc":"a","id":"c","implementation":"x","implementation":null,"key":"k2","labels":{}}',
    ],
)
def test_other_layouts_decode_whole(forged: str, monkeypatch: pytest.MonkeyPatch) -> None:
    good = _meta_json(_random_meta(random.Random(9), 0, PLAIN))
    texts = [good, forged, good]
    assert _read(texts) == _whole(texts) and _way(texts, monkeypatch) == 3


def test_spaces_and_a_last_key_split_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [
        '{"cc":"a","id":"c","implementation":null,"key":"k2","labels":{"l":"v"}}',
        '{"cc":"a","id":"d","implementation":null,"key":"k3","labels":{"l":"v"}}',
        '{"cc": "a" ,"id":"e","implementation":null,"key":"k4"}',  # spaces; the key as the last member
    ]
    assert _read(texts) == _whole(texts) and _way(texts, monkeypatch) == 2
    assert len(split_texts(texts)[1].templates) == 2  # type: ignore[index]
    one = texts[:2]
    assert _read(one) == _whole(one) and _way(one, monkeypatch) == 1


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
    good = _meta_json(_random_meta(random.Random(1), 0, PLAIN))
    with pytest.raises(ValueError):
        _read([good, broken])
