"""The directly-follows graph: one node per state, the first-order chain the IMC'17 paper draws."""

from __future__ import annotations

from collections.abc import Sequence

from quicsm.inference.model import InferenceResult
from quicsm.inference.packed import EncodedLog, encode_sequences, result_from_nodes

__all__ = ["dfg_encoded", "infer_dfg"]


def infer_dfg(sequences: Sequence[Sequence[str]]) -> InferenceResult:
    return dfg_encoded(encode_sequences(sequences))


def dfg_encoded(log: EncodedLog) -> InferenceResult:
    """Every event is the node of its state (codes already follow the sorted names)."""
    framed, offsets = log.framed()
    return result_from_nodes("dfg", log.labels, framed, offsets)
