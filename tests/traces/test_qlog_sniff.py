"""Content, not the name, picks the reader."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from conftest import input_kind

CASES = [
    ("a.qlog", b'{"qlog_format":"NDJSON","qlog_version":"draft-02"}\n{"time":1,"name":"x"}\n', "ndjson"),
    ("a.txt", b'{ "qlog_version": "draft-00", "title": "picoquic", "traces": [\n', "qlog"),
    ("a.json", b'\x1e{"qlog_format":"JSON-SEQ"}\n\x1e{"time":1}\n', "sqlog"),
    ("a.sqlog", b'{"qlog_format":"JSON-SEQ","trace":{}}\n{"time":1,"name":"x"}\n', "ndjson"),
    ("a.qlog", b"2026/11/22 09:36:32 QUICSM v=1 conn=1 t_us=1 from=Init to=SlowStart\n", "log"),
    ("a.log", b'{"level":"info"}\n2026/11/22 QUICSM v=1 conn=1 t_us=1 from=Init to=SlowStart\n', "log"),
    ("a.jsonl", b'{"id": "x", "cc": "reno", "events": []}\n', "traces-jsonl"),
    ("a.bin", b"PAR1\x00\x00", "traces-parquet"),
    ("a.log", b"plain text\n", "log"),
]


@pytest.mark.parametrize("name, head, kind", CASES)
def test_kind_by_content(tmp_path: Path, name: str, head: bytes, kind: str) -> None:
    p = tmp_path / name
    p.write_bytes(head)
    assert input_kind(str(p)) == kind
    gz = tmp_path / (name + ".gz")
    gz.write_bytes(gzip.compress(head))
    assert input_kind(str(gz)) == kind
