"""Which reader a file needs, from its first bytes: names lie (picoquic's qlogs are ``.txt``, quic-go's
NDJSON files are ``.qlog``, users rename to ``.json``), contents do not.

Kinds: ``traces-parquet``, ``traces-jsonl`` (files quicsm wrote), ``qlog`` (one JSON document with
``traces[]``), ``sqlog`` (JSON-SEQ, records start with 0x1E), ``ndjson`` (qlog as one JSON object per
line, quic-go up to v0.4x), ``log`` (text with log contract lines; the default).
"""

from __future__ import annotations

import re

__all__ = ["sniff_bytes", "kind_by_name", "HEAD_BYTES"]

HEAD_BYTES = 1 << 16
_PARQUET_MAGIC = b"PAR1"
_GZIP_MAGIC = b"\x1f\x8b"
_NDJSON = re.compile(rb'"qlog_format"\s*:\s*"NDJSON"', re.IGNORECASE)
_SEQ = re.compile(rb'"qlog_format"\s*:\s*"JSON-SEQ"', re.IGNORECASE)
_TRACES = re.compile(rb'"traces"\s*:\s*\[')
_QLOG_KEYS = re.compile(rb'"(qlog_version|qlog_format|file_schema|trace|traces)"\s*:')
_TRACE_KEYS = re.compile(rb'^\{\s*"id"\s*:.*"events"\s*:', re.DOTALL)


def kind_by_name(path: str) -> str:
    """The kind a file's name suggests (used for stdin and when the content says nothing)."""
    name = path.rsplit("/", 1)[-1].lower().removesuffix(".gz")
    if name.endswith(".parquet"):
        return "traces-parquet"
    if name.endswith((".jsonl", ".traces.json")):
        return "traces-jsonl"
    if name.endswith(".sqlog"):
        return "sqlog"
    if name.endswith(".qlog"):
        return "qlog"
    return "log"


def sniff_bytes(head: bytes, fallback: str = "log") -> str:
    """The kind of a file whose (decompressed) first bytes are ``head``."""
    if head.startswith(_PARQUET_MAGIC):
        return "traces-parquet"
    text = head.lstrip(b" \t\r\n\xef\xbb\xbf")
    if text.startswith(b"\x1e"):
        return "sqlog"
    if not text.startswith(b"{"):
        return "log" if b"QUICSM" in head else fallback
    first, nl, rest = text.partition(b"\n")
    if _TRACE_KEYS.match(first) and not _QLOG_KEYS.search(first[:200]):
        return "traces-jsonl"
    if _NDJSON.search(first):
        return "ndjson"
    if _SEQ.search(first):
        return "ndjson"  # JSON-SEQ header whose record separators were lost: read one record a line
    if _TRACES.search(head):
        return "qlog"
    if nl and rest.lstrip().startswith(b"{") and _QLOG_KEYS.search(first):
        return "ndjson"  # a header line, then one event object per line
    if b"QUICSM " in head:
        return "log"  # log lines that happen to start with a JSON object
    if _QLOG_KEYS.search(head):
        return "qlog"
    return fallback
