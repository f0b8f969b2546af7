"""Transitions: per edge of the directly-follows model, how often each connection took it.

Edges are state-name pairs of the ``dfg`` model (INITIAL and TERMINAL included, as in Fig. 13), so
two sets' models line up by name. Counts are kept per connection so a test can treat connections,
not single steps, as the independent units.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from quicsm.compare.stats import TestResult, chi_square_2x2, cluster_proportion_z, two_proportion_z
from quicsm.compare.stays import Connection
from quicsm.inference import infer_sequences

__all__ = ["Edge2", "EdgeTable", "edge_counts", "edge_table", "test_edge"]

Edge2 = tuple[str, str]
"""(source state, destination state)."""


@dataclass(frozen=True, slots=True)
class EdgeTable:
    """``counts[i, e]``: times connection ``i`` took ``edges[e]``; ``out[i, s]``: times it left ``sources[s]``."""

    edges: tuple[Edge2, ...]
    counts: np.ndarray
    sources: tuple[str, ...]
    out: np.ndarray

    @property
    def n(self) -> int:
        return int(self.counts.shape[0])

    def edge_column(self, edge: Edge2) -> np.ndarray:
        if edge in self.edges:
            return self.counts[:, self.edges.index(edge)]
        return np.zeros(self.n, dtype=np.int64)

    def out_column(self, src: str) -> np.ndarray:
        if src in self.sources:
            return self.out[:, self.sources.index(src)]
        return np.zeros(self.n, dtype=np.int64)

    def subset(self, rows: np.ndarray) -> EdgeTable:
        return EdgeTable(self.edges, self.counts[rows], self.sources, self.out[rows])


def edge_table(rows: Sequence[Connection]) -> EdgeTable:
    """Per-connection edge counts read off the paths of a ``dfg`` model of the connections' rows."""
    usable = [t.states for t in rows if t.states]
    if not usable:
        return EdgeTable((), np.zeros((0, 0), dtype=np.int64), (), np.zeros((0, 0), dtype=np.int64))
    res = infer_sequences(usable, "dfg")
    label = [n.state for n in res.model.nodes]
    per = [[(label[s], label[d]) for s, d in pairwise(p)] for p in res.paths]
    edges = tuple(sorted({e for steps in per for e in steps}))
    sources = tuple(sorted({s for s, _ in edges}))
    counts = np.zeros((len(per), len(edges)), dtype=np.int64)
    out = np.zeros((len(per), len(sources)), dtype=np.int64)
    eidx = {e: j for j, e in enumerate(edges)}
    sidx = {s: j for j, s in enumerate(sources)}
    for i, steps in enumerate(per):
        for e in steps:
            counts[i, eidx[e]] += 1
            out[i, sidx[e[0]]] += 1
    return EdgeTable(edges, counts, sources, out)


def edge_counts(table: EdgeTable, edge: Edge2) -> tuple[int, int]:
    """(times taken, times its source was left) over the whole set."""
    return int(table.edge_column(edge).sum()), int(table.out_column(edge[0]).sum())


def test_edge(a: EdgeTable, b: EdgeTable, edge: Edge2, test: str = "cluster") -> TestResult:
    """Test whether ``edge``'s probability differs between the sets (b versus a)."""
    if test == "cluster":
        return cluster_proportion_z(
            a.edge_column(edge), a.out_column(edge[0]), b.edge_column(edge), b.out_column(edge[0])
        )
    ka, na = edge_counts(a, edge)
    kb, nb = edge_counts(b, edge)
    return (chi_square_2x2 if test == "chi2" else two_proportion_z)(ka, na, kb, nb)


test_edge.__test__ = False  # type: ignore[attr-defined]  # not a pytest test
