"""Brute-force oracles for the inference tests: invariants by their definitions, checks on model graphs.

Written independently of the engine (networkx reachability, plain loops), so they can catch it wrong.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import pairwise, product

import networkx as nx
import numpy as np

from quicsm.inference import checker, partitions, replay
from quicsm.inference.invariants import Invariant
from quicsm.inference.model import INITIAL, TERMINAL, Model
from quicsm.inference.partitions import PartitionGraph

C_BUILT = checker.fastcheck is not None
"""Whether the C extension is built (without it every module runs its Python twin already)."""


@contextmanager
def python_twins() -> Iterator[None]:
    """Every inference module's pure-Python twin of the C extension within the block (a context manager,
    not a fixture: hypothesis runs no fixtures per example), whatever this install chose."""
    saved = checker.SEARCHES, partitions.SPLIT_STEPS, replay.REPLAY
    checker.SEARCHES = checker.PYTHON_SEARCHES
    partitions.SPLIT_STEPS = partitions.PYTHON_SPLIT_STEPS
    replay.REPLAY = replay.PYTHON_REPLAY
    try:
        yield
    finally:
        checker.SEARCHES, partitions.SPLIT_STEPS, replay.REPLAY = saved


def brute_invariants(seqs: Sequence[Sequence[str]]) -> set[Invariant]:
    """Synoptic's invariants straight from the definitions, O(n^2) per trace."""
    types = sorted({s for seq in seqs for s in seq})
    out: set[Invariant] = set()
    for a, b in product(types, types):
        if a != b and all(_afby(s, a, b) for s in seqs):
            out.add(Invariant("AFby", a, b))
        if all(_nfby(s, a, b) for s in seqs):
            out.add(Invariant("NFby", a, b))
        if a != b and all(_ap(s, a, b) for s in seqs):
            out.add(Invariant("AP", a, b))
    for x in types:
        if all(x in s for s in seqs):
            out.add(Invariant("AFby", INITIAL, x))
    return out


def _afby(seq: Sequence[str], a: str, b: str) -> bool:
    """Every a is eventually followed by a b."""
    return all(b in seq[i + 1 :] for i, x in enumerate(seq) if x == a)


def _nfby(seq: Sequence[str], a: str, b: str) -> bool:
    """No a is ever followed by a b."""
    return not any(x == a and b in seq[i + 1 :] for i, x in enumerate(seq))


def _ap(seq: Sequence[str], a: str, b: str) -> bool:
    """Every b has an a before it."""
    return all(a in seq[:i] for i, x in enumerate(seq) if x == b)


def model_graph(model: Model) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(n.id for n in model.nodes)
    g.add_edges_from((e.src, e.dst) for e in model.edges)
    return g


def holds_on_model(model: Model, inv: Invariant) -> bool:
    """Does every INITIAL -> TERMINAL walk of the model satisfy ``inv``? (networkx reachability)"""
    g = model_graph(model)
    init, term = model.initial, model.terminal
    live = nx.descendants(g, init) & nx.ancestors(g, term)  # nodes on some INITIAL -> TERMINAL walk

    def of(t):
        return {n.id for n in model.nodes if n.state == t and n.id in live}

    if inv.kind == "NFby":  # (nx.descendants leaves out the node itself, even on a cycle)

        def after(u):
            return set().union(*({s} | nx.descendants(g, s) for s in g.successors(u)))

        return not any(of(inv.second) & after(u) for u in of(inv.first))
    if inv.kind == "AP":
        h = g.subgraph(set(g) - of(inv.first))
        return not any(nx.has_path(h, init, v) for v in of(inv.second))
    h = g.subgraph(set(g) - of(inv.second))  # AFby: no way from an `a` to TERMINAL avoiding `b`
    starts = {init} if inv.first == INITIAL else of(inv.first)
    return not any(nx.has_path(h, u, term) for u in starts if u in h)


def check_paths(model: Model, paths: Sequence[Sequence[int]], seqs: Sequence[Sequence[str]]) -> None:
    """Each path is a walk of the model spelling its sequence, from INITIAL to TERMINAL."""
    edges = {(e.src, e.dst) for e in model.edges}
    assert len(paths) == len(seqs)
    for path, seq in zip(paths, seqs):
        path = list(path)
        assert path[0] == model.initial and path[-1] == model.terminal
        assert [model.nodes[n].state for n in path[1:-1]] == list(seq)
        assert all(step in edges for step in pairwise(path))
        assert model.accepts(seq)


def k_future(seqs: Sequence[Sequence[str]], k: int) -> dict[tuple[str, ...], frozenset[tuple[str, ...]]]:
    """Per trace prefix (of the framed traces): the set of label strings of length <= k that follow it."""
    framed = [(INITIAL, *s, TERMINAL) for s in seqs]
    fut: dict[tuple[str, ...], set[tuple[str, ...]]] = {}
    for f in framed:
        for i in range(1, len(f) + 1):
            fut.setdefault(f[:i], set()).update(f[i : i + j] for j in range(k + 1))
    return {p: frozenset(x for x in v if len(x) <= k) for p, v in fut.items()}


def random_split(g: PartitionGraph, rnd: random.Random) -> tuple[int, np.ndarray] | None:
    """A partition of ``g`` with two or more events and a random two-sided mask of them, or None."""
    live = [p for p in range(g.size) if g.ptype[p] >= 0 and len(g.members[p]) > 1]
    if not live:
        return None
    p = rnd.choice(live)
    moving = np.array([rnd.random() < 0.5 for _ in g.members[p]])
    if moving.all() or not moving.any():
        moving[0] = not moving[0]
    return p, moving
