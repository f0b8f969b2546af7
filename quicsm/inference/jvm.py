"""The few JVM behaviours that decide the original Synoptic's choices, so they can be replayed.

Synoptic draws its random choices from one ``java.util.Random`` seeded with ``--randomSeed`` and
lists its mined invariants in an order that comes from a ``HashSet`` of trace paths, i.e. from their
identity hash codes. Both are deterministic:

- :class:`JavaRandom`: ``java.util.Random``'s 48-bit linear congruential generator (multiplier
  ``0x5DEECE66D``, addend ``0xB``), ``nextInt(bound)`` and ``Collections.shuffle(list, rnd)``
  exactly as the JDK specifies them.
- :func:`string_hash` and :func:`hashset_order`: ``String.hashCode`` and the iteration order of a
  ``java.util.HashSet`` (buckets of the spread hash, insertion order within a bucket, capacity
  doubling from 16 at load factor 0.75).
- :func:`identity_hashes`: HotSpot's identity hash codes on the main thread under its default
  ``-XX:hashCode=5`` (Marsaglia's xor-shift, seeded from the first value of ``os::random``). A
  single-threaded program asking for identity hashes in the same order gets the same values in
  every run of the same JVM; :data:`SYNOPTIC_HASH_OFFSET` says where Synoptic's trace paths fall in
  that sequence.
"""

from __future__ import annotations

from collections.abc import MutableSequence, Sequence
from typing import TypeVar

import numpy as np

__all__ = [
    "SYNOPTIC_HASH_OFFSET",
    "JavaRandom",
    "hashset_order",
    "identity_hashes",
    "string_hash",
    "trace_path_hash_index",
]

_MASK48 = (1 << 48) - 1
_MULTIPLIER = 0x5DEECE66D
_ADDEND = 0xB

T = TypeVar("T")


class JavaRandom:
    """``java.util.Random(seed)``: the draws Synoptic's ``--randomSeed=seed`` makes."""

    __slots__ = ("_seed",)

    def __init__(self, seed: int) -> None:
        self._seed = (seed ^ _MULTIPLIER) & _MASK48

    @property
    def state(self) -> int:
        """The 48-bit state (what the C replay, ``fastcheck.replay_rounds``, draws on from and hands back)."""
        return self._seed

    @state.setter
    def state(self, value: int) -> None:
        self._seed = value & _MASK48

    def next_bits(self, bits: int) -> int:
        """``Random.next(bits)``: the top ``bits`` of the advanced 48-bit state, as a signed int."""
        self._seed = (self._seed * _MULTIPLIER + _ADDEND) & _MASK48
        value = self._seed >> (48 - bits)
        return value - (1 << bits) if bits == 32 and value >= 1 << 31 else value

    def next_int(self, bound: int) -> int:
        """``Random.nextInt(bound)``, bound > 0."""
        if bound <= 0:
            raise ValueError("bound must be positive")
        r = self.next_bits(31)
        m = bound - 1
        if bound & m == 0:  # a power of two: the high bits
            return (bound * r) >> 31
        u = r
        while True:
            r = u % bound
            if u - r + m < 1 << 31:  # Java: u - r + m >= 0 as a 32-bit int
                return r
            u = self.next_bits(31)

    def shuffle(self, items: MutableSequence[T]) -> None:
        """``Collections.shuffle(list, rnd)`` on a random-access list: swap i-1 with nextInt(i), i = size..2."""
        for i in range(len(items), 1, -1):
            j = self.next_int(i)
            items[i - 1], items[j] = items[j], items[i - 1]


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def string_hash(text: str) -> int:
    """``String.hashCode()`` (UTF-16 code units, 32-bit wrap-around)."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return _int32(h)


def hashset_order(hashes: Sequence[int]) -> list[int]:
    """Indices of elements added in this order to a ``java.util.HashSet`` (with these ``hashCode()``
    values), in the order the set iterates them.

    ``HashMap`` puts a key in bucket ``(h ^ (h >>> 16)) & (capacity - 1)`` and appends it to that
    bucket's list; a resize keeps each bucket's order, so the final order is by bucket, then by
    insertion. The capacity starts at 16 and doubles while the size exceeds three quarters of it.
    (Buckets of 8 or more keys in tables of 64 or more become trees, whose order differs; with
    identity hashes spread over 31 bits that does not happen at the sizes here.)
    """
    capacity = 16
    while len(hashes) > capacity * 3 // 4:
        capacity *= 2
    keyed = []
    for i, h in enumerate(hashes):
        u = h & 0xFFFFFFFF
        keyed.append(((u ^ (u >> 16)) & (capacity - 1), i))
    keyed.sort()
    return [i for _, i in keyed]


_HASH_Y = 842502087
_HASH_Z = 0x8767
_HASH_W = 273326509
_RAND_SEED = 1234567


def _first_os_random() -> int:
    """HotSpot's ``os::random()`` (Park-Miller, seed 1234567): its first value seeds the main thread."""
    return (16807 * _RAND_SEED) % 0x7FFFFFFF


def identity_hashes(start: int, count: int) -> np.ndarray:
    """The main thread's identity hash codes number ``start .. start + count - 1`` (0 = the first one
    the JVM hands out) under HotSpot's default ``-XX:hashCode=5``: per thread, Marsaglia's xor-shift
    with state (os::random(), 842502087, 0x8767, 273326509), 31 bits kept, 0 replaced by 0xBAD."""
    x, y, z, w = _first_os_random(), _HASH_Y, _HASH_Z, _HASH_W
    values = np.empty(count, dtype=np.int64)
    for n in range(start + count):
        t = (x ^ (x << 11)) & 0xFFFFFFFF
        x, y, z = y, z, w
        w = (w ^ (w >> 19)) ^ (t ^ (t >> 8))
        if n >= start:
            h = w & 0x7FFFFFFF
            values[n - start] = h if h else 0xBAD
    return values


SYNOPTIC_HASH_OFFSET = 324
"""Identity hashes the JVM and Synoptic hand out, apart from two per event and one per trace, before
Synoptic's miner hashes its first trace path, when run as ``java -jar synoptic.jar ...`` (what the
``synoptic-jar`` engine runs; 323 with ``java -cp``). Measured on OpenJDK 17.0.15 (Debian 12) with
the build the recordings used, by printing the paths' identity hashes and finding them in the
sequence of :func:`identity_hashes`: trace path ``i`` gets number ``324 + 2 * events + traces + i``
on every input tried (5 to 88 traces, 24 to 1,044 events). Another JVM may hand out other numbers."""


def trace_path_hash_index(events: int, traces: int, offset: int = SYNOPTIC_HASH_OFFSET) -> int:
    """Which identity hash Synoptic's first trace path gets (see :data:`SYNOPTIC_HASH_OFFSET`)."""
    return offset + 2 * events + traces
