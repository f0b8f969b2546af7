"""Kinds of input. Opening them (plain, gzip, stdin) lives in :mod:`quicsm.files`, re-exported here."""

from __future__ import annotations

from quicsm.files import STDIN, is_gzip, open_binary
from quicsm.traces.sniff import kind_by_name, sniff_file

__all__ = ["open_binary", "input_kind", "STDIN", "is_gzip"]


def input_kind(path: str) -> str:
    """``traces-jsonl``, ``traces-parquet``, ``qlog``, ``sqlog``, ``ndjson`` or ``log``: by content, else by name."""
    if path == STDIN:
        return kind_by_name(path)
    return sniff_file(path)
