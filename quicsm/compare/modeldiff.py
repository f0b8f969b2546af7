"""Model differences: structural (states and edges added or removed) and behavioural.

Behavioural differences follow k-Tails log differencing (2KDiff/s2KDiff, Amar et al.): the
shortest state sequences one model accepts and the other does not, found by breadth-first search
over the product of the two automata (the second one determinised on the fly, since Synoptic and
k-Tails models are NFAs over state names). Also: which traces of one set the other set's model
rejects, the observed counterpart of the same question.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from quicsm.compare.stays import Connection
from quicsm.inference.model import INITIAL, Model

__all__ = ["ModelDiff", "Witness", "behavioural_diff", "diff_models", "label_edges", "structural_diff"]


def label_edges(model: Model) -> set[tuple[str, str]]:
    """Edges as (state name, state name): how models with different node ids line up."""
    return {(model.nodes[e.src].state, model.nodes[e.dst].state) for e in model.edges}


@dataclass(frozen=True, slots=True)
class Witness:
    """A state sequence accepted by one model and rejected by the other, and where it fails there."""

    sequence: tuple[str, ...]
    divergence: str

    def to_json(self) -> dict[str, Any]:
        return {"sequence": list(self.sequence), "length": len(self.sequence), "divergence": self.divergence}


@dataclass(frozen=True, slots=True)
class ModelDiff:
    a: str
    b: str
    engine: str
    nodes: tuple[int, int]
    states_only_in_a: tuple[str, ...]
    states_only_in_b: tuple[str, ...]
    edges_only_in_a: tuple[tuple[str, str], ...]
    edges_only_in_b: tuple[tuple[str, str], ...]
    a_not_b: tuple[Witness, ...]
    b_not_a: tuple[Witness, ...]
    rejected: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``a_by_b``/``b_by_a``: how many traces of one set the other model rejects, with an example."""
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "engine": self.engine,
            "nodes": {"a": self.nodes[0], "b": self.nodes[1]},
            "identical_language": not (self.a_not_b or self.b_not_a),
            "states_only_in_a": list(self.states_only_in_a),
            "states_only_in_b": list(self.states_only_in_b),
            "edges_only_in_a": [list(e) for e in self.edges_only_in_a],
            "edges_only_in_b": [list(e) for e in self.edges_only_in_b],
            "accepted_by_a_not_b": [w.to_json() for w in self.a_not_b],
            "accepted_by_b_not_a": [w.to_json() for w in self.b_not_a],
            "traces_rejected": self.rejected,
            "notes": list(self.notes),
        }


def structural_diff(
    a: Model, b: Model
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    sa, sb = set(a.state_names()), set(b.state_names())
    ea, eb = label_edges(a), label_edges(b)
    return tuple(sorted(sa - sb)), tuple(sorted(sb - sa)), tuple(sorted(ea - eb)), tuple(sorted(eb - ea))


def _explain(b: Model, seq: Sequence[str], succ: dict[int, list[int]]) -> str:
    current = {b.initial}
    prev = INITIAL
    for i, s in enumerate(seq):
        nxt = {d for c in current for d in succ[c] if b.nodes[d].state == s}
        if not nxt:
            where = "start" if i == 0 else f"step {i + 1}"
            return f"no {prev} -> {s} at {where}" if i else f"cannot start in {s}"
        current, prev = nxt, s
    return f"cannot end in {prev}" if seq else "empty trace"


def behavioural_diff(a: Model, b: Model, *, limit: int = 3, max_states: int = 200_000) -> tuple[list[Witness], bool]:
    """Up to ``limit`` shortest sequences ``a`` accepts and ``b`` rejects; flag True if the search was cut."""
    sa, sb = a.successors(), b.successors()
    ta, tb = a.terminal, b.terminal
    start = (a.initial, frozenset({b.initial}))
    seen = {start}
    queue: deque[tuple[int, frozenset[int], tuple[str, ...]]] = deque([(start[0], start[1], ())])
    found: list[Witness] = []
    seqs: set[tuple[str, ...]] = set()
    while queue and len(found) < limit:
        node, bset, seq = queue.popleft()
        if ta in sa[node] and not any(tb in sb[x] for x in bset) and seq not in seqs:
            seqs.add(seq)
            found.append(Witness(seq, _explain(b, seq, sb)))
        for nxt in sa[node]:
            if nxt == ta:
                continue
            s = a.nodes[nxt].state
            nb = frozenset(d for x in bset for d in sb[x] if b.nodes[d].state == s)
            key = (nxt, nb)
            if key in seen:
                continue
            if len(seen) >= max_states:
                return found, True
            seen.add(key)
            queue.append((nxt, nb, seq + (s,)))
    return found, False


def _rejected(model: Model, rows: Sequence[Connection]) -> dict[str, Any]:
    verdict: dict[tuple[str, ...], bool] = {}  # connections repeat their sequences: decide each once
    bad = []
    for t in rows:
        key = tuple(t.states)
        ok = verdict.get(key)
        if ok is None:
            ok = verdict[key] = model.accepts(key)
        if not ok:
            bad.append(t)
    return {
        "count": len(bad),
        "of": len(rows),
        "example": bad[0].id if bad else None,
        "example_states": list(bad[0].states[:40]) if bad else None,
    }


def diff_models(
    a: Model,
    b: Model,
    *,
    names: tuple[str, str] = ("A", "B"),
    rows: tuple[Sequence[Connection], Sequence[Connection]] | None = None,
    limit: int = 3,
) -> ModelDiff:
    """Structural and behavioural difference of two models (learned with the same engine); ``rows``
    (the sets' connections) add which connections of one set the other model rejects."""
    s_a, s_b, e_a, e_b = structural_diff(a, b)
    ab, cut_ab = behavioural_diff(a, b, limit=limit)
    ba, cut_ba = behavioural_diff(b, a, limit=limit)
    notes = []
    if cut_ab or cut_ba:
        notes.append("behavioural search stopped at its state limit; more differences may exist")
    if a.engine != b.engine:
        notes.append(f"models come from different engines ({a.engine} vs {b.engine})")
    rejected: dict[str, dict[str, Any]] = {}
    if rows is not None:
        rejected = {"a_by_b": _rejected(b, rows[0]), "b_by_a": _rejected(a, rows[1])}
    return ModelDiff(
        names[0],
        names[1],
        a.engine,
        (len(a.nodes), len(b.nodes)),
        s_a,
        s_b,
        e_a,
        e_b,
        tuple(ab),
        tuple(ba),
        rejected,
        tuple(notes),
    )
