"""Find contract lines in logs of any prefix, fast.

The scanner never splits a file into Python lines: it reads large chunks and jumps from tag to tag with
``bytes.find`` (C speed), so noise lines cost what ``grep`` pays for them. Line numbers come from
counting newlines between hits, also in C. Memory is one chunk, whatever the file size.
"""

from __future__ import annotations

import gzip
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
    lineno = 1  # line number at offset `line_at` of `buf`
    buf = bytearray()
    nul_seen = False
    hits = 0
    done = False
    while not done:
        block, error = _read_chunk(stream)
        if error is not None:
            where = lineno + buf.count(b"\n") + block.count(b"\n")
            report.problem(path, where, f"truncated or corrupt input ({error})", "truncated input")
        if not block or error is not None:
            done = True
        if block:
            if on_bytes is not None:
                on_bytes(len(block))
            report.bytes += len(block)
            buf += block
        # Scan complete lines only, unless this is the end.
        cut = len(buf) if done else buf.rfind(b"\n") + 1
        if cut == 0:
            continue
        if not nul_seen and buf.find(b"\x00", 0, cut) >= 0:
            nul_seen = True
        pos = line_at = 0
        find = buf.find
        count = buf.count
        while True:
            hit = find(TAG_BYTES, pos, cut)
            if hit < 0:
                break
            end = find(b"\n", hit, cut)
            if end < 0:
                end = cut
            lineno += count(b"\n", line_at, hit)
            line_at = hit
            pos = end
            hits += 1
            try:
                rec = parse_payload(buf[hit + _TAG_LEN : end].decode("utf-8"))
            except UnicodeDecodeError:
                report.problem(path, lineno, "contract line is not UTF-8 text (binary garbage?)", "not UTF-8")
                continue
            except ContractError as exc:
                report.problem(path, lineno, f"malformed contract line: {exc}", "malformed contract line")
                continue
            report.records += 1
            yield lineno, rec
        lineno += count(b"\n", line_at, cut)
        if done and cut and buf[cut - 1] != 10:
            lineno += 1  # a last line without its newline still counts
        del buf[:cut]
    report.lines += lineno - 1
    if nul_seen and hits == 0:
        report.problem(path, 1, "binary data and no contract line: not a quicsm log?", "binary input")


def _read_chunk(stream: BinaryIO) -> tuple[bytes, Exception | None]:
    """Read up to CHUNK bytes; on a truncated/corrupt stream return what was readable and the error.

    Compressed streams are read in small steps (``read1``) so a truncated gzip keeps all its good data.
    """
    read1 = getattr(stream, "read1", None)
    if read1 is None or not isinstance(stream, gzip.GzipFile):
        try:
            return stream.read(CHUNK), None
        except (EOFError, zlib.error, OSError) as exc:
            return b"", exc
    parts: list[bytes] = []
    size = 0
    while size < CHUNK:
        try:
            part = read1(CHUNK - size)
        except (EOFError, zlib.error, OSError) as exc:
            return b"".join(parts), exc
        if not part:
            break
        parts.append(part)
        size += len(part)
    return b"".join(parts), None
