"""Type stub for the C extension (quicsm/inference/fastcheck.c); the pure-Python twins are in checker.py,
partitions.py and replay.py."""

from typing import Any

ABI: int
"""Bumped with a function's signature or return shape; checked at import against the Python side's number."""

def violations(
    indptr: Any,
    indices: Any,
    rindptr: Any,
    rindices: Any,
    ptype: Any,
    size: int,
    nfby: Any,
    ap: Any,
    afby: Any,
    out_nfby: Any,
    out_ap: Any,
    out_afby: Any,
    /,
) -> None:
    """Write the mined invariants (uint8 size x size) the graph breaks into the ``out_*`` matrices."""

def shortest(
    indptr: Any, indices: Any, ptype: Any, kind: int, a: int, b: int, initial: int, terminal_type: int, /
) -> list[int] | None:
    """:func:`quicsm.inference.checker.counterexample` on a CSR graph (int32 arrays); kind 0 AFby, 1 NFby, 2 AP."""

def synoptic_walk(
    indptr: Any, indices: Any, ptype: Any, kind: int, a: int, b: int, initial: int, terminal_type: int, /
) -> list[int] | None:
    """Synoptic's counterexample walk before the cut of :func:`quicsm.inference.checker.synoptic_counterexample`."""

def stitch(part: Any, terminal_type: int, types: Any, start: Any, walk: Any, /) -> tuple[int, int, int] | None:
    """(prev, cur, nxt) of :func:`quicsm.inference.synoptic._stitch_splits`, None if a trace takes the whole walk."""

def split_steps(part: Any, has_succ: Any, has_pred: Any, members: Any, moving: Any, p: int, seen: Any, /) -> int:
    """Steps touching partition ``p`` if ``moving`` of its members left it, into ``seen`` (uint8 4 x width): rows
    out from the staying / moving side, in to the staying / moving side; returns the steps within p as bits
    ``1 << (2 * from_moving + to_moving)``."""

def coarsen(
    src: Any,
    dst: Any,
    ptype: Any,
    plist: Any,
    nfpred: Any,
    appred: Any,
    afsucc: Any,
    initial: int,
    terminal: int,
    merges: Any,
    /,
) -> tuple[int, int]:
    """:func:`quicsm.inference.replay.replay_coarsen` on a graph that holds every invariant: (kept, merged)
    pairs into ``merges`` (int32, 2 x nodes); returns (merges, trials). Types <= 64."""

def replay_rounds(
    part: Any,
    types: Any,
    has_succ: Any,
    has_pred: Any,
    ptype: Any,
    invariants: Any,
    initial: int,
    terminal_type: int,
    rng: Any,
    budget: int,
    limit: int,
    stats: Any,
    out_ptype: Any,
    /,
) -> tuple[int, int]:
    """:meth:`quicsm.inference.replay.PyReplay.refine` in one call: ``part`` (int32, writable) refined in place,
    the partitions' types into ``out_ptype``; ``invariants`` int32 rows (kind, a, b); ``rng`` int64[1] the
    ``java.util.Random`` state, updated; ``stats`` int64 (rounds, arbitrary, trials, witnessed, work), counted
    on; ``budget`` < 0: none. Returns (status, partitions): 0 done, 1 over the budget, 2-4 internal errors."""
