"""k-Tails (Biermann & Feldman, 1972) over the prefix tree of the state sequences.

The prefix tree has one node per distinct trace prefix, labelled with the prefix's last state (the
tree's root is INITIAL; every trace ends in a TERMINAL leaf). Two tree nodes are merged when their
k-futures are equal: the same state and the same set of label strings of length <= k that can follow
it. ``k`` counts as in Synoptic (``KTails.kEquals``): the k-strings include the node itself, so
``k = 1`` compares states only (one node per state, the directly-follows graph), ``k = 2`` also the
set of next states, and so on; the default is Synoptic's k-Tails default, 2.

Scale: identical traces are collapsed first; the tree is built level by level with numpy (a prefix
shared by one trace only gets its whole remaining suffix numbered at once); k-futures are compared
through interned ids: in a prefix tree a node's children carry distinct labels, so equal future
sets are exactly equal (label, set of child ids) pairs, and those sets are compared by two
independent 64-bit hashes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from quicsm.errors import InferenceError
from quicsm.inference.model import InferenceResult
from quicsm.inference.packed import EncodedLog, encode_sequences, first_positions, result_from_nodes
from quicsm.traces.distinct import ranges

__all__ = ["DEFAULT_K", "infer_ktails", "ktails_encoded", "prefix_tree"]

DEFAULT_K = 2
"""Synoptic's ``KTailsOptions.kTailsK`` default: same state and same set of next states."""
_SEED = 0x5EED_CAFE


def infer_ktails(sequences: Sequence[Sequence[str]], k: int = DEFAULT_K) -> InferenceResult:
    started = time.perf_counter()
    return ktails_encoded(encode_sequences(sequences), k=k, started=started)


def ktails_encoded(log: EncodedLog, k: int = DEFAULT_K, started: float | None = None) -> InferenceResult:
    if k < 1:
        raise InferenceError(f"ktails: k must be >= 1 (k = 1 merges nodes of one state), got {k}")
    t0 = time.perf_counter() if started is None else started
    framed, foff = log.framed()
    rep, uniq_codes, uniq_off = _dedupe(framed, foff)
    parent, label, node_of_event = prefix_tree(uniq_codes, uniq_off)
    cls = _ktail_classes(parent, label, k - 1)
    labels_by_class = np.zeros(int(cls.max()) + 1, dtype=np.int64)
    labels_by_class[cls] = label
    names = log.labels
    nodes = _map_back(cls[node_of_event], uniq_off, rep, foff)
    details: dict[str, Any] = {
        "k": k,
        "traces": log.traces,
        "distinct_traces": len(uniq_off) - 1,
        "events": log.events,
        "prefix_tree_nodes": len(parent),
    }
    res = result_from_nodes("ktails", [names[c] for c in labels_by_class.tolist()], nodes, foff, details, k=k)
    res.details["nodes"] = len(res.model.nodes)
    res.details["seconds_total"] = round(time.perf_counter() - t0, 4)
    return res


def _dedupe(framed: np.ndarray, foff: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct framed traces: (representative of each trace, their codes, their offsets)."""
    seen: dict[bytes, int] = {}
    rep = np.empty(len(foff) - 1, dtype=np.int64)
    firsts: list[int] = []
    bounds = foff.tolist()
    for t, (s, e) in enumerate(pairwise(bounds)):
        key = framed[s:e].tobytes()
        r = seen.get(key)
        if r is None:
            r = seen[key] = len(firsts)
            firsts.append(t)
        rep[t] = r
    first = np.asarray(firsts, dtype=np.int64)
    lengths = (foff[1:] - foff[:-1])[first]
    uoff = np.zeros(len(first) + 1, dtype=np.int64)
    np.cumsum(lengths, out=uoff[1:])
    return rep, framed[ranges(foff[first], lengths)], uoff


def prefix_tree(codes: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Prefix tree of the traces: (parent of each node, its label, node of each event).

    Built level by level; once a prefix belongs to a single trace, the rest of that trace becomes
    a chain of new nodes in one step.
    """
    n = len(codes)
    width = int(codes.max()) + 1 if n else 1
    node = np.full(n, -1, dtype=np.int64)
    lengths = offsets[1:] - offsets[:-1]
    active = np.nonzero(lengths > 0)[0]
    parents: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    next_id = 0
    depth = 0
    while len(active):
        idx = offsets[active] + depth
        prev = node[idx - 1] if depth else np.full(len(active), -1, dtype=np.int64)
        keys = (prev + 1) * width + codes[idx]
        uniq, inverse = dense_ids(keys)
        counts = np.bincount(inverse)
        node[idx] = next_id + inverse
        parents.append(uniq // width - 1)
        labels.append(uniq % width)
        next_id += len(uniq)
        alone = counts[inverse] == 1
        done = alone | (lengths[active] == depth + 1)
        tails = active[alone & (lengths[active] > depth + 1)]
        if len(tails):  # the rest of a trace nobody shares: a fresh chain of nodes
            starts = offsets[tails] + depth + 1
            rest = lengths[tails] - depth - 1
            pos = ranges(starts, rest)
            ids = next_id + np.arange(len(pos), dtype=np.int64)
            node[pos] = ids
            chain_parent = ids - 1
            chain_parent[np.cumsum(rest) - rest] = node[starts - 1]
            parents.append(chain_parent)
            labels.append(codes[pos].astype(np.int64))
            next_id += len(pos)
        active = active[~done]
        depth += 1
    parent = np.concatenate(parents) if parents else np.zeros(0, dtype=np.int64)
    label = np.concatenate(labels) if labels else np.zeros(0, dtype=np.int64)
    return parent, label, node


def _ktail_classes(parent: np.ndarray, label: np.ndarray, depth: int) -> np.ndarray:
    """Class id of every tree node: equal ids <=> equal label and equal ``depth``-future (strings after it)."""
    rng = np.random.default_rng(_SEED)
    sig = label.astype(np.int64)  # k = 0: the state alone
    has_parent = parent >= 0
    kids, dads = np.nonzero(has_parent)[0], parent[has_parent]
    for _ in range(depth):
        n_sig = int(sig.max()) + 1
        r1 = rng.integers(1, 2**63, size=n_sig, dtype=np.uint64)
        r2 = rng.integers(1, 2**63, size=n_sig, dtype=np.uint64)
        h1 = np.zeros(len(label), dtype=np.uint64)
        h2 = np.zeros(len(label), dtype=np.uint64)
        np.add.at(h1, dads, r1[sig[kids]])
        np.add.at(h2, dads, r2[sig[kids]])
        new = _intern(label, h1, h2)
        if np.array_equal(new, sig):
            break
        sig = new
    return sig


def _intern(label: np.ndarray, h1: np.ndarray, h2: np.ndarray) -> np.ndarray:
    """Dense ids for distinct (label, h1, h2) triples.

    Grouped by one 64-bit key mixing label and h1 (one sort), then checked against h2 and the label;
    only if that check finds a collision does it fall back to sorting on all three.
    """
    key = h1 ^ (label.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    _, ids = dense_ids(key)
    rep = first_positions(ids, int(ids.max()) + 1 if len(ids) else 0)[ids]
    if np.array_equal(h2[rep], h2) and np.array_equal(label[rep], label):
        return ids
    order = np.lexsort((h2, h1, label))
    change = np.ones(len(order), dtype=bool)
    if len(order) > 1:
        a, b = order[1:], order[:-1]
        change[1:] = (label[a] != label[b]) | (h1[a] != h1[b]) | (h2[a] != h2[b])
    out = np.empty(len(order), dtype=np.int64)
    out[order] = np.cumsum(change) - 1
    return out


def dense_ids(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct keys and, per key, its index among them (np.unique's, by one argsort)."""
    order = np.argsort(keys)  # ids follow the sorted keys: ties need no stable order
    ordered = keys[order]
    change = np.ones(len(keys), dtype=bool)
    change[1:] = ordered[1:] != ordered[:-1]
    inverse = np.empty(len(keys), dtype=np.int64)
    inverse[order] = np.cumsum(change) - 1
    return ordered[change], inverse


def _map_back(unique_nodes: np.ndarray, uniq_off: np.ndarray, rep: np.ndarray, foff: np.ndarray) -> np.ndarray:
    """Node of every framed event of every trace, from the nodes of its distinct representative."""
    return unique_nodes[ranges(uniq_off[rep], foff[1:] - foff[:-1])]
