"""Distinct sequences folded with arrays equal the dictionary fold, also when hashes collide."""

from __future__ import annotations

import random

import numpy as np
import pytest

from quicsm.traces import distinct as D
from quicsm.traces.distinct import PackedSequences, distinct


def _pack(rows: list[list[int]], rng: random.Random) -> PackedSequences:
    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    codes = np.asarray([c for r in rows for c in r], np.int64)
    return PackedSequences.build(
        ["A", "B", "C"],
        codes,
        offsets,
        np.asarray([rng.randint(1, 5) for _ in rows], np.int64),
        np.asarray([rng.randint(0, 50) for _ in rows], np.int64),
        np.asarray([rng.randint(0, 10**12) for _ in range(len(codes))], np.int64),
    )


def _as_dict(p: PackedSequences) -> list[tuple[tuple[int, ...], int, int, list[int]]]:
    b = p.offsets.tolist()
    return [
        (
            tuple(p.codes[b[i] : b[i + 1]].tolist()),
            int(p.counts[i]),
            int(p.events[i]),
            p.durations_us[b[i] : b[i + 1]].tolist(),
        )
        for i in range(len(p))
    ]


def _random_rows(rng: random.Random, n: int) -> list[list[int]]:
    # few letters and short rows: many repeats, empty rows, rows that are prefixes of others
    return [[rng.randrange(3) for _ in range(rng.randrange(0, 5))] for _ in range(n)]


@pytest.mark.parametrize("seed", range(20))
def test_array_fold_equals_dictionary_fold(seed: int) -> None:
    rng = random.Random(seed)
    p = _pack(_random_rows(rng, 300), rng)
    got, want = distinct(p), D._distinct_by_dict(p)
    assert _as_dict(got) == _as_dict(want)
    assert len(got) < len(p)  # there were repeats to fold
    assert int(got.counts.sum()) == int(p.counts.sum()) and int(got.durations_us.sum()) == int(p.durations_us.sum())


def test_first_appearance_order_and_refolding_is_stable() -> None:
    rng = random.Random(7)
    rows = [[2, 1], [0], [2, 1], [], [0], [1, 2]]
    got = distinct(_pack(rows, rng))
    assert [k for k, *_ in _as_dict(got)] == [(2, 1), (0,), (), (1, 2)]
    halves = PackedSequences.concat(
        [distinct(_pack(rows[:3], random.Random(1))), distinct(_pack(rows[3:], random.Random(2)))]
    )
    assert [k for k, *_ in _as_dict(distinct(halves))] == [(2, 1), (0,), (), (1, 2)]


def test_a_hash_collision_is_caught_not_merged(monkeypatch: pytest.MonkeyPatch) -> None:
    """With multipliers of zero every sequence of a length hashes alike: the check must split them."""
    monkeypatch.setattr(D, "_BASES", (np.uint64(0), np.uint64(0)))
    rng = random.Random(3)
    p = _pack(_random_rows(rng, 200), rng)
    assert _as_dict(distinct(p)) == _as_dict(D._distinct_by_dict(p))
    assert len(distinct(p)) > 5


def test_summary_codes_encode_as_the_engines_encode_lists() -> None:
    """learn hands the engines an EncodedLog built from a summary's label table: it must be the
    log encode_sequences makes from the same sequences as lists of names."""
    from quicsm.inference.packed import EncodedLog, encode_sequences

    table = ["SlowStart", "CongestionAvoidance", "unused", "ApplicationLimited", "Recovery"]
    rows = [[0, 1, 4], [3], [], [1, 0, 1]]
    offsets = np.cumsum([0] + [len(r) for r in rows])
    log = EncodedLog.from_codes(table, np.asarray([c for r in rows for c in r], np.int64), offsets)
    lists = [[table[c] for c in r] for r in rows]
    want = encode_sequences(lists)
    assert log.names == want.names and "unused" not in log.names
    assert np.array_equal(log.codes, want.codes) and np.array_equal(log.offsets, want.offsets)
    assert list(log) == lists and log[-1] == lists[-1] and len(log) == 4
    assert encode_sequences(log) is log


@pytest.mark.parametrize("seed", range(20))
def test_ranges_is_the_concatenation_of_aranges(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 30))
    starts = rng.integers(0, 1000, n)
    lengths = rng.integers(0, 5, n)  # zero-length segments included
    want = [x for s, k in zip(starts.tolist(), lengths.tolist()) for x in range(s, s + k)]
    got = D.ranges(starts, lengths)
    assert got.dtype == np.int64 and got.tolist() == want
