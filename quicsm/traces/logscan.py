"""Find contract lines in logs of any prefix, fast.

The scanner never splits a file into Python lines: it reads large chunks and jumps from tag to tag with
``bytes.find`` (C speed), so noise lines cost what ``grep`` pays for them. Line numbers come from
counting newlines between hits, also in C. Memory is one chunk, whatever the file size.
"""

from __future__ import annotations

import gzip
import mmap
import os
import zlib
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from quicsm.traces.contract import TAG_BYTES, ContractError, ContractRecord, parse_payload
from quicsm.traces.events import TraceEvent
from quicsm.traces.report import ParseReport
from quicsm.traces.states import canonical_state as canonical

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
    lineno = 1  # line number at the start of the next window
    nul_seen = False
    hits = 0
    windows = _mapped_windows(stream) if _mappable(stream) else _read_windows(stream, path, report, lambda: lineno)
    for buf, start, cut in windows:
        size = cut - start
        if on_bytes is not None:
            on_bytes(size)
        report.bytes += size
        if not nul_seen and hits == 0 and buf.find(b"\x00", start, min(cut, start + (1 << 16))) >= 0:
            nul_seen = True  # binary sniffing looks at the head of each window only, until a hit
        hits_here, lineno = _find_tagged(buf, start, cut, lineno)
        for item in hits_here:
            hits += 1
            if len(item) == 14:  # parsed by the C reader (canonical field order)
                line, conn, cc, t_us, frm, to, *nums, trigger = item
                yield (
                    line,
                    ContractRecord(
                        conn,
                        cc,
                        TraceEvent(
                            t_us, canonical(to), "transition", canonical(frm) if frm else None, *nums, None, trigger
                        ),
                    ),
                )
                report.records += 1
                continue
            line, raw = item
            try:
                rec = parse_payload(raw.decode("utf-8"))
            except UnicodeDecodeError:
                report.problem(path, line, "contract line is not UTF-8 text (binary garbage?)", "not UTF-8")
                continue
            except ContractError as exc:
                report.problem(path, line, f"malformed contract line: {exc}", "malformed contract line")
                continue
            report.records += 1
            yield line, rec
        if cut > start and buf[cut - 1] != 10:
            lineno += 1  # a last line without its newline still counts
    report.lines += lineno - 1
    if nul_seen and hits == 0:
        report.problem(path, 1, "binary data and no contract line: not a quicsm log?", "binary input")


Window = tuple["Buffer", int, int]


def _mappable(stream: BinaryIO) -> bool:
    """A plain regular file (not gzip, not a pipe) is scanned through mmap, without copying it."""
    if isinstance(stream, gzip.GzipFile):
        return False
    try:
        st = os.fstat(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return False
    return st.st_size > 0 and (st.st_mode & 0o170000) == 0o100000 and stream.tell() == 0


def _mapped_windows(stream: BinaryIO) -> Iterator[Window]:
    with mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        size = len(mm)
        start = 0
        while start < size:
            end = min(start + CHUNK, size)
            if end < size:
                cut = mm.rfind(b"\n", start, end) + 1
                if cut <= start:  # one line longer than a window: take it whole
                    nl = mm.find(b"\n", end)
                    cut = size if nl < 0 else nl + 1
            else:
                cut = size
            yield mm, start, cut
            # Drop the scanned pages from this process (they stay in the page cache), so RSS stays flat.
            lo, hi = start - start % mmap.PAGESIZE, cut - cut % mmap.PAGESIZE
            if hi > lo and hasattr(mm, "madvise"):
                mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
            start = cut


def _read_windows(stream: BinaryIO, path: str, report: ParseReport, lineno: Callable[[], int]) -> Iterator[Window]:
    """Complete lines from a stream (gzip, stdin) in windows of about CHUNK bytes; the end may lack a newline."""
    buf = bytearray()
    done = False
    while not done:
        block, error = _read_chunk(stream)
        if error is not None:
            where = lineno() + buf.count(b"\n") + block.count(b"\n")
            report.problem(path, where, f"truncated or corrupt input ({error})", "truncated input")
        done = not block or error is not None
        buf += block
        cut = len(buf) if done else buf.rfind(b"\n") + 1
        if cut:
            yield buf, 0, cut
            del buf[:cut]


Buffer = bytes | bytearray | mmap.mmap


def _find_tagged_py(buf: Buffer, start: int, cut: int, lineno: int) -> tuple[list[tuple[int, bytes]], int]:
    """Lines in ``buf[start:cut]`` holding the tag, as (line number, text after the tag); and the end line number."""
    out: list[tuple[int, bytes]] = []
    find = buf.find
    count = buf.count if not isinstance(buf, mmap.mmap) else (lambda sub, a, b: buf[a:b].count(sub))
    pos = line_at = start
    while True:
        hit = find(TAG_BYTES, pos, cut)
        if hit < 0:
            break
        end = find(b"\n", hit, cut)
        if end < 0:
            end = cut
        lineno += count(b"\n", line_at, hit)
        line_at = hit
        out.append((lineno, bytes(buf[hit + _TAG_LEN : end])))
        pos = end
    return out, lineno + count(b"\n", line_at, cut)


def _find_tagged_c(buf: Buffer, start: int, cut: int, lineno: int) -> tuple[list[tuple[Any, ...]], int]:
    """Same, and lines in the canonical field order come back already split into fields."""
    return _cscan(buf, start, cut, TAG_BYTES, lineno, True)  # type: ignore[no-any-return]


try:  # the optional C build of the same loop (setup.py builds it when a compiler is present)
    from quicsm.traces._scan import scan as _cscan

    _find_tagged = _find_tagged_c
except ImportError:  # pragma: no cover - depends on the install
    _find_tagged = _find_tagged_py


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
