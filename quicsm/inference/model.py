"""The inferred state machine: nodes (one per model state), edges, and how each trace runs through it.

Nodes carry the event type (state name) they stand for; several nodes may share a state name (Synoptic
and k-Tails split a state by its history/future). ``INITIAL`` and ``TERMINAL`` are synthetic nodes,
as in Synoptic, so every trace is a path from the one to the other.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["INITIAL", "TERMINAL", "Edge", "InferenceResult", "Model", "Node"]

INITIAL = "INITIAL"
TERMINAL = "TERMINAL"


@dataclass(frozen=True, slots=True)
class Node:
    id: int
    state: str
    """Event type the node stands for; ``INITIAL``/``TERMINAL`` for the synthetic ends."""

    @property
    def kind(self) -> str:
        return {INITIAL: "initial", TERMINAL: "terminal"}.get(self.state, "state")


@dataclass(frozen=True, slots=True)
class Edge:
    src: int
    dst: int
    count: int
    """Number of trace steps that take this edge."""


@dataclass(slots=True)
class Model:
    """A finite-state model over state names, with node ids stable for one run (sorted, deterministic)."""

    engine: str
    nodes: list[Node]
    edges: list[Edge]
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def initial(self) -> int:
        return next(n.id for n in self.nodes if n.state == INITIAL)

    @property
    def terminal(self) -> int:
        return next(n.id for n in self.nodes if n.state == TERMINAL)

    def successors(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {n.id: [] for n in self.nodes}
        for e in self.edges:
            out[e.src].append(e.dst)
        return out

    def accepts(self, states: Sequence[str]) -> bool:
        """True if some path INITIAL -> nodes labelled ``states`` -> TERMINAL exists (NFA semantics)."""
        succ = self.successors()
        label = [n.state for n in self.nodes]
        current = {self.initial}
        for s in states:
            current = {d for c in current for d in succ[c] if label[d] == s}
            if not current:
                return False
        return any(self.terminal in succ[c] for c in current)

    def state_names(self) -> list[str]:
        return sorted({n.state for n in self.nodes if n.kind == "state"})


@dataclass(slots=True)
class InferenceResult:
    """A model and, per input trace, the node ids its visits map to (INITIAL first, TERMINAL last)."""

    model: Model
    paths: list[list[int]]
    details: dict[str, Any] = field(default_factory=dict)
    """Engine-specific facts (mined invariants, refinement steps, timings) for reports."""

    def edge_counts(self) -> Counter[tuple[int, int]]:
        fast = getattr(self.paths, "edge_counts", None)
        if fast is not None:  # packed paths (quicsm.inference.packed) count with numpy
            packed: Counter[tuple[int, int]] = fast()
            return packed
        counts: Counter[tuple[int, int]] = Counter()
        for p in self.paths:
            counts.update(zip(p, p[1:]))
        return counts
