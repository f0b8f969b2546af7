"""Kinds of input. Opening them (plain, gzip, stdin) lives in :mod:`quicsm.files`, re-exported here."""

from __future__ import annotations

from pathlib import Path

from quicsm.files import STDIN, is_gzip, open_binary

__all__ = ["open_binary", "input_kind", "STDIN", "is_gzip"]


def input_kind(path: str) -> str:
    """``traces-jsonl``, ``traces-parquet``, ``qlog``, ``sqlog`` or ``log`` (the default), by name."""
    name = Path(path).name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    if name.endswith(".parquet"):
        return "traces-parquet"
    if name.endswith(".jsonl") or name.endswith(".traces.json"):
        return "traces-jsonl"
    if name.endswith(".sqlog"):
        return "sqlog"
    if name.endswith(".qlog"):
        return "qlog"
    return "log"
