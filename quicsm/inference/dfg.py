"""The directly-follows graph: one node per state, the first-order chain the IMC'17 paper draws."""

from __future__ import annotations

from typing import Sequence

from quicsm.inference.model import INITIAL, TERMINAL, InferenceResult, model_from_paths

__all__ = ["infer_dfg"]


def infer_dfg(sequences: Sequence[Sequence[str]]) -> InferenceResult:
    names = sorted({s for seq in sequences for s in seq})
    labels = [INITIAL, *names, TERMINAL]
    index = {s: i for i, s in enumerate(labels)}
    end = len(labels) - 1
    paths = [[0, *(index[s] for s in seq), end] for seq in sequences]
    return model_from_paths("dfg", labels, paths)
