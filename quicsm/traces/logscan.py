"""Find contract lines in logs of any prefix, fast.

The scanner never splits a file into Python lines: it reads large chunks and jumps from tag to tag with
``bytes.find`` (C speed), so noise lines cost what ``grep`` pays for them. Line numbers come from
counting newlines between hits, also in C. Memory is one chunk, whatever the file size.
"""

from __future__ import annotations

import zlib
from typing import BinaryIO, Callable, Iterator

from quicsm.traces.contract import TAG_BYTES, ContractError, ContractRecord, parse_payload
from quicsm.traces.report import ParseReport

__all__ = ["scan_contract", "CHUNK"]

CHUNK = 1 << 22
_TAG_LEN = len(TAG_BYTES)


def scan_contract(
    stream: BinaryIO,
    path: str,
    report: ParseReport,
    on_bytes: Callable[[int], None] | None = None,
) -> Iterator[tuple[int, ContractRecord]]:
    """Yield ``(line_number, record)`` for every contract line; count and report malformed ones."""
    lineno = 1  # line number at the start of `buf`
    tail = b""
    nul_seen = False
    hits = 0
    while True:
        try:
            block = stream.read(CHUNK)
        except (EOFError, zlib.error, OSError) as exc:
            report.problem(path, lineno + tail.count(b"\n"), f"truncated or corrupt input ({exc})", "truncated input")
            block = b""
            eof_error = True
        else:
            eof_error = False
        if on_bytes is not None and block:
            on_bytes(len(block))
        report.bytes += len(block)
        if block:
            buf = tail + block
            cut = buf.rfind(b"\n") + 1
            if cut == 0:
                tail = buf
                continue
            body, tail = buf[:cut], buf[cut:]
        else:
            body, tail = tail, b""
            if not body:
                break
        if not nul_seen and b"\x00" in body:
            nul_seen = True
        pos = 0
        line_at = 0  # offset in `body` whose line number is `lineno`
        find = body.find
        count = body.count
        while True:
            hit = find(TAG_BYTES, pos)
            if hit < 0:
                break
            end = find(b"\n", hit)
            if end < 0:
                end = len(body)
            lineno += count(b"\n", line_at, hit)
            line_at = hit
            pos = end
            hits += 1
            try:
                payload = body[hit + _TAG_LEN : end].decode("utf-8")
                rec = parse_payload(payload)
            except UnicodeDecodeError:
                report.problem(path, lineno, "contract line is not UTF-8 text (binary garbage?)", "not UTF-8")
                continue
            except ContractError as exc:
                report.problem(path, lineno, f"malformed contract line: {exc}", "malformed contract line")
                continue
            report.records += 1
            yield lineno, rec
        nlines = count(b"\n")
        lineno += count(b"\n", line_at)
        report.lines += nlines + (0 if body.endswith(b"\n") else 1)
        if eof_error or not block:
            break
    if nul_seen and hits == 0:
        report.problem(path, 1, "binary data and no contract line: not a quicsm log?", "binary input")
