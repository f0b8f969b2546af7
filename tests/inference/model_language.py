"""What a model accepts, compared exactly: two models are the same language or they are not.

A model is an NFA over state names (a path INITIAL -> nodes -> TERMINAL spells a trace). Comparing two
models node by node says little when engines split states differently; comparing the languages says
whether they allow the same traces. :func:`minimal_dfa` determinises and minimises (Moore's
refinement), so two models accept the same traces exactly when their minimal DFAs are equal up to
renaming, which :func:`same_language` checks by a joint walk. :func:`isomorphic` is the stricter,
structural test (same nodes with the same labels and edges up to renaming), done with networkx.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from quicsm.inference.model import INITIAL, TERMINAL, Model

__all__ = ["Automaton", "MinimalDFA", "isomorphic", "language_classes", "minimal_dfa", "same_language"]

END = "\x00end"
"""Letter of the step into TERMINAL: a DFA state accepts when it has this move to the accept sink."""


@dataclass(frozen=True, slots=True)
class Automaton:
    """A labelled graph in the model sense: node -> state name, edges, INITIAL and TERMINAL nodes."""

    labels: Mapping[int, str]
    edges: frozenset[tuple[int, int]]

    @classmethod
    def of(cls, model: Model) -> Automaton:
        return cls({n.id: n.state for n in model.nodes}, frozenset((e.src, e.dst) for e in model.edges))

    @classmethod
    def from_edges(cls, labels: Mapping[int, str], edges: Iterable[tuple[int, int]]) -> Automaton:
        return cls(dict(labels), frozenset(edges))

    def end(self, name: str) -> int:
        found = [n for n, s in self.labels.items() if s == name]
        if len(found) != 1:
            raise ValueError(f"a model has exactly one {name} node, this one has {len(found)}")
        return found[0]


@dataclass(frozen=True, slots=True)
class MinimalDFA:
    """States 0..n-1 (0 the start), ``moves[s]`` letter -> state; state ``accept`` is the sink after END."""

    moves: tuple[dict[str, int], ...]
    accept: int


def _determinise(a: Automaton) -> tuple[list[dict[str, int]], int]:
    succ: dict[int, list[int]] = {n: [] for n in a.labels}
    for s, d in sorted(a.edges):
        succ[s].append(d)
    terminal = a.end(TERMINAL)
    start = frozenset([a.end(INITIAL)])
    accept_key: frozenset[int] = frozenset([terminal])
    index: dict[frozenset[int], int] = {start: 0, accept_key: 1}
    moves: list[dict[str, int]] = [{}, {}]
    todo = [start]
    while todo:
        cur = todo.pop()
        by_letter: dict[str, set[int]] = {}
        for c in cur:
            for d in succ[c]:
                letter = END if d == terminal else a.labels[d]
                by_letter.setdefault(letter, set()).add(d)
        for letter, targets in sorted(by_letter.items()):
            key = accept_key if letter == END else frozenset(targets)
            if key not in index:
                index[key] = len(moves)
                moves.append({})
                todo.append(key)
            moves[index[cur]][letter] = index[key]
    return moves, 1


def minimal_dfa(a: Automaton) -> MinimalDFA:
    """The minimal complete-by-omission DFA of ``a``'s language (missing moves go to a dead state)."""
    moves, accept = _determinise(a)
    n = len(moves)
    letters = sorted({x for m in moves for x in m})
    block = [1 if s == accept else 0 for s in range(n)]
    while True:
        sig = {s: (block[s], tuple(block[moves[s][x]] if x in moves[s] else -1 for x in letters)) for s in range(n)}
        ids: dict[tuple[int, tuple[int, ...]], int] = {}
        new = [ids.setdefault(sig[s], len(ids)) for s in range(n)]
        if len(ids) == len(set(block)):
            break
        block = new
    # renumber blocks so that the start is 0, the rest in BFS order by letter (a canonical form)
    order: dict[int, int] = {block[0]: 0}
    queue = [0]
    rep: dict[int, int] = {}
    for s in range(n):
        rep.setdefault(block[s], s)
    while queue:
        s = queue.pop(0)
        for x in letters:
            if x in moves[s]:
                b = block[moves[s][x]]
                if b not in order:
                    order[b] = len(order)
                    queue.append(rep[b])
    out: list[dict[str, int]] = [{} for _ in order]
    for b, i in order.items():
        s = rep[b]
        out[i] = {x: order[block[t]] for x, t in moves[s].items()}
    return MinimalDFA(tuple(out), order[block[accept]])


def same_language(a: Automaton | Model, b: Automaton | Model) -> bool:
    """True when both models accept exactly the same state sequences."""
    da = minimal_dfa(a if isinstance(a, Automaton) else Automaton.of(a))
    db = minimal_dfa(b if isinstance(b, Automaton) else Automaton.of(b))
    return da == db


def isomorphic(a: Automaton | Model, b: Automaton | Model) -> bool:
    """True when the two graphs are equal up to renaming nodes (labels and edges kept)."""
    import networkx as nx
    from networkx.algorithms.isomorphism import categorical_node_match

    def graph(x: Automaton | Model) -> nx.DiGraph:
        auto = x if isinstance(x, Automaton) else Automaton.of(x)
        g = nx.DiGraph()
        g.add_nodes_from((n, {"state": s}) for n, s in auto.labels.items())
        g.add_edges_from(auto.edges)
        return g

    return bool(nx.is_isomorphic(graph(a), graph(b), node_match=categorical_node_match("state", None)))


def language_classes(models: Sequence[Model | Automaton]) -> list[list[int]]:
    """Indices of ``models`` grouped by language, groups in order of their first model: e.g. Synoptic's
    models for seeds 1-5 form one group when the result does not depend on its random choices."""
    groups: list[list[int]] = []
    for i, m in enumerate(models):
        for g in groups:
            if same_language(models[g[0]], m):
                g.append(i)
                break
        else:
            groups.append([i])
    return groups
