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
