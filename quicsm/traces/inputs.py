"""Opening inputs: plain or gzip files (by magic bytes, not name), and stdin as ``-``."""

from __future__ import annotations

import gzip
import io
import os
import sys
from typing import BinaryIO

from quicsm.errors import InputError
from quicsm.traces.sniff import kind_by_name, sniff_file

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
    """``traces-jsonl``, ``traces-parquet``, ``qlog``, ``sqlog``, ``ndjson`` or ``log``: by content, else by name."""
    if path == STDIN:
        return kind_by_name(path)
    return sniff_file(path)
