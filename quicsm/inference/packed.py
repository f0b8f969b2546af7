"""State sequences as integer arrays, and model paths kept as arrays instead of lists of lists.

Engines work on millions of events; a Python object per event would cost memory and time. A log is
encoded once into ``codes`` (one small integer per event) and ``offsets`` (where each trace starts);
:class:`PackedPaths` keeps the node of every event in one array and hands out a trace's path as a
list only when asked, so an :class:`~quicsm.inference.model.InferenceResult` built from it behaves
like one built from lists.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, pairwise
from typing import Any, overload

import numpy as np

from quicsm.inference.model import INITIAL, TERMINAL, Edge, InferenceResult, Model, Node

__all__ = ["EncodedLog", "PackedPaths", "canonical_order", "count_pairs", "encode_sequences", "result_from_nodes"]


@dataclass(frozen=True, slots=True, eq=False)
class EncodedLog(Sequence[list[str]]):
    """State sequences as arrays: ``names[codes[i]]`` is event ``i``; trace ``t`` is ``codes[offsets[t]:offsets[t+1]]``.

    ``initial`` (= ``len(names)``) and ``terminal`` (= ``len(names) + 1``) are the codes of the synthetic
    INITIAL and TERMINAL events, which :meth:`framed` adds around every trace.
    """

    names: tuple[str, ...]
    codes: np.ndarray
    offsets: np.ndarray

    @property
    def traces(self) -> int:
        return len(self.offsets) - 1

    @property
    def events(self) -> int:
        return int(self.offsets[-1])

    @property
    def initial(self) -> int:
        return len(self.names)

    @property
    def terminal(self) -> int:
        return len(self.names) + 1

    @property
    def labels(self) -> tuple[str, ...]:
        """Names by code, synthetic ends included."""
        return (*self.names, INITIAL, TERMINAL)

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def framed(self) -> tuple[np.ndarray, np.ndarray]:
        """Codes with INITIAL before and TERMINAL after every trace, and the framed trace offsets."""
        n, t = self.events, self.traces
        foff = self.offsets + 2 * np.arange(t + 1, dtype=np.int64)
        out = np.empty(n + 2 * t, dtype=np.int32)
        inner = np.ones(n + 2 * t, dtype=bool)
        inner[foff[:-1]] = False
        inner[foff[1:] - 1] = False
        out[foff[:-1]] = self.initial
        out[foff[1:] - 1] = self.terminal
        out[inner] = self.codes
        return out, foff

    def sequence(self, t: int) -> list[str]:
        return [self.names[c] for c in self.codes[self.offsets[t] : self.offsets[t + 1]].tolist()]

    # Also a sequence of state sequences, so an encoded log goes wherever lists of names go (the engines
    # take it as it is: :func:`encode_sequences` hands it back).
    def __len__(self) -> int:
        return self.traces

    @overload
    def __getitem__(self, t: int) -> list[str]: ...
    @overload
    def __getitem__(self, t: slice) -> list[list[str]]: ...
    def __getitem__(self, t: int | slice) -> list[str] | list[list[str]]:
        if isinstance(t, slice):
            return [self[i] for i in range(*t.indices(self.traces))]
        if not -self.traces <= t < self.traces:
            raise IndexError(t)
        return self.sequence(t % self.traces)

    def __iter__(self) -> Iterator[list[str]]:
        names = self.names
        bounds = self.offsets.tolist()
        codes = self.codes.tolist()
        for a, b in pairwise(bounds):
            yield [names[c] for c in codes[a:b]]

    @classmethod
    def from_codes(cls, table: Sequence[str], codes: np.ndarray, offsets: np.ndarray) -> EncodedLog:
        """The log whose trace ``t`` is ``[table[c] for c in codes[offsets[t]:offsets[t+1]]]``, encoded as
        :func:`encode_sequences` would encode those lists (codes follow the sorted names used)."""
        present = np.bincount(codes, minlength=len(table)) if len(codes) else np.zeros(len(table), np.int64)
        used = sorted(np.flatnonzero(present).tolist(), key=table.__getitem__)
        remap = np.zeros(len(table), np.int32)
        remap[used] = np.arange(len(used), dtype=np.int32)
        return cls(tuple(table[i] for i in used), remap[codes], np.asarray(offsets, np.int64))


def encode_sequences(sequences: Sequence[Sequence[str]]) -> EncodedLog:
    """Encode state sequences; codes follow the sorted state names, so the same input gives the same codes."""
    if isinstance(sequences, EncodedLog):
        return sequences
    names = sorted(set(chain.from_iterable(sequences)))
    index = {s: i for i, s in enumerate(names)}
    lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
    offsets = np.zeros(len(sequences) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    codes = np.fromiter(map(index.__getitem__, chain.from_iterable(sequences)), dtype=np.int32, count=int(offsets[-1]))
    return EncodedLog(tuple(names), codes, offsets)


class PackedPaths(Sequence[list[int]]):
    """Per-trace node paths stored as one array; ``paths[i]`` is a list (INITIAL first, TERMINAL last)."""

    __slots__ = ("nodes", "offsets")

    def __init__(self, nodes: np.ndarray, offsets: np.ndarray) -> None:
        self.nodes = nodes
        """Node of every framed event (INITIAL and TERMINAL events included)."""
        self.offsets = offsets
        """Where each trace's path starts in :attr:`nodes`; one more entry than traces."""

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @overload
    def __getitem__(self, i: int) -> list[int]: ...
    @overload
    def __getitem__(self, i: slice) -> list[list[int]]: ...
    def __getitem__(self, i: int | slice) -> list[int] | list[list[int]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        path: list[int] = self.nodes[self.offsets[i] : self.offsets[i + 1]].tolist()
        return path

    def __iter__(self) -> Iterator[list[int]]:
        bounds = self.offsets.tolist()
        for s, e in pairwise(bounds):
            yield self.nodes[s:e].tolist()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PackedPaths):
            return np.array_equal(self.offsets, other.offsets) and np.array_equal(self.nodes, other.nodes)
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(other) == len(self) and all(list(a) == b for a, b in zip(other, self))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PackedPaths({len(self)} paths, {len(self.nodes)} steps)"

    def edge_counts(self) -> Counter[tuple[int, int]]:
        """Steps per (src, dst) node pair, counted with numpy."""
        src, dst, cnt = self.edge_arrays()
        return Counter(dict(zip(zip(src.tolist(), dst.tolist()), cnt.tolist())))

    def edge_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Distinct steps as sorted (src, dst, count) arrays."""
        nodes = self.nodes
        if len(nodes) < 2:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty
        step = np.ones(len(nodes) - 1, dtype=bool)
        ends = self.offsets[1:-1] - 1  # last step of a trace does not continue into the next one
        step[ends[ends < len(step)]] = False
        return count_pairs(nodes[:-1][step], nodes[1:][step], int(nodes.max()) + 1)


def first_positions(values: np.ndarray, size: int) -> np.ndarray:
    """Per value ``0..size-1``, where it first occurs in ``values`` (``len(values)`` where it never does).
    One dtype on both sides of ``minimum.at`` takes its fast path (20x on 10^7 values)."""
    index = np.int32 if len(values) < 2**31 else np.int64
    first = np.full(size, len(values), dtype=index)
    np.minimum.at(first, values, np.arange(len(values), dtype=index))
    return first


CHUNK = 1 << 21
"""Values per pass where a whole-log count would otherwise make temporaries of the log's size."""


def count_pairs(src: np.ndarray, dst: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (src, dst) pairs of small non-negative ints, sorted, with their counts.

    A bincount over ``width**2`` cells when that table is small (no sort of millions of keys), else
    a sort-based unique.
    """
    if width * width <= max(1 << 16, 4 * len(src)):
        table = np.zeros(width * width, np.int64)
        for a in range(0, len(src), CHUNK):  # bounded temporaries on 10^7-step logs
            table += np.bincount(
                src[a : a + CHUNK].astype(np.int64) * width + dst[a : a + CHUNK], minlength=width * width
            )
        uniq = np.flatnonzero(table)
        cnt = table[uniq]
    else:
        uniq, cnt = np.unique(src.astype(np.int64) * width + dst, return_counts=True)
    return uniq // width, uniq % width, cnt


def canonical_order(labels: Sequence[str], first_seen: Sequence[int]) -> list[int]:
    """New id for each old node: INITIAL first, then states by (name, first event), TERMINAL last.

    Engines number their nodes in whatever order they built them; this makes the numbering depend
    only on the input, so the same traces always give the same model.
    """
    rank = {INITIAL: 0, TERMINAL: 2}
    order = sorted(range(len(labels)), key=lambda i: (rank.get(labels[i], 1), labels[i], first_seen[i], i))
    new = [0] * len(labels)
    for pos, old in enumerate(order):
        new[old] = pos
    return new


def result_from_nodes(
    engine: str,
    labels: Sequence[str],
    nodes: np.ndarray,
    offsets: np.ndarray,
    details: dict[str, Any] | None = None,
    **params: Any,
) -> InferenceResult:
    """Renumber nodes canonically and build the model whose edges are exactly the steps of the paths.

    ``nodes[i]`` is the (engine-internal) node of framed event ``i``; ``labels[j]`` the state of node ``j``.
    Nodes no event maps to are dropped.
    """
    nodes = np.asarray(nodes)
    seen = np.bincount(nodes, minlength=len(labels)) > 0
    used = np.flatnonzero(seen)
    first_at = first_positions(nodes, len(labels))
    new_of = canonical_order([labels[u] for u in used.tolist()], first_at[used].tolist())
    lookup = np.full(len(labels), -1, dtype=np.int64)
    lookup[used] = new_of
    dtype = np.int32 if len(used) < 2**31 else np.int64
    paths = PackedPaths(lookup.astype(dtype)[nodes], np.asarray(offsets, dtype=np.int64))
    model_nodes: list[Node] = [Node(0, "")] * len(used)
    for old_compact, new in enumerate(new_of):
        model_nodes[new] = Node(new, labels[int(used[old_compact])])
    src, dst, cnt = paths.edge_arrays()
    edges = [Edge(s, d, c) for s, d, c in zip(src.tolist(), dst.tolist(), cnt.tolist())]
    return InferenceResult(Model(engine, model_nodes, edges, dict(params)), paths, dict(details or {}))  # type: ignore[arg-type]
