"""Annotate a model with what the traces did in it: time share per node, probability per edge.

These are the numbers of the IMC'17 figures: red = share of total time in a state, black = probability
of leaving a state along an edge. A connection's last state lasts until the connection's end.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Annotated, Any, Literal, NoReturn

import msgspec

from quicsm.errors import InferenceError, InputError
from quicsm.formats import checked
from quicsm.inference.model import INITIAL, TERMINAL, Edge, InferenceResult, Model, Node

__all__ = [
    "MODEL_FORMAT",
    "MODEL_FORMAT_VERSION",
    "SUM_TOLERANCE",
    "AnnotatedModel",
    "EdgeRecord",
    "EdgeStats",
    "ModelFile",
    "NodeRecord",
    "NodeStats",
    "load_model",
    "save_model",
]

MODEL_FORMAT = "quicsm-model"
MODEL_FORMAT_VERSION = 1
SUM_TOLERANCE = 1e-6
"""How far a sum of shares or of out-probabilities may be from 1 in a model file (float rounding)."""


@dataclass(frozen=True, slots=True)
class NodeStats:
    id: int
    state: str
    kind: str
    visits: int
    time_us: int
    time_fraction: float

    @property
    def mean_dwell_us(self) -> float:
        return self.time_us / self.visits if self.visits else 0.0


@dataclass(frozen=True, slots=True)
class EdgeStats:
    src: int
    dst: int
    count: int
    probability: float


@dataclass(slots=True)
class AnnotatedModel:
    """A learnt model annotated with what the traces did in it (docs/model-format.md).

    Attributes
    ----------
    model : Model
        The engine's nodes and edges, and its parameters.
    nodes : list of NodeStats
        Per node: visits, time spent, its share of all connection time.
    edges : list of EdgeStats
        Per edge: times taken and probability among its source's out-edges.
    traces, events, total_time_us, sources : int
        What the model was learnt from.
    meta : dict
        Legend metadata: controller, stack, version, the labels the traces share.

    Examples
    --------
    >>> import quicsm
    >>> am = quicsm.learn(quicsm.summarize([TRACES / "fig13/desktop"]), "dfg")
    >>> {n.state: round(n.time_fraction, 3) for n in am.nodes}["ApplicationLimited"]
    0.138
    >>> am.to_json()["format"], am.meta["cc"]
    ('quicsm-model', 'reno')
    """

    model: Model
    nodes: list[NodeStats]
    edges: list[EdgeStats]
    traces: int
    events: int
    total_time_us: int
    sources: int
    """Distinct input files the traces came from."""
    meta: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """The documented model JSON (docs/model-format.md): a :class:`ModelFile` as plain values."""
        m = ModelFile(
            format="quicsm-model",
            format_version=MODEL_FORMAT_VERSION,
            engine=self.model.engine,
            params=self.model.params,
            traces=self.traces,
            sources=self.sources,
            events=self.events,
            total_time_us=self.total_time_us,
            meta=self.meta,
            nodes=[
                NodeRecord(
                    id=n.id,
                    state=n.state,
                    kind=n.kind,  # type: ignore[arg-type]
                    initial=n.kind == "initial",
                    terminal=n.kind == "terminal",
                    visits=n.visits,
                    time_us=n.time_us,
                    mean_dwell_us=round(n.mean_dwell_us, 3),
                    time_fraction=n.time_fraction,
                )
                for n in self.nodes
            ],
            edges=[EdgeRecord(e.src, e.dst, e.count, e.probability) for e in self.edges],
        )
        return msgspec.to_builtins(m, enc_hook=lambda x: x.item())  # NumPy scalars

    @classmethod
    def from_json(cls, data: Any, source: str = "<model>") -> AnnotatedModel:
        """Read :meth:`to_json` output back (``from_json(m.to_json()) == m``), checking it on the way.

        Other tools write this form too, so every field and invariant is checked; a bad one raises
        :class:`~quicsm.errors.InputError` naming ``source`` and the field (``nodes[3].time_fraction``).
        """
        return _ModelReader(source).read(data)


def _stats(
    model: Model, visits: Counter[int], time_us: Counter[int], edge_counts: Counter[tuple[int, int]]
) -> tuple[list[NodeStats], list[EdgeStats], int]:
    """Node and edge statistics from the visit, time and step counts."""
    total = sum(time_us.values())
    nodes = [
        NodeStats(
            n.id,
            n.state,
            n.kind,
            visits[n.id],
            time_us[n.id],
            (time_us[n.id] / total) if total else (0.0 if n.kind != "state" else _zero_time_share(visits, n.id, model)),
        )
        for n in model.nodes
    ]
    out_total: Counter[int] = Counter()
    for (s, _), c in edge_counts.items():
        out_total[s] += c
    edges = [EdgeStats(s, d, c, c / out_total[s]) for (s, d), c in sorted(edge_counts.items())]
    return nodes, edges, total


def _zero_time_share(visits: Counter[int], node_id: int, model: Model) -> float:
    """Share by visit count when no time passed at all (instantaneous traces), so shares still sum to 1."""
    state_visits = sum(c for nid, c in visits.items() if model.nodes[nid].kind == "state")
    return visits[node_id] / state_visits if state_visits else 0.0


MAX_MODEL_BYTES = 256 << 20
"""Largest model JSON read (``render /dev/zero`` stops at once, a bomb here; 10^5 states take about 50 MB)."""


def load_model(path: str) -> AnnotatedModel:
    """Read a model JSON file (``-`` = stdin, gzip ok) and check it (:meth:`AnnotatedModel.from_json`)."""
    from quicsm.files import read_limited

    raw = read_limited(path, MAX_MODEL_BYTES, "a model JSON file", starts=b"{")
    name = "<stdin>" if path == "-" else path
    return AnnotatedModel.from_json(checked(raw, Any, name), source=name)


def save_model(model: AnnotatedModel, path: str) -> None:
    """Write the model JSON atomically (temp file + rename; ``-`` = stdout)."""
    from quicsm.files import atomic_output

    with atomic_output(path, binary=False) as fh:
        json.dump(model.to_json(), fh, indent=2)
        fh.write("\n")


Count = Annotated[int, msgspec.Meta(ge=0, le=(1 << 63) - 1)]  # a 400-digit count stops here, not in NumPy
Share = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]


class NodeRecord(msgspec.Struct, kw_only=True):
    """A node of the model JSON, fields in written order; ``kind``, ``initial``, ``terminal`` and
    ``mean_dwell_us`` follow from the rest (checked when present)."""

    id: Count
    """The node's position in ``nodes``."""
    state: Annotated[str, msgspec.Meta(min_length=1)]
    kind: Literal["initial", "terminal", "state"] | None = None
    initial: bool | None = None
    terminal: bool | None = None
    visits: Count
    time_us: Count
    mean_dwell_us: float | None = None
    time_fraction: Share
    """Share of all connections' time spent here (0 for INITIAL and TERMINAL)."""


class EdgeRecord(msgspec.Struct):
    """An edge of the model JSON: ``probability`` is ``count`` over all steps out of ``src``."""

    src: Count
    dst: Count
    count: Annotated[int, msgspec.Meta(ge=1, le=(1 << 63) - 1)]
    probability: Share


class ModelFile(msgspec.Struct, kw_only=True):
    """The model JSON (docs/model-format.md), fields in written order."""

    format: Literal["quicsm-model"]
    format_version: Annotated[int, msgspec.Meta(ge=1)]
    engine: str
    params: dict[str, Any] = {}
    traces: Count
    sources: Count = 0
    """Distinct input files the traces came from."""
    events: Count
    total_time_us: Count
    meta: dict[str, Any] = {}
    nodes: list[NodeRecord]
    edges: list[EdgeRecord]


class _ModelReader:
    """Checks a model JSON document: its shape against :class:`ModelFile`, then what a shape cannot say
    (ids in order, one INITIAL and TERMINAL, sums), failing with ``source: where: what``."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, what: str) -> NoReturn:
        raise InputError(f"{self.source}: {where}: {what}" if where else f"{self.source}: {what}")

    def read(self, data: Any) -> AnnotatedModel:
        if not isinstance(data, dict):
            self.fail("", "a model file must hold a JSON object")
        fmt = data.get("format")
        if fmt != MODEL_FORMAT:
            self.fail("format", f"expected {MODEL_FORMAT!r}, got {json.dumps(fmt)} (is this a quicsm model file?)")
        version = data.get("format_version")
        if isinstance(version, int) and version > MODEL_FORMAT_VERSION:
            self.fail(
                "format_version", f"{version} is newer than this quicsm reads ({MODEL_FORMAT_VERSION}); upgrade quicsm"
            )
        m = checked(data, ModelFile, self.source)
        nodes = self.nodes(m.nodes)
        edges = self.edges(m.edges, nodes)
        if sum(n.time_us for n in nodes) != m.total_time_us:
            self.fail(
                "total_time_us",
                f"{m.total_time_us} is not the sum of the nodes' time_us ({sum(n.time_us for n in nodes)})",
            )
        model = Model(
            m.engine, [Node(n.id, n.state) for n in nodes], [Edge(e.src, e.dst, e.count) for e in edges], m.params
        )
        return AnnotatedModel(model, nodes, edges, m.traces, m.events, m.total_time_us, m.sources, m.meta)

    def nodes(self, items: list[NodeRecord]) -> list[NodeStats]:
        out: list[NodeStats] = []
        for i, item in enumerate(items):
            where = f"nodes[{i}]"
            if item.id != i:
                self.fail(f"{where}.id", f"is {item.id}; node ids must be 0..{len(items) - 1} in list order")
            kind = Node(item.id, item.state).kind
            for key, expected in (("kind", kind), ("initial", kind == "initial"), ("terminal", kind == "terminal")):
                value = getattr(item, key)
                if value is not None and value != expected:
                    self.fail(
                        f"{where}.{key}",
                        f"is {json.dumps(value)} but state {item.state!r} makes it {json.dumps(expected)}",
                    )
            if kind != "state" and item.time_fraction:
                self.fail(
                    f"{where}.time_fraction", f"{item.state} is synthetic and takes no time, got {item.time_fraction}"
                )
            out.append(NodeStats(item.id, item.state, kind, item.visits, item.time_us, item.time_fraction))
        for synthetic in (INITIAL, TERMINAL):
            found = sum(1 for n in out if n.state == synthetic)
            if found != 1:
                self.fail("nodes", f"need exactly one {synthetic} node, found {found}")
        shares = sum(n.time_fraction for n in out if n.kind == "state")
        if any(n.visits for n in out if n.kind == "state") and abs(shares - 1.0) > SUM_TOLERANCE:
            self.fail("nodes", f"time_fraction over state nodes sums to {shares:.9f}, not 1")
        return out

    def edges(self, items: list[EdgeRecord], nodes: list[NodeStats]) -> list[EdgeStats]:
        out: list[EdgeStats] = []
        seen: set[tuple[int, int]] = set()
        for i, r in enumerate(items):
            where = f"edges[{i}]"
            e = EdgeStats(r.src, r.dst, r.count, r.probability)
            for key, node_id in (("src", e.src), ("dst", e.dst)):
                if node_id >= len(nodes):
                    self.fail(f"{where}.{key}", f"node {node_id} does not exist (model has {len(nodes)} nodes)")
            if nodes[e.src].kind == "terminal" or nodes[e.dst].kind == "initial":
                self.fail(where, f"edge {nodes[e.src].state} -> {nodes[e.dst].state} leaves TERMINAL or enters INITIAL")
            if (e.src, e.dst) in seen:
                self.fail(where, f"duplicate edge {e.src} -> {e.dst}")
            seen.add((e.src, e.dst))
            out.append(e)
        out_total: Counter[int] = Counter()
        out_prob: dict[int, float] = {}
        for e in out:
            out_total[e.src] += e.count
            out_prob[e.src] = out_prob.get(e.src, 0.0) + e.probability
        for src, total in sorted(out_prob.items()):
            if abs(total - 1.0) > SUM_TOLERANCE:
                self.fail("edges", f"probabilities out of node {src} ({nodes[src].state}) sum to {total:.9f}, not 1")
        for i, e in enumerate(out):
            if abs(e.probability - e.count / out_total[e.src]) > SUM_TOLERANCE:
                self.fail(
                    f"edges[{i}].probability", f"{e.probability} is not count/outgoing = {e.count}/{out_total[e.src]}"
                )
        return out


def _count_paths(
    paths: Sequence[Sequence[int]], counts: Sequence[int], durations_us: Sequence[Sequence[int]], size: int
) -> tuple[Counter[int], Counter[int], Counter[tuple[int, int]]]:
    """Visits and time per node and steps per edge over distinct paths taken ``counts`` times, with
    array sums (exact int64): one pass over the steps whatever the number of connections."""
    import numpy as np

    from quicsm.inference.packed import PackedPaths

    if isinstance(paths, PackedPaths):  # what the engines return: already one array
        flat, lengths = paths.nodes, np.diff(paths.offsets)
    else:
        lengths = np.fromiter(map(len, paths), np.int64, len(paths))
        flat = np.fromiter(chain.from_iterable(paths), np.int64, int(lengths.sum()))
    if isinstance(durations_us, PackedPaths):  # a summary's stays, packed the same way
        stays, stay_lengths = durations_us.nodes, np.diff(durations_us.offsets)
    else:
        stay_lengths = np.fromiter(map(len, durations_us), np.int64, len(durations_us))
        stays = np.fromiter(chain.from_iterable(durations_us), np.int64, int(stay_lengths.sum()))
    bad = np.flatnonzero(stay_lengths != lengths - 2)
    if len(bad):
        i = int(bad[0])
        raise InferenceError(f"model path has {int(lengths[i]) - 2} steps for {int(stay_lengths[i])} states")
    counts_arr = np.asarray(counts, np.int64)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    stay_starts = starts - 2 * np.arange(len(lengths))  # stays have two entries fewer per path
    visits = np.zeros(size, np.int64)
    time_us = np.zeros(size, np.int64)
    dense = np.zeros(size * size, np.int64) if size * size <= _DENSE_CELLS else None  # node x node: no sort
    sparse: Counter[int] = Counter()
    a = 0
    while a < len(lengths):  # bounded temporaries: about _STEPS_PER_CHUNK steps at a time
        b = max(a + 1, int(np.searchsorted(ends, starts[a] + _STEPS_PER_CHUNK, side="right")))
        f = flat[starts[a] : ends[b - 1]].astype(np.int64)
        ln = lengths[a:b]
        first = starts[a:b] - starts[a]
        last = first + ln - 1
        n = np.repeat(counts_arr[a:b], ln)
        np.add.at(visits, f, n)
        inner = np.ones(len(f), bool)
        inner[first] = False
        inner[last] = False
        np.add.at(time_us, f[inner], stays[stay_starts[a] : stay_starts[b - 1] + ln[-1] - 2])
        step = np.ones(len(f), bool)
        step[last] = False  # a step from every position but a path's last
        pairs = f[step] * size + f[np.roll(step, 1)]
        if dense is not None:
            np.add.at(dense, pairs, n[step])
        else:
            uniq, where = np.unique(pairs, return_inverse=True)
            per = np.zeros(len(uniq), np.int64)
            np.add.at(per, where.reshape(-1), n[step])
            sparse.update(dict(zip(uniq.tolist(), per.tolist())))
        a = b
    if dense is not None:
        keys = np.flatnonzero(dense)
        sparse = Counter(dict(zip(keys.tolist(), dense[keys].tolist())))
    return (
        Counter({i: int(v) for i, v in enumerate(visits.tolist()) if v}),
        Counter({i: int(v) for i, v in enumerate(time_us.tolist()) if v}),
        Counter({(k // size, k % size): c for k, c in sorted(sparse.items())}),
    )


_STEPS_PER_CHUNK = 1 << 20
_DENSE_CELLS = 1 << 22
"""Edge counts go to a node x node table up to this many cells (no sort), beyond it through np.unique."""


def annotate_counts(
    result: InferenceResult,
    counts: Sequence[int],
    durations_us: Sequence[Sequence[int]],
    events: int,
    sources: int,
    meta: dict[str, Any] | None = None,
) -> AnnotatedModel:
    """Attach visits, dwell times and time shares to nodes and probabilities to edges, for distinct
    sequences: ``result.paths[i]`` was taken ``counts[i]`` times, with ``durations_us[i][j]`` the total
    stay at its j-th state (lists, or packed rows in a :class:`~quicsm.inference.packed.PackedPaths`).
    Gives the same model as annotating every trace one by one (tests/annotate_oracle.py)."""
    model = result.model
    if len(result.paths) != len(counts) or len(counts) != len(durations_us):
        raise InferenceError(f"model has {len(result.paths)} paths for {len(counts)} distinct sequences")
    visits, time_us, edge_counts = _count_paths(result.paths, counts, durations_us, len(model.nodes))
    nodes, edges, total = _stats(model, visits, time_us, edge_counts)
    return AnnotatedModel(model, nodes, edges, sum(counts), events, total, sources, dict(meta or {}))
