"""Opening inputs: plain or gzip files (by magic bytes, not name), and stdin as ``-``."""

from __future__ import annotations

import gzip
import io
import os
import sys
from pathlib import Path
from typing import BinaryIO

from quicsm.errors import InputError

__all__ = ["open_binary", "input_kind", "STDIN", "is_gzip"]

STDIN = "-"
_GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(path: str) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == _GZIP_MAGIC


def open_binary(path: str) -> BinaryIO:
    """Open for reading bytes; gunzip transparently. Missing or unreadable files raise InputError."""
    if path == STDIN:
        raw: BinaryIO = sys.stdin.buffer
        peek = raw.peek(2)[:2] if isinstance(raw, io.BufferedReader) else b""
        return gzip.GzipFile(fileobj=raw) if peek == _GZIP_MAGIC else raw  # type: ignore[return-value]
    if not os.path.exists(path):
        raise InputError(f"{path}: no such file")
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise InputError(f"{path}: cannot open ({exc.strerror})") from None
    if fh.read(2) == _GZIP_MAGIC:
        fh.seek(0)
        return gzip.GzipFile(fileobj=fh, mode="rb")  # type: ignore[return-value]
    fh.seek(0)
    return fh


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
