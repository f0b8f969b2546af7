"""Distinct state sequences as arrays: one flat code array, no Python object per sequence or trace.

A summary of a fleet holds each distinct sequence once with its count, its event count and the summed
stay time at each position. Sequences carry two 64-bit hashes made when they are packed (from their
labels' names, so relabelling into another summary's table keeps them). Folding groups sequences by
length and hashes, then checks every repeat against its group's first member code by code, so the
grouping is exact: a hash collision sends that fold to a dictionary instead (never silently merged).
Work and memory beyond the hashes are in proportion to the repeats, not to all positions. First
appearance order is kept, which makes merging inputs in order give the same summary as reading them
as one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["PackedSequences", "distinct", "label_hashes", "ranges", "stable_argsort", "unique_inverse"]

_BASES = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F))
"""Odd 64-bit multipliers of the two position-weighted sums (arithmetic wraps modulo 2^64)."""


def label_hashes(names: Sequence[str]) -> np.ndarray:
    """Two 64-bit values per label, the same in every process (Python's str hash is salted per run)."""
    out = np.zeros((len(names), 2), np.uint64)
    for i, name in enumerate(names):
        digest = hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        out[i] = np.frombuffer(digest, np.uint64)
    return out


@dataclass(slots=True)
class PackedSequences:
    """Sequences ``codes[offsets[i]:offsets[i+1]]`` (int32 ids into a label table) with per-sequence
    ``counts``, ``events`` and ``hashes`` (n x 2) and per-position summed stays ``durations_us``."""

    codes: np.ndarray
    offsets: np.ndarray
    counts: np.ndarray
    events: np.ndarray
    durations_us: np.ndarray
    hashes: np.ndarray

    @classmethod
    def build(
        cls,
        names: Sequence[str],
        codes: np.ndarray,
        offsets: np.ndarray,
        counts: np.ndarray,
        events: np.ndarray,
        durations_us: np.ndarray,
    ) -> PackedSequences:
        """Packed sequences over the label table ``names``, hashed."""
        codes = np.asarray(codes, np.int32)
        offsets = np.asarray(offsets, np.int64)
        return cls(
            codes,
            offsets,
            np.asarray(counts, np.int64),
            np.asarray(events, np.int64),
            np.asarray(durations_us, np.int64),
            _sequence_hashes(label_hashes(names), codes, offsets),
        )

    @classmethod
    def empty(cls) -> PackedSequences:
        z = np.zeros(0, np.int64)
        return cls(np.zeros(0, np.int32), np.zeros(1, np.int64), z, z, z, np.zeros((0, 2), np.uint64))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def relabel(self, remap: np.ndarray) -> PackedSequences:
        """The same sequences with codes mapped through ``remap`` (to another table of the same names)."""
        return PackedSequences(
            remap.astype(np.int32)[self.codes], self.offsets, self.counts, self.events, self.durations_us, self.hashes
        )

    def take(self, keep: np.ndarray) -> PackedSequences:
        """The sequences where ``keep`` (one bool per sequence) holds."""
        lengths = self.lengths()
        rows = np.repeat(keep, lengths)
        offsets = np.zeros(int(keep.sum()) + 1, np.int64)
        np.cumsum(lengths[keep], out=offsets[1:])
        return PackedSequences(
            self.codes[rows],
            offsets,
            self.counts[keep],
            self.events[keep],
            self.durations_us[rows],
            self.hashes[keep],
        )

    @staticmethod
    def concat(parts: list[PackedSequences]) -> PackedSequences:
        """All ``parts`` in order, as one. Empties ``parts`` as it copies them, so a part's memory is
        given back as soon as it is in the result (a fleet's summary is folded from a hundred parts)."""
        parts[:] = [p for p in parts if len(p)] or parts[:1]
        if len(parts) == 1:
            return parts.pop()
        n = sum(len(p) for p in parts)
        k = sum(len(p.codes) for p in parts)
        out = PackedSequences(
            np.empty(k, np.int32),
            np.zeros(n + 1, np.int64),
            np.empty(n, np.int64),
            np.empty(n, np.int64),
            np.empty(k, np.int64),
            np.empty((n, 2), np.uint64),
        )
        i = j = 0
        while parts:
            p = parts.pop(0)
            m, c = len(p), len(p.codes)
            out.codes[j : j + c] = p.codes
            out.offsets[i + 1 : i + m + 1] = p.offsets[1:] - p.offsets[0] + j
            out.counts[i : i + m] = p.counts
            out.events[i : i + m] = p.events
            out.durations_us[j : j + c] = p.durations_us
            out.hashes[i : i + m] = p.hashes
            i, j = i + m, j + c
        return out


def _sequence_hashes(per_label: np.ndarray, codes: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per sequence, for each of the two label values: sum over positions of value * base^(position+1)."""
    lengths = np.diff(offsets)
    out = np.zeros((len(lengths), 2), np.uint64)
    nonempty = lengths > 0
    if not len(codes):
        return out
    pos = np.arange(len(codes)) - np.repeat(offsets[:-1], lengths)
    starts = offsets[:-1][nonempty]
    for j, base in enumerate(_BASES):
        powers = np.cumprod(np.full(int(lengths.max()), base, np.uint64))
        out[nonempty, j] = np.add.reduceat(per_label[codes, j] * powers[pos], starts)
    return out


def distinct(p: PackedSequences) -> PackedSequences:
    """Each distinct sequence once, in order of first appearance; counts, events and stays summed."""
    n = len(p)
    if n < 2:
        return p
    lengths = p.lengths()
    h = p.hashes
    order = np.lexsort((h[:, 1], h[:, 0], lengths))  # stable: a group's first member comes first
    ls, h0, h1 = lengths[order], h[order, 0], h[order, 1]
    new = np.ones(n, bool)
    new[1:] = (ls[1:] != ls[:-1]) | (h0[1:] != h0[:-1]) | (h1[1:] != h1[:-1])
    first = order[new]  # per group (in hash order): its first member
    rank = np.empty(len(first), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))  # groups in first-appearance order
    group = np.empty(n, np.int64)
    group[order] = rank[np.cumsum(new) - 1]
    keep = np.zeros(n, bool)
    keep[first] = True
    if keep.all():
        return p
    out = p.take(keep)
    dup = np.flatnonzero(~keep)
    dup_len = lengths[dup]
    dup_seq = np.repeat(np.arange(len(dup)), dup_len)
    pos = np.arange(int(dup_len.sum())) - np.repeat(np.cumsum(dup_len) - dup_len, dup_len)
    src = p.offsets[dup][dup_seq] + pos
    dst = out.offsets[group[dup]][dup_seq] + pos
    if not np.array_equal(p.codes[src], out.codes[dst]):
        return _distinct_by_dict(p)  # a hash collision: exact grouping the slow way
    np.add.at(out.counts, group[dup], p.counts[dup])
    np.add.at(out.events, group[dup], p.events[dup])
    np.add.at(out.durations_us, dst, p.durations_us[src])
    return out


def _distinct_by_dict(p: PackedSequences) -> PackedSequences:
    first: dict[tuple[int, ...], int] = {}
    bounds = p.offsets.tolist()
    codes = p.codes.tolist()
    group = np.empty(len(p), np.int64)
    for i in range(len(p)):
        group[i] = first.setdefault(tuple(codes[bounds[i] : bounds[i + 1]]), len(first))
    keep = np.zeros(len(p), bool)
    keep[np.unique(group, return_index=True)[1]] = True
    out = p.take(keep)
    lengths = p.lengths()
    for i in np.flatnonzero(~keep).tolist():
        g = int(group[i])
        out.counts[g] += p.counts[i]
        out.events[g] += p.events[i]
        out.durations_us[out.offsets[g] : out.offsets[g] + lengths[i]] += p.durations_us[bounds[i] : bounds[i + 1]]
    return out


def unique_inverse(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, return_inverse=True)`` of integer keys, without a sort when their range is small
    next to their number (ids, pairs of ids): the values in use are marked over the range."""
    lo, hi = (int(key.min()), int(key.max())) if len(key) else (0, 0)
    if not len(key) or hi - lo > 4 * len(key) + 4096:
        uniq, inv = np.unique(key, return_inverse=True)
        return uniq, inv.reshape(-1)
    at = key - lo
    present = np.zeros(hi - lo + 1, bool)
    present[at] = True
    return np.flatnonzero(present) + lo, (np.cumsum(present) - 1)[at]


def stable_argsort(key: np.ndarray) -> np.ndarray:
    """``np.argsort(key, kind="stable")`` of integer keys. NumPy sorts 16-bit keys by radix, ten times
    faster than its merge sort of wider ones, so keys spanning less than 2^32 are sorted as two 16-bit
    digits, the low one first (each pass stable: ties keep their order)."""
    lo, hi = (int(key.min()), int(key.max())) if len(key) else (0, 0)
    if hi - lo >= 1 << 32:
        return np.argsort(key, kind="stable")
    key = key.astype(np.int64) - lo if lo else key
    if hi - lo < 1 << 16:
        return np.argsort(key.astype(np.uint16), kind="stable")
    low = np.argsort((key & 0xFFFF).astype(np.uint16), kind="stable")
    return low[np.argsort((key[low] >> 16).astype(np.uint16), kind="stable")]


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + n)`` for every (s, n), without a Python loop: the positions of
    variable-length segments to gather in one ``take``."""
    lengths = np.asarray(lengths, np.int64)
    heads = np.cumsum(lengths) - lengths
    return np.repeat(np.asarray(starts, np.int64) - heads, lengths) + np.arange(int(lengths.sum()), dtype=np.int64)
