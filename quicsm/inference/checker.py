"""Check Synoptic invariants against a graph of typed nodes, and find the shortest counterexample path.

A graph here is what Synoptic's partition graph is: nodes labelled with an event type (INITIAL and
TERMINAL included), edges between them; its language is every INITIAL -> TERMINAL walk. An invariant
holds on the graph when it holds on every such walk (all nodes of a partition graph lie on one).

:func:`violations` decides all invariants at once with a few boolean reachability closures over
matrices (one row per event type), so it costs a handful of small matrix products however many
invariants there are. :func:`counterexample` then walks the product of the graph with one
invariant's two-state automaton to return a shortest violating walk, which refinement splits along.

Refinement and coarsening run these thousands of times on graphs of hundreds of partitions, so the
optional C extension ``quicsm.inference.fastcheck`` does the walks (one breadth-first search per invariant
row for :func:`violations`, whose matrix closures cost one step per unit of the graph's diameter).
:data:`SEARCHES` is chosen once: :class:`CSearches` where the extension is built, else the pure-Python
:class:`PySearches`; tests/inference/test_check_c.py holds the two equal on the same graphs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from quicsm.inference.invariants import KINDS, InvariantSet
from quicsm.traces import native

FASTCHECK_ABI = 1
"""``quicsm.inference.fastcheck``'s ABI number: bump it together with ``FASTCHECK_ABI`` in ``fastcheck.c`` when
a function's signature or return shape changes (a new argument, another tuple element, a status code)."""

if TYPE_CHECKING:
    from quicsm.inference import fastcheck
else:  # None without a compiler at install time or with a stale build (warned once): the Python twins run
    fastcheck = native.load("quicsm.inference.fastcheck", FASTCHECK_ABI)

__all__ = [
    "SEARCHES",
    "CSearches",
    "Csr",
    "Edges",
    "PYTHON_SEARCHES",
    "PySearches",
    "counterexample",
    "synoptic_counterexample",
    "violated",
    "violations",
    "walk_states",
]

Edges = tuple[np.ndarray, np.ndarray] | np.ndarray
"""A graph's edges: (src, dst) node-id arrays, or a dense boolean adjacency matrix."""

KIND_CODES = {kind: i for i, kind in enumerate(KINDS)}
"""Invariant kind -> the code the C extension takes (0 AFby, 1 NFby, 2 AP)."""


class Csr(NamedTuple):
    """Successor lists as two int32 arrays: node ``u``'s successors are ``indices[indptr[u]:indptr[u + 1]]``,
    in the order walks try them."""

    indptr: np.ndarray
    indices: np.ndarray

    @classmethod
    def from_edges(cls, src: np.ndarray, dst: np.ndarray, nodes: int) -> Csr:
        """Edges grouped by source; within one source they keep the order they are given in."""
        src = np.asarray(src, dtype=np.int64)
        order = np.argsort(src, kind="stable")
        indptr = np.zeros(nodes + 1, dtype=np.int32)
        np.cumsum(np.bincount(src, minlength=nodes), out=indptr[1:])
        return cls(indptr, np.ascontiguousarray(np.asarray(dst)[order], dtype=np.int32))

    @classmethod
    def from_lists(cls, succ: Sequence[Sequence[int]]) -> Csr:
        indptr = np.zeros(len(succ) + 1, dtype=np.int32)
        np.cumsum([len(s) for s in succ], out=indptr[1:])
        return cls(indptr, np.fromiter((v for s in succ for v in s), dtype=np.int32, count=int(indptr[-1])))

    def lists(self) -> list[list[int]]:
        bounds = self.indptr.tolist()
        flat = self.indices.tolist()
        return [flat[bounds[u] : bounds[u + 1]] for u in range(len(bounds) - 1)]


Graph = Sequence[Sequence[int]] | Csr
"""Successors per node: lists, or :class:`Csr` arrays (what the C extension reads)."""


def _csr(succ: Graph) -> Csr:
    return succ if isinstance(succ, Csr) else Csr.from_lists(succ)


def _lists(succ: Graph) -> Sequence[Sequence[int]]:
    return succ.lists() if isinstance(succ, Csr) else succ


def _int32(values: Sequence[int] | np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.int32)


Step = tuple[np.ndarray, np.ndarray]
"""Edges to follow, as (from, to) node-id arrays."""


def _after(rows: np.ndarray, step: Step) -> np.ndarray:
    """For each row (a node set), the nodes one step away from it."""
    frm, to = step
    r, e = np.nonzero(rows[:, frm])
    out = np.zeros(rows.shape, dtype=bool)
    out[r, to[e]] = True
    return out


def _types_in(rows: np.ndarray, ptype: np.ndarray, size: int) -> np.ndarray:
    """For each row (a node set), which types it holds a node of."""
    r, n = np.nonzero(rows)
    t = ptype[n]
    out = np.zeros((len(rows), size), dtype=bool)
    out[r[t >= 0], t[t >= 0]] = True
    return out


def _closure(start: np.ndarray, step: Step, allowed: np.ndarray | None) -> np.ndarray:
    """Rows of ``start`` grown step by step (see :func:`_after`) until nothing new, kept within ``allowed``."""
    reach = start.copy()
    frontier = start
    while frontier.any():
        grown = _after(frontier, step) & ~reach
        if allowed is not None:
            grown &= allowed
        reach |= grown
        frontier = grown
    return reach


def violations(edges: Edges, ptype: np.ndarray, inv: InvariantSet) -> dict[str, np.ndarray]:
    """Per kind, a (types x types) matrix: True where a mined invariant ``a kind b`` fails on the graph.

    ``edges`` are (src, dst) arrays of node ids, or a dense boolean adjacency matrix; ``ptype[u]`` is
    the type code of node ``u`` (codes as in ``inv.labels``; nodes with a negative type are ignored,
    e.g. merged-away ones). Only types that occur in some mined invariant get a reachability row;
    a step of a reachability closure costs about (rows x edges), however many nodes there are.
    """
    src, dst = np.nonzero(edges) if isinstance(edges, np.ndarray) else edges
    return SEARCHES.violations(np.asarray(src), np.asarray(dst), np.asarray(ptype), inv)


def _violations_py(src: np.ndarray, dst: np.ndarray, ptype: np.ndarray, inv: InvariantSet) -> dict[str, np.ndarray]:
    size = len(inv.labels)
    initial, terminal = size - 2, size - 1
    fwd: Step = (src, dst)
    bwd: Step = (dst, src)
    onehot = np.zeros((size, len(ptype)), dtype=bool)
    live = ptype >= 0
    onehot[ptype[live], np.nonzero(live)[0]] = True
    allowed = ~onehot  # row x: nodes not of type x
    out = {kind: np.zeros((size, size), dtype=bool) for kind in KINDS}

    # a NFby b fails iff some b-node is reachable (>= 1 step) from an a-node.
    rows = np.flatnonzero(inv.nfby.any(axis=1))
    if len(rows):
        reach = _closure(_after(onehot[rows], fwd), fwd, None)
        out["NFby"][rows] = _types_in(reach, ptype, size) & inv.nfby[rows]

    # a AP b fails iff a b-node is reachable from INITIAL through nodes none of which is an a-node.
    rows = np.flatnonzero(inv.ap.any(axis=1))
    if len(rows):
        first = _after(onehot[[initial]], fwd)
        reach = _closure(first & allowed[rows], fwd, allowed[rows])
        out["AP"][rows] = _types_in(reach, ptype, size) & inv.ap[rows]

    # a AFby b fails iff an a-node has a successor from which TERMINAL is reachable avoiding b-nodes.
    cols = np.flatnonzero(inv.afby.any(axis=0))
    if len(cols):
        co = _closure(onehot[[terminal]] & allowed[cols], bwd, allowed[cols])
        into = _after(co, bwd)  # row per b: nodes with an edge into co[b]
        out["AFby"][:, cols] = _types_in(into, ptype, size).T & inv.afby[:, cols]
    return out


def violated(edges: Edges, ptype: np.ndarray, inv: InvariantSet) -> list[tuple[str, int, int]]:
    """(kind, a, b) of every mined invariant the graph breaks, in the fixed order of ``inv.coded()``."""
    found = violations(edges, ptype, inv)
    out: list[tuple[str, int, int]] = []
    for kind in KINDS:
        a, b = np.nonzero(found[kind])
        out.extend((kind, int(x), int(y)) for x, y in zip(a.tolist(), b.tolist()))
    return out


def _step(kind: str, a: int, b: int, state: int, typ: int) -> int:
    """Automaton of ``a kind b`` reading a node of type ``typ``; returns the next state, 2 = violated (kept)."""
    if state == 2:
        return 2
    if kind == "AFby":  # 1: an a is waiting for its b
        if typ == b:
            return 0
        return 1 if typ == a else state
    if kind == "NFby":  # 1: an a has been seen
        if state == 1 and typ == b:
            return 2
        return 1 if typ == a else state
    # AP, 1: an a has been seen
    if state == 0 and typ == b:
        return 2
    return 1 if typ == a else state


def counterexample(
    succ: Graph, ptype: Sequence[int] | np.ndarray, kind: str, a: int, b: int, initial: int, terminal_type: int
) -> list[int] | None:
    """Shortest walk from node ``initial`` to a TERMINAL node that breaks ``a kind b`` (nodes in order), or None.

    As in Synoptic's model checker, every counterexample runs on to TERMINAL: for AFby it ends there with
    an ``a`` still waiting; for NFby/AP the violation happens on the way and the walk is the shortest
    whole walk containing one. ``a`` may be the INITIAL type (``INITIAL AFby x``).
    """
    return SEARCHES.shortest(succ, ptype, kind, a, b, initial, terminal_type)


def _counterexample_py(
    graph: Graph, ptype: Sequence[int] | np.ndarray, kind: str, a: int, b: int, initial: int, terminal_type: int
) -> list[int] | None:
    succ = _lists(graph)
    start_state = _step(kind, a, b, 0, ptype[initial])
    start = (initial, start_state)
    parent: dict[tuple[int, int], tuple[int, int] | None] = {start: None}
    queue = deque([start])
    end: tuple[int, int] | None = None
    while queue:
        node, state = queue.popleft()
        if ptype[node] == terminal_type and (state == 2 or (kind == "AFby" and state == 1)):
            end = (node, state)
            break
        for nxt in succ[node]:
            key = (nxt, _step(kind, a, b, state, ptype[nxt]))
            if key not in parent:
                parent[key] = (node, state)
                queue.append(key)
    if end is None:
        return None
    walk: list[int] = []
    cur: tuple[int, int] | None = end
    while cur is not None:
        walk.append(cur[0])
        cur = parent[cur]
    return walk[::-1]


History = tuple[int, int, "History | None"] | None
"""Synoptic's ``HistoryNode``: (walk length, node, history before it), or None when the state is unreached."""


def _prefer(old: History, new: History) -> History:
    """Synoptic's ``preferShorter(old, new)``: the shorter history, ``new`` on a tie."""
    if new is None:
        return old
    if old is None:
        return new
    return old if old[0] < new[0] else new


def _extend(node: int, h: History) -> History:
    return None if h is None else (h[0] + 1, node, h)


def _tracing_step(kind: str, a: int, b: int, hist: list[History], node: int, typ: int) -> list[History]:
    """Synoptic's ``TracingStateSet.transition`` of the ``a kind b`` automaton entering ``node``.

    States: AFby [a waiting, no a waiting]; NFby [no a yet, a seen, violated]; AP [neither yet,
    a first, b first (violated)]. Each holds the shortest history known to reach it, or None.
    """
    if kind == "AFby":
        was_a, was_b = hist
        if typ == a:
            was_a, was_b = _prefer(was_b, was_a), None
        elif typ == b:
            was_a, was_b = None, _prefer(was_a, was_b)
        return [_extend(node, was_a), _extend(node, was_b)]
    if kind == "NFby":
        none, seen, bad = hist
        if typ == b:
            bad, seen = _prefer(seen, bad), None
        if typ == a:
            seen, none = _prefer(none, seen), None
        return [_extend(node, none), _extend(node, seen), _extend(node, bad)]
    neither, first_a, first_b = hist
    if typ == a:
        first_a, neither = _prefer(neither, first_a), None
    elif typ == b:
        first_b, neither = _prefer(neither, first_b), None
    return [_extend(node, neither), _extend(node, first_a), _extend(node, first_b)]


def synoptic_counterexample(
    succ: Graph, ptype: Sequence[int] | np.ndarray, kind: str, a: int, b: int, initial: int, terminal_type: int
) -> list[int] | None:
    """The counterexample walk Synoptic's model checker reports for ``a kind b``, or None if it holds.

    Synoptic's ``FsmModelChecker.getCounterExample``: a worklist from INITIAL propagates, per node, the
    shortest history reaching each automaton state (a tie keeps the newer one) and stops as soon as
    TERMINAL is reached in the failing state; the walk is then cut after the violation (NFby: the
    first ``b`` after the first ``a``; AP: the first ``b``), as its ``shorten`` does. ``succ`` must
    list successors in Synoptic's order (:meth:`PartitionGraph.ordered_successors`): among equally
    short walks that order decides which one is found, and with it which partitions are split.
    """
    walk = SEARCHES.synoptic_walk(succ, ptype, kind, a, b, initial, terminal_type)
    if walk is None or kind == "AFby":
        return walk
    seen_a = False
    # plain ints: indexing the array node by node took a tenth of the replay at 10^4 events
    types = np.asarray(ptype)[walk].tolist()
    for at, typ in enumerate(types):
        if kind == "NFby" and typ == a and not seen_a:
            seen_a = True
        elif typ == b and (seen_a if kind == "NFby" else True):
            return walk[: at + 1]
        elif kind == "AP" and typ == a:
            break
    raise AssertionError(f"synoptic_counterexample: walk without a violation of {kind}({a}, {b})")


def _synoptic_walk_py(
    graph: Graph, ptype: Sequence[int] | np.ndarray, kind: str, a: int, b: int, initial: int, terminal_type: int
) -> list[int] | None:
    """The worklist search of :func:`synoptic_counterexample`: the whole walk to TERMINAL, or None."""
    succ = _lists(graph)
    width = 2 if kind == "AFby" else 3
    fail = 0 if kind == "AFby" else 2
    start: History = (1, initial, None)
    typ = ptype[initial]
    if kind == "AFby":
        init: list[History] = [start, None] if typ == a else [None, start]
    elif kind == "NFby":
        init = [None, start, None] if typ == a else [start, None, None]
    else:
        init = [None, start, None] if typ == a else [None, None, start] if typ == b else [start, None, None]
    states: dict[int, list[History]] = {initial: init}
    work = deque([initial])
    queued = {initial}
    found: History = None
    while work and found is None:
        node = work.popleft()
        queued.discard(node)
        current = states[node]
        for target in succ[node]:
            old = states.setdefault(target, [None] * width)
            update = _tracing_step(kind, a, b, current, target, ptype[target])
            grows = any(o is None and u is not None for o, u in zip(old, update))
            for i in range(width):
                old[i] = _prefer(old[i], update[i])
            if old[fail] is not None and ptype[target] == terminal_type:
                found = old[fail]
                break
            if grows and target not in queued:
                work.append(target)
                queued.add(target)
    if found is None:
        return None
    walk: list[int] = []
    h: History = found
    while h is not None:
        walk.append(h[1])
        h = h[2]
    walk.reverse()
    return walk


def walk_states(kind: str, a: int, b: int, types: Sequence[int]) -> list[int]:
    """The ``a kind b`` automaton's state after each node of a walk (given by node types)."""
    out: list[int] = []
    state = 0
    for t in types:
        state = _step(kind, a, b, state, t)
        out.append(state)
    return out


class PySearches:
    """The searches in pure Python: what runs where the C extension is not built, and its twin in the tests
    (:func:`violations` on (src, dst) edge arrays, :func:`counterexample`, and :func:`synoptic_counterexample`'s
    walk before its cut)."""

    violations = staticmethod(_violations_py)
    shortest = staticmethod(_counterexample_py)
    synoptic_walk = staticmethod(_synoptic_walk_py)


class CSearches(PySearches):
    """The same searches in the C extension ``fastcheck`` (on CSR arrays)."""

    def violations(
        self, src: np.ndarray, dst: np.ndarray, ptype: np.ndarray, inv: InvariantSet
    ) -> dict[str, np.ndarray]:
        size = len(inv.labels)
        nodes = len(ptype)
        fwd = Csr.from_edges(src, dst, nodes)
        bwd = Csr.from_edges(dst, src, nodes)
        out = {kind: np.zeros((size, size), dtype=np.uint8) for kind in KINDS}
        nfby, ap, afby = (np.ascontiguousarray(m, dtype=np.uint8) for m in (inv.nfby, inv.ap, inv.afby))
        fastcheck.violations(*fwd, *bwd, _int32(ptype), size, nfby, ap, afby, out["NFby"], out["AP"], out["AFby"])
        return {kind: m.view(bool) for kind, m in out.items()}

    def shortest(
        self,
        succ: Graph,
        ptype: Sequence[int] | np.ndarray,
        kind: str,
        a: int,
        b: int,
        initial: int,
        terminal_type: int,
    ) -> list[int] | None:
        return fastcheck.shortest(*_csr(succ), _int32(ptype), KIND_CODES[kind], a, b, initial, terminal_type)

    def synoptic_walk(
        self,
        succ: Graph,
        ptype: Sequence[int] | np.ndarray,
        kind: str,
        a: int,
        b: int,
        initial: int,
        terminal_type: int,
    ) -> list[int] | None:
        return fastcheck.synoptic_walk(*_csr(succ), _int32(ptype), KIND_CODES[kind], a, b, initial, terminal_type)


PYTHON_SEARCHES = PySearches()
SEARCHES: PySearches = CSearches() if fastcheck is not None else PYTHON_SEARCHES
"""The searches this install runs, chosen once: C where the extension is built. Tests set it to
:data:`PYTHON_SEARCHES` to run the twins on the same inputs."""
