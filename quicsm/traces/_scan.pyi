"""Type stub for the C tag finder (quicsm/traces/_scan.c); the pure-Python twin is in logscan.py."""

import mmap
from typing import Any

Buffer = bytes | bytearray | memoryview | mmap.mmap

def scan(
    buffer: Buffer, start: int, end: int, tag: bytes, lineno: int, parse: bool = ..., /
) -> tuple[list[tuple[Any, ...]], int]:
    """Lines of ``buffer[start:end]`` holding ``tag``: ``(line, payload)``, or the 14-field parsed tuple
    ``(line, conn, cc, t_us, from, to, cwnd, inflight, ssthresh, pacing_bps, bw_bps, min_rtt_us, srtt_us,
    trigger)`` when ``parse`` is true and the line is in the canonical order; and the line number at ``end``."""

def scan_columns(
    buffer: Buffer, start: int, end: int, tag: bytes, lineno: int, table: dict[bytes, int], names: list[str], /
) -> tuple[tuple[bytes, ...], list[tuple[int, int, bytes]], int]:
    """Canonical lines of ``buffer[start:end]`` as 8 raw columns (line, conn, cc, t_us, prev, to: int64/int32;
    metrics: 7 int64 per row, INT64_MIN when absent; trigger), strings as ids interned in ``table``/``names``;
    other lines as ``(row, line, payload)`` for the Python reader (their rows are placeholders); and the line
    number at ``end``."""

def scan_files(
    buffer: bytes, bounds: bytes, tag: bytes, table: dict[bytes, int], names: list[str], /
) -> tuple[tuple[bytes, ...], list[tuple[int, int, bytes]], bytes]:
    """Whole files joined in ``buffer`` (file ``i`` spans int64 ``bounds[i]`` to ``bounds[i + 1]``), each scanned
    from its line 1 as :func:`scan_columns` scans a window, with a ninth column numbering each row's file
    (int32); and each file's line count (int64; a last line without its newline counts)."""

def scan_qlogs(
    buffer: bytes, bounds: bytes, seps: bytes, table: dict[bytes, int], names: list[str], /
) -> tuple[tuple[bytes, ...], bytes, bytes, int]:
    """Whole JSON-SEQ/NDJSON qlogs joined in ``buffer`` (file ``i`` spans int64 ``bounds[i]`` to ``bounds[i + 1]``,
    records split at the byte ``seps[i]``): 7 raw columns (file int32, kind int8, time as written float64, state
    and trigger ids int32, cwnd/inflight/ssthresh/pacing int64 x7 per row, min_rtt/smoothed_rtt float64 x2 per row);
    per file int64 (status: 0 read here, 1 for the Python reader; header start, end; rows); per file the last time
    seen (float64, NaN: none); and the number of rows."""
