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
  every run of the same JVM; :data:`SYNOPTIC_BUILDS` says where Synoptic's trace paths fall in that
  sequence for each build of the original.
"""

from __future__ import annotations

from collections.abc import MutableSequence, Sequence
from typing import TypeVar

import numpy as np

__all__ = [
    "SYNOPTIC_BUILDS",
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
            values[n - start] = h or 0xBAD
    return values


SYNOPTIC_BUILDS: dict[str, int] = {
    "build.xml": 315,
    "javac-default-one-jar": 324,
}
"""Where Synoptic's first trace path falls in the main thread's identity-hash sequence, per build of the
original (a2b6a0d) run as ``java -jar synoptic.jar ...`` on OpenJDK 17.0.15 (Debian 12): trace path ``i``
gets number ``offset + 2 * events + traces + i``. The JVM and Synoptic hand out ``offset`` hashes (class
loading, option parsing) plus two per event and one per trace before the miner hashes its first path.

- ``build.xml``: built as the repository's build.xml says (``ant synoptic``: javac ``-source 1.7 -target
  1.7``, daikonizer.jar beside synoptic.jar, their manifests' Class-Path), the recording
  ``tests/data/synoptic/recorded-buildxml.json.gz``; 315 held on all 100 of its runs (20 inputs of
  10^2-2x10^3 events, seeds 1-5).
- ``javac-default-one-jar``: ``synoptic/src`` and two daikonizer classes compiled by javac's default
  (target 17) into one jar, the build of ``recorded-at-size.json.gz`` and ``recorded-10k.json.gz``. Target
  17 compiles string concatenation to ``invokedynamic``, whose first use at each call site hashes classes
  lazily, so such a build's offset can depend on which code an input reaches: another javac-17 build of
  the same source gave 324 on some inputs and not on others.

Another JVM, build or launcher (``java -cp``: one fewer) may hand out other numbers."""

SYNOPTIC_HASH_OFFSET = SYNOPTIC_BUILDS["build.xml"]
"""The build the replay follows (the original as its own build file builds it)."""


def trace_path_hash_index(events: int, traces: int) -> int:
    """Which identity hash Synoptic's first trace path gets (see :data:`SYNOPTIC_BUILDS`), at
    :data:`SYNOPTIC_HASH_OFFSET` as it is when called."""
    return SYNOPTIC_HASH_OFFSET + 2 * events + traces
