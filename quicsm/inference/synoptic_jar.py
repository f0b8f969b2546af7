"""Engine ``synoptic-jar``: run the original Synoptic (Java) and read its model back.

For users who have Synoptic's jar (built from the ModelInference/synoptic repository with ``ant jar``):
pass ``synoptic_jar=PATH`` (CLI ``--synoptic-jar``) or set ``QUICSM_SYNOPTIC_JAR``. The traces are
written as a Synoptic log (:mod:`quicsm.inference.export`), Synoptic writes its final model to
``<prefix>.dot``, and :func:`read_synoptic_dot` turns that into our :class:`Model`. Each trace is
then mapped onto the model by running it through the graph as an NFA (lowest node id first where
Synoptic left a choice), so ``paths`` and counts mean what they mean for the other engines.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from quicsm.errors import InferenceError
from quicsm.inference.export import dump_synoptic_log, synoptic_arguments
from quicsm.inference.model import INITIAL, TERMINAL, InferenceResult
from quicsm.inference.packed import encode_sequences, result_from_nodes

__all__ = [
    "ENV_JAR",
    "DotGraph",
    "find_jar",
    "infer_synoptic_jar",
    "map_traces",
    "parse_synoptic_dot",
    "read_synoptic_dot",
]

ENV_JAR = "QUICSM_SYNOPTIC_JAR"
DEFAULT_TIMEOUT = 3600.0

_NODE = re.compile(r'^\s*(\d+)\s*\[\s*label\s*=\s*"((?:[^"\\]|\\.)*)"(.*)\]\s*;?\s*$')
_EDGE = re.compile(r"^\s*(\d+)\s*->\s*(\d+)\s*(\[.*\])?\s*;?\s*$")
_UNESCAPE = re.compile(r"\\(.)")
_SHAPE = re.compile(r"shape\s*=\s*\"?(\w+)")


@dataclass(frozen=True, slots=True)
class DotGraph:
    """Synoptic's exported model: node labels by DOT id, and its edges."""

    labels: dict[int, str]
    edges: frozenset[tuple[int, int]]


def parse_synoptic_dot(text: str, source: str = "<dot>") -> DotGraph:
    """Read the DOT subset Synoptic's DotExportFormatter writes (``N [label="T",...];``, ``N->M [...];``)."""
    labels: dict[int, str] = {}
    shapes: dict[int, str] = {}
    edges: set[tuple[int, int]] = set()
    lines = text.splitlines()
    if not any(line.strip().startswith("digraph") for line in lines):
        raise InferenceError(f"{source}: not a Graphviz digraph (no 'digraph' line)")
    for no, line in enumerate(lines, 1):
        s = line.strip()
        if not s or s.startswith(("digraph", "}", "//", "#")) or s in ("{",):
            continue
        m = _EDGE.match(s)
        if m:
            edges.add((int(m.group(1)), int(m.group(2))))
            continue
        m = _NODE.match(s)
        if m:
            labels[int(m.group(1))] = _UNESCAPE.sub(lambda x: "\n" if x.group(1) == "n" else x.group(1), m.group(2))
            shape = _SHAPE.search(m.group(3))
            if shape:
                shapes[int(m.group(1))] = shape.group(1)
            continue
        raise InferenceError(f"{source}:{no}: unexpected line in Synoptic's DOT output: {s[:80]!r}")
    for src, dst in sorted(edges):
        for node in (src, dst):
            if node not in labels:
                raise InferenceError(f"{source}: edge {src}->{dst} names node {node}, which has no label line")
    if INITIAL not in labels.values() and TERMINAL not in labels.values():
        _add_synthetic_ends(labels, shapes, edges, source)
    for end in (INITIAL, TERMINAL):
        if sum(1 for v in labels.values() if v == end) != 1:
            raise InferenceError(f"{source}: expected exactly one {end} node in Synoptic's model")
    return DotGraph(labels, frozenset(edges))


def _add_synthetic_ends(
    labels: dict[int, str], shapes: dict[int, str], edges: set[tuple[int, int]], source: str
) -> None:
    """Older Synoptic releases mark first events with shape=box and last ones with shape=diamond
    instead of writing INITIAL/TERMINAL nodes; add those nodes with edges to and from the marked ones."""
    starts = sorted(n for n, sh in shapes.items() if sh == "box")
    ends = sorted(n for n, sh in shapes.items() if sh == "diamond")
    if not starts or not ends:
        raise InferenceError(f"{source}: no INITIAL/TERMINAL nodes and no box/diamond-shaped first/last events")
    init, term = max(labels) + 1, max(labels) + 2
    labels[init], labels[term] = INITIAL, TERMINAL
    edges.update((init, n) for n in starts)
    edges.update((n, term) for n in ends)


def read_synoptic_dot(path: str) -> DotGraph:
    try:
        with open(path, encoding="utf-8") as fh:
            return parse_synoptic_dot(fh.read(), path)
    except OSError as exc:
        raise InferenceError(f"{path}: cannot read Synoptic's model ({exc.strerror})") from None


def map_traces(graph: DotGraph, sequences: Sequence[Sequence[str]]) -> tuple[list[int], list[list[int]]]:
    """Node ids (sorted DOT ids) and, per sequence, the DOT nodes it runs through (INITIAL..TERMINAL).

    An NFA run: forward sets of reachable nodes, then a walk back choosing the lowest id. A trace the
    model does not accept is an error (Synoptic's model accepts all of its input by construction).
    """
    succ: dict[int, list[int]] = {n: [] for n in graph.labels}
    for s, d in sorted(graph.edges):
        succ[s].append(d)
    init = next(n for n, v in graph.labels.items() if v == INITIAL)
    term = next(n for n, v in graph.labels.items() if v == TERMINAL)
    cache: dict[tuple[str, ...], list[int]] = {}
    paths: list[list[int]] = []
    for t, seq in enumerate(sequences):
        key = tuple(seq)
        path = cache.get(key)
        if path is None:
            path = cache[key] = _run(succ, graph.labels, init, term, key, t)
        paths.append(path)
    return sorted(graph.labels), paths


def _run(
    succ: dict[int, list[int]], labels: dict[int, str], init: int, term: int, seq: tuple[str, ...], t: int
) -> list[int]:
    if not seq:
        return [init, term]
    layers: list[set[int]] = [{init}]
    for i, state in enumerate(seq):
        nxt = {d for c in layers[-1] for d in succ[c] if labels[d] == state}
        if not nxt:
            raise InferenceError(f"Synoptic's model does not accept trace {t}: no way on at step {i} ({state})")
        layers.append(nxt)
    ends = sorted(c for c in layers[-1] if term in succ[c])
    if not ends:
        raise InferenceError(f"Synoptic's model does not accept trace {t}: its last state has no edge to TERMINAL")
    path = [ends[0]]
    for layer in reversed(layers[:-1]):
        path.append(min(c for c in layer if path[-1] in succ[c]))
    path.reverse()
    return [*path, term]


def find_jar(synoptic_jar: str | None) -> str:
    jar = synoptic_jar or os.environ.get(ENV_JAR)
    if not jar:
        raise InferenceError(
            "engine synoptic-jar needs the original Synoptic jar: pass --synoptic-jar PATH (Python: "
            f"synoptic_jar=PATH) or set {ENV_JAR}; build it from the ModelInference/synoptic sources "
            "('ant jar' in its synoptic/ folder), or use --engine synoptic (our implementation), or 'quicsm export --to synoptic'"
        )
    if not os.path.isfile(jar):
        raise InferenceError(f"{jar}: Synoptic jar not found")
    return jar


def infer_synoptic_jar(
    sequences: Sequence[Sequence[str]],
    synoptic_jar: str | None = None,
    java: str = "java",
    timeout: float = DEFAULT_TIMEOUT,
    coarsen: bool = True,
    workdir: str | None = None,
) -> InferenceResult:
    jar = find_jar(synoptic_jar)
    java_path = shutil.which(java)
    if java_path is None:
        raise InferenceError(
            f"engine synoptic-jar needs a Java runtime: {java!r} is not on PATH "
            "(Debian: apt-get install default-jre-headless)"
        )
    with tempfile.TemporaryDirectory(prefix="quicsm-synoptic-", dir=workdir) as tmp:
        log_path = os.path.join(tmp, "traces.log")
        prefix = os.path.join(tmp, "model")
        with open(log_path, "w", encoding="utf-8") as fh:
            dump_synoptic_log(sequences, fh)
        cmd = [java_path, "-jar", jar, *synoptic_arguments(log_path, prefix, coarsen=coarsen)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tmp, check=False)
        except subprocess.TimeoutExpired:
            raise InferenceError(f"Synoptic did not finish within {timeout:g} s") from None
        dot = prefix + ".dot"
        if proc.returncode != 0 or not os.path.exists(dot):
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            raise InferenceError(
                f"Synoptic failed (exit {proc.returncode}, no {os.path.basename(dot)}): " + " | ".join(tail)
            )
        graph = read_synoptic_dot(dot)
    ids, paths = map_traces(graph, sequences)
    log = encode_sequences(sequences)
    _, offsets = log.framed()
    nodes = np.fromiter((n for p in paths for n in p), dtype=np.int64, count=int(offsets[-1]))
    labels = [""] * (max(ids) + 1)
    for n, v in graph.labels.items():
        labels[n] = v
    details = {"command": cmd[1:], "synoptic_nodes": len(graph.labels), "synoptic_edges": len(graph.edges)}
    return result_from_nodes("synoptic-jar", labels, nodes, offsets, details, coarsen=coarsen)
