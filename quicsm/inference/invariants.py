"""Synoptic's temporal invariants, mined from totally ordered traces (Beschastnikh et al., FSE'11).

Every trace is framed by a synthetic INITIAL and TERMINAL event. Over event types ``a`` and ``b``:

- ``a AlwaysFollowedBy b`` (AFby): in every trace, every ``a`` is eventually followed by a ``b``;
  ``INITIAL AFby x`` says "every trace contains x".
- ``a NeverFollowedBy b`` (NFby): in no trace is an ``a`` followed (at any distance) by a ``b``;
  ``a NFby a`` says "a occurs at most once per trace".
- ``a AlwaysPrecedes b`` (AP): in every trace, every ``b`` is preceded by an ``a``.

Mining reads each trace's first and last position and count of every type, so it is linear in the
number of events (times the alphabet size squared for the pair tests): an AFby holds unless some
trace's last ``a`` comes after its last ``b``; an NFby unless some first ``a`` comes before a last
``b``; an AP unless some first ``b`` comes before the first ``a``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quicsm.inference.packed import EncodedLog

__all__ = ["KINDS", "LONG_NAMES", "Invariant", "InvariantSet", "mine_encoded"]

KINDS: tuple[str, ...] = ("AFby", "NFby", "AP")
LONG_NAMES: dict[str, str] = {"AFby": "AlwaysFollowedBy", "NFby": "NeverFollowedBy", "AP": "AlwaysPrecedes"}

_CHUNK = 1 << 16
"""Traces evaluated at a time, bounding the temporary arrays of the pair tests."""


@dataclass(frozen=True, slots=True, order=True)
class Invariant:
    kind: str
    """``AFby``, ``NFby`` or ``AP``."""
    first: str
    second: str

    def __str__(self) -> str:
        return f"{self.first} {LONG_NAMES[self.kind]} {self.second}"


@dataclass(frozen=True, slots=True)
class InvariantSet:
    """Mined invariants as boolean matrices over type codes (``labels``: states, then INITIAL, TERMINAL).

    ``holds[kind][a, b]`` is True when ``a kind b`` was mined. The engine checks models against these
    matrices directly; :meth:`invariants` lists them by name.
    """

    labels: tuple[str, ...]
    afby: np.ndarray
    nfby: np.ndarray
    ap: np.ndarray

    def matrix(self, kind: str) -> np.ndarray:
        return {"AFby": self.afby, "NFby": self.nfby, "AP": self.ap}[kind]

    def coded(self) -> list[tuple[str, int, int]]:
        """(kind, a, b) of every mined invariant, in a fixed order (kind, then codes)."""
        out: list[tuple[str, int, int]] = []
        for kind in KINDS:
            a, b = np.nonzero(self.matrix(kind))
            out.extend((kind, int(x), int(y)) for x, y in zip(a.tolist(), b.tolist()))
        return out

    def invariants(self) -> list[Invariant]:
        return sorted(Invariant(k, self.labels[a], self.labels[b]) for k, a, b in self.coded())

    def counts(self) -> dict[str, int]:
        return {k: int(self.matrix(k).sum()) for k in KINDS}

    def __len__(self) -> int:
        return sum(self.counts().values())


def mine_encoded(log: EncodedLog) -> InvariantSet:
    s = len(log.names)
    size = s + 2
    afby = np.zeros((size, size), dtype=bool)
    nfby = np.zeros((size, size), dtype=bool)
    ap = np.zeros((size, size), dtype=bool)
    if s == 0:
        return InvariantSet(log.labels, afby, nfby, ap)
    fail_afby = np.zeros((s, s), dtype=bool)
    fail_nfby = np.zeros((s, s), dtype=bool)
    fail_ap = np.zeros((s, s), dtype=bool)
    always = np.ones(s, dtype=bool)
    for start in range(0, log.traces, _CHUNK):
        stop = min(start + _CHUNK, log.traces)
        first, last = _first_last(log, start, stop)
        present = last >= 0
        always &= present.all(axis=0)
        for a in range(s):
            has_a = present[:, a]
            if not has_a.any():
                continue
            rows_last = last[has_a]
            rows_first = first[has_a]
            # a AFby b fails where no b comes after the last a (absent b has last = -1).
            fail_afby[a] |= (rows_last <= rows_last[:, a : a + 1]).any(axis=0)
            # a NFby b fails where some b comes after the first a.
            fail_nfby[a] |= (rows_last > rows_first[:, a : a + 1]).any(axis=0)
        for b in range(s):
            has_b = present[:, b]
            if not has_b.any():
                continue
            rows_first = first[has_b]
            # a AP b fails where the first b is not preceded by an a (absent a has first = +inf).
            fail_ap[:, b] |= (rows_first >= rows_first[:, b : b + 1]).any(axis=0)
    afby[:s, :s] = ~fail_afby
    nfby[:s, :s] = ~fail_nfby
    ap[:s, :s] = ~fail_ap
    np.fill_diagonal(afby, False)  # a AFby a and a AP a can never hold for a type that occurs
    np.fill_diagonal(ap, False)
    afby[log.initial, :s] = always
    return InvariantSet(log.labels, afby, nfby, ap)


def _first_last(log: EncodedLog, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """Per trace and type: position of the first and last occurrence (absent: +big / -1)."""
    s = len(log.names)
    lo, hi = int(log.offsets[start]), int(log.offsets[stop])
    n = hi - lo
    dtype = np.int32 if n < 2**31 - 1 else np.int64
    pos = np.arange(n, dtype=dtype)
    tid = np.repeat(np.arange(stop - start, dtype=np.int64), np.diff(log.offsets[start : stop + 1]))
    key = tid * s + log.codes[lo:hi]
    last = np.full((stop - start) * s, -1, dtype=dtype)
    first = np.full((stop - start) * s, np.iinfo(dtype).max, dtype=dtype)
    np.maximum.at(last, key, pos)
    np.minimum.at(first, key, pos)
    return first.reshape(-1, s), last.reshape(-1, s)
