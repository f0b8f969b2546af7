"""Distinct state sequences as arrays: one flat code array, no Python object per sequence or trace.

A summary of a fleet holds each distinct sequence once with its count, its event count and the summed
stay time at each position. Batches of traces are appended as arrays and folded into distinct ones by
hashing every sequence twice (64-bit polynomial hashes, vectorised) and then checking each sequence
against its group's first member code by code, so the grouping is exact: a hash collision sends that
fold to a dictionary instead (never silently merged). First appearance order is kept, which makes
merging inputs in order give the same summary as reading them as one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["PackedSequences", "distinct"]

_BASES = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F))
"""Odd 64-bit multipliers of the two hashes (arithmetic wraps modulo 2^64)."""


@dataclass(slots=True)
class PackedSequences:
    """Sequences ``codes[offsets[i]:offsets[i+1]]`` (ids into a label table) with per-sequence
    ``counts`` and ``events`` and per-position summed stays ``durations_us`` (aligned with ``codes``)."""

    codes: np.ndarray
    offsets: np.ndarray
    counts: np.ndarray
    events: np.ndarray
    durations_us: np.ndarray

    @classmethod
    def empty(cls) -> PackedSequences:
        z = np.zeros(0, np.int64)
        return cls(z, np.zeros(1, np.int64), z, z, z)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def relabel(self, remap: np.ndarray) -> PackedSequences:
        """The same sequences with codes mapped through ``remap`` (another summary's label table)."""
        return PackedSequences(remap[self.codes], self.offsets, self.counts, self.events, self.durations_us)

    def take(self, keep: np.ndarray) -> PackedSequences:
        """The sequences where ``keep`` (one bool per sequence) holds."""
        lengths = self.lengths()
        rows = np.repeat(keep, lengths)
        offsets = np.zeros(int(keep.sum()) + 1, np.int64)
        np.cumsum(lengths[keep], out=offsets[1:])
        return PackedSequences(self.codes[rows], offsets, self.counts[keep], self.events[keep], self.durations_us[rows])

    @staticmethod
    def concat(parts: list[PackedSequences]) -> PackedSequences:
        if len(parts) == 1:
            return parts[0]
        sizes = np.cumsum([0] + [len(p.codes) for p in parts[:-1]])
        return PackedSequences(
            np.concatenate([p.codes for p in parts]),
            np.concatenate([parts[0].offsets[:1]] + [p.offsets[1:] + s for p, s in zip(parts, sizes)]),
            np.concatenate([p.counts for p in parts]),
            np.concatenate([p.events for p in parts]),
            np.concatenate([p.durations_us for p in parts]),
        )


def _hashes(p: PackedSequences, seq_of: np.ndarray, pos: np.ndarray) -> list[np.ndarray]:
    lengths = p.lengths()
    nonempty = lengths > 0
    starts = p.offsets[:-1][nonempty]
    value = p.codes.astype(np.uint64) + np.uint64(1)
    out = []
    longest = int(lengths.max()) if len(lengths) else 0
    for base in _BASES:
        powers = np.cumprod(np.full(max(longest, 1), base, np.uint64))
        h = np.zeros(len(p), np.uint64)
        if len(starts):
            h[nonempty] = np.add.reduceat(value * powers[pos], starts)
        out.append(h)
    return out


def distinct(p: PackedSequences) -> PackedSequences:
    """Each distinct sequence once, in order of first appearance; counts, events and stays summed."""
    n = len(p)
    if n == 0:
        return p
    lengths = p.lengths()
    seq_of = np.repeat(np.arange(n), lengths)
    pos = np.arange(len(p.codes)) - p.offsets[seq_of]
    h1, h2 = _hashes(p, seq_of, pos)
    order = np.lexsort((h2, h1, lengths))  # stable: a group's first member comes first
    new = np.ones(n, bool)
    new[1:] = (lengths[order][1:] != lengths[order][:-1]) | (h1[order][1:] != h1[order][:-1])
    new[1:] |= h2[order][1:] != h2[order][:-1]
    group_sorted = np.cumsum(new) - 1
    first = order[new]  # per group (hash order): its first member
    rank = np.empty(len(first), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))  # groups in first-appearance order
    group = np.empty(n, np.int64)
    group[order] = rank[group_sorted]
    reps = np.sort(first)
    rep_of = reps[group]
    if not np.array_equal(p.codes[p.offsets[rep_of][seq_of] + pos], p.codes):
        return _distinct_by_dict(p)  # a hash collision: exact grouping the slow way
    d_lengths = lengths[reps]
    d_offsets = np.zeros(len(reps) + 1, np.int64)
    np.cumsum(d_lengths, out=d_offsets[1:])
    rep_seq_of = np.repeat(reps, d_lengths)
    d_pos = np.arange(int(d_offsets[-1])) - np.repeat(d_offsets[:-1], d_lengths)
    codes = p.codes[p.offsets[rep_seq_of] + d_pos]
    counts = np.zeros(len(reps), np.int64)
    np.add.at(counts, group, p.counts)
    events = np.zeros(len(reps), np.int64)
    np.add.at(events, group, p.events)
    durations = np.zeros(len(codes), np.int64)
    np.add.at(durations, d_offsets[group][seq_of] + pos, p.durations_us)
    return PackedSequences(codes, d_offsets, counts, events, durations)


def _distinct_by_dict(p: PackedSequences) -> PackedSequences:
    index: dict[tuple[int, ...], int] = {}
    keys: list[tuple[int, ...]] = []
    counts: list[int] = []
    events: list[int] = []
    durations: list[list[int]] = []
    bounds = p.offsets.tolist()
    codes, stays = p.codes.tolist(), p.durations_us.tolist()
    for i, (c, e) in enumerate(zip(p.counts.tolist(), p.events.tolist())):
        key = tuple(codes[bounds[i] : bounds[i + 1]])
        stay = stays[bounds[i] : bounds[i + 1]]
        at = index.get(key)
        if at is None:
            index[key] = len(keys)
            keys.append(key)
            counts.append(c)
            events.append(e)
            durations.append(stay)
        else:
            counts[at] += c
            events[at] += e
            durations[at] = [a + b for a, b in zip(durations[at], stay)]
    offsets = np.zeros(len(keys) + 1, np.int64)
    np.cumsum([len(k) for k in keys], out=offsets[1:])
    return PackedSequences(
        np.asarray([c for k in keys for c in k], np.int64),
        offsets,
        np.asarray(counts, np.int64),
        np.asarray(events, np.int64),
        np.asarray([d for row in durations for d in row], np.int64),
    )
