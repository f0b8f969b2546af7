"""Type stub for the C scanners (quicsm/traces/_scan.c); their pure-Python twins are in logscan.py, columnar.py and qlog_scanner.py."""

import mmap
from typing import Any

ABI: int
"""Bumped with a function's signature or return shape; checked at import against the Python side's number."""

Buffer = bytes | bytearray | memoryview | mmap.mmap

def scan(
    buffer: Buffer, start: int, end: int, tag: bytes, lineno: int, parse: bool = ..., /
) -> tuple[list[tuple[Any, ...]], int]:
    """Lines of ``buffer[start:end]`` holding ``tag``: ``(line, payload)``, or the 14-field parsed tuple
    ``(line, conn, cc, t_us, from, to, cwnd, inflight, ssthresh, pacing_bps, bw_bps, min_rtt_us, srtt_us,
    trigger)`` when ``parse`` is true and the line is in the canonical order; and the line number at ``end``."""

Side = list[tuple[int, int, int, tuple[tuple[str, str], ...] | None]]

def scan_columns(
    buffer: Buffer,
    start: int,
    end: int,
    tag: bytes,
    lineno: int,
    table: dict[bytes, int],
    names: list[str],
    split: int = ...,
    /,
) -> tuple[tuple[bytes, ...], list[tuple[int, int, bytes]], int, Side]:
    """Contract lines of ``buffer[start:end]`` as 8 raw columns (line, conn, cc, t_us, prev, to: int64/int32;
    metrics: 7 int64 per row, INT64_MIN when absent; trigger), strings as ids interned in ``table``/``names``;
    lines the contract refuses as ``(row, line, payload)`` for the Python reader (their rows are
    placeholders); the line number at ``end``; and ``(row, kind, recovery, extra)`` for rows with an event
    kind other than a transition, a recovery or fields the contract does not name. A window of at least
    ``2 * abs(split)`` bytes is read in two threads, with the same result (default: 1 MiB where the process
    may use two CPUs, else 0: one thread; negative: the second thread's part is never taken back, for tests)."""

def scan_files(
    buffer: bytes, bounds: bytes, tag: bytes, table: dict[bytes, int], names: list[str], /
) -> tuple[tuple[bytes, ...], list[tuple[int, int, bytes]], bytes, Side]:
    """Whole files joined in ``buffer`` (file ``i`` spans int64 ``bounds[i]`` to ``bounds[i + 1]``), each scanned
    from its line 1 as :func:`scan_columns` scans a window, with a ninth column numbering each row's file
    (int32); and each file's line count (int64; a last line without its newline counts)."""

class QlogScanner:
    """Rows of qlog traces read window by window (see _scan.c); its pure-Python twin is
    quicsm.traces.qlog_scanner.QlogScannerPy, with the same members and methods."""

    header: int
    delta: int
    has_t: int
    current: int
    first_prev: int
    trans: int
    last_time: float
    tmin: float
    tmax: float
    row_tmax: float
    lines: int
    record_no: int
    rows: int
    trace_row0: int
    max_value: int
    trace_index: int
    event_index: int

    def __init__(self, table: dict[bytes, int], names: list[str], /) -> None: ...
    def records(self, buffer: Buffer, start: int, end: int, sep: int, final: bool, handler: Any, /) -> int: ...
    def document(self, buffer: Buffer, start: int, end: int, final: bool, handler: Any, /) -> int: ...
    def put(
        self,
        kind: int,
        t: float,
        state: int,
        prev: int,
        trigger: int,
        recovery: int,
        metrics: tuple[int, ...],
        rtt: tuple[float, float],
        /,
    ) -> None: ...
    def take(self) -> tuple[bytes, ...]: ...
    def take_uses(self) -> bytes: ...
    def new_trace(self) -> None: ...
    def new_file(self) -> None: ...
    def drop_trace(self) -> None: ...
    def tables(self, table: dict[bytes, int], names: list[str], /) -> None: ...
