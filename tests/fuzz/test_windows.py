"""The qlog scanners at the edges of their windows: every qlog we have read in windows of a few bytes, and
records made of near misses of the words the SIMD record pass looks for, ending where its 16-byte loads end.

Each window (and each file read whole) reaches the C scanner fenced by unreadable pages (targets.fenced): a
load even one byte past its end faults, here and under tests/sanitize.py. The result is held to the file
read whole, to the Python twin and (where it applies) to the old object reader.
"""

from __future__ import annotations

import gzip
import io
import random
from pathlib import Path

import pytest

from quicsm.traces import qlog_scanner
from quicsm.traces.events import TraceMeta
from quicsm.traces.report import ParseReport
from tests.fuzz.targets import _qlog_columns
from tests.traces import qlog_oracle
from tests.traces.test_qlog_oracle import QLOGS, SCANNERS, kind_of

EDGE_WINDOWS = (3, 7, 15, 16, 17, 24, 25, 26, 33, 61, 97)
"""Shorter than most records; around the record pass's 16-byte loads and its 25-byte tail (loads reach q + 24)."""

HEAD = 1 << 14


@pytest.mark.parametrize("path", QLOGS, ids=lambda p: Path(p).name)
def test_every_qlog_read_in_windows_of_a_few_bytes_is_read_as_whole(path: str) -> None:
    raw = Path(path).read_bytes()
    data = (gzip.decompress(raw) if path.endswith(".gz") else raw)[:HEAD]
    kind = kind_of(data)
    whole = _qlog_columns(data, kind, qlog_scanner.Scanner, None)
    assert whole[0] or whole[1]["issues"], "a head with neither traces nor problems compares nothing"
    for scanner in SCANNERS:
        for window in (None, *EDGE_WINDOWS):
            assert _qlog_columns(data, kind, scanner, window) == whole, (scanner.__name__, window)


PIECES = (
    *(b"congestion", b"CONGESTION", b"congestio", b"Congest", b"metric", b"METRIC", b"metri", b"mEtrIc"),
    *(b"cc_state", b"CC_STATE", b"cc_stat", b"packet_lost", b"packet_los", b"loss_timer", b"loss_time"),
    *(b"spurious_loss", b"spurious_los", b"los", b"l", b"c", b"m", b"n", b"e", b"s", b"\n", b"\x1e", b" ", b"x"),
    *(b'"time":1', b'"time":', b"{", b"}", b'"', b"\\", b",", b":", b"\xc3\xa9", b"\x00", b"\x7f"),
    b'{"time":5,"name":"recovery:congestion_state_updated","data":{"new":"slow_start"}}',
    b'{"time":6,"name":"recovery:metrics_updated","data":{"congestion_window":100}}',
    b'{"time":7,"name":"recovery:packet_lost","data":{}}',
    b'{"time":8,"name":"transport:packet_sent","data":{}}',
)
"""Whole words and their prefixes (the record pass finds a word by two of its bytes, then checks it whole),
separators, and whole events, so records come in every length with words cut at every place."""

HEADER = b'{"qlog_version":"0.3","qlog_format":"JSON-SEQ","trace":{"vantage_point":{"type":"server"}}}'


def edge_file(rng: random.Random) -> tuple[bytes, str]:
    sep = rng.choice((b"\x1e", b"\n"))
    records = [
        rng.choice(PIECES[-4:])
        if rng.random() < 0.4
        else b"".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12)))
        for _ in range(rng.randint(1, 8))
    ]
    body = b"".join(sep + r if sep == b"\x1e" else r + b"\n" for r in records)
    if rng.random() < 0.5:
        body = body[: rng.randint(0, len(body))]  # cut anywhere, the last record too
    if sep == b"\x1e":
        return b"\x1e" + HEADER + b"\n" + body, "sqlog"
    return HEADER + b"\n" + body, "ndjson"


def test_records_of_near_misses_are_read_alike_in_every_window() -> None:
    rng = random.Random(30)
    held = traces = problems = 0
    for _ in range(1500):
        data, kind = edge_file(rng)
        first = _qlog_columns(data, kind, qlog_scanner.Scanner, None)
        for scanner in SCANNERS:
            window = rng.choice((None, 1, 2, *EDGE_WINDOWS, 40))
            assert _qlog_columns(data, kind, scanner, window) == first, (scanner.__name__, window, data)
        if qlog_oracle.comparable(data, kind):
            report = ParseReport(keep=1 << 30)
            read = qlog_oracle.read_sqlog if kind == "sqlog" else qlog_oracle.read_ndjson
            assert [list(read(io.BytesIO(data), "x", TraceMeta(), report)), report.to_json()] == first, data
            held += 1
        traces += bool(first[0])
        problems += bool(first[1]["issues"])  # type: ignore[index]
    assert held > 1000 and traces > 200 and problems > 1000, (held, traces, problems)  # not empty comparisons
