"""Find contract lines in logs of any prefix, fast.

The scanner never splits a file into Python lines: it reads large windows and jumps from tag to tag
with ``bytes.find`` (C speed), so noise lines cost what ``grep`` pays for them. Line numbers come from
counting newlines between hits, also in C. Memory is one window, whatever the file size.

Plain files are scanned where the page cache holds them (mapped by ``_scan.map_file``: no ``read()``
copy, 7 % of a 300 MB log's parse); a log truncated while it is scanned (logrotate's ``copytruncate`` on a
live server log) does not kill the process with SIGBUS: the C side reads zeros past the new end and says
so, and the rest is read with ``read()``, which ends where the file now ends; the shrink is reported
either way. Results do not depend on the window size or the mapping (tests/fuzz checks both).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from quicsm.errors import truncated
from quicsm.traces import native
from quicsm.traces.contract import TAG_BYTES
from quicsm.traces.report import ParseReport

__all__ = [
    "BINARY_INPUT",
    "scan_windows",
    "find_tagged_py",
    "ScanState",
    "CHUNK",
    "C_FIELDS",
    "MAP_MIN",
    "MAX_LINE",
    "Window",
    "mappable",
    "read_into",
]

CHUNK = 1 << 22
_SNIFF = 1 << 16
"""A NUL byte in the first this-many bytes, and no contract line anywhere, means binary input."""
MAX_LINE = 1 << 24
"""Longer lines are skipped and reported (memory stays bounded on a file without newlines)."""
MAP_MIN = 1 << 20
"""Plain files from this size on are scanned in their mapping, not read (a qlog of 0.11 MB gains nothing: a map
and unmap a file against a copy of what the head did not hold; the measured gains are on 5 MB to 1 GB files)."""
_map_file: Callable[[int, int], Any] | None = getattr(
    native.load("quicsm.traces._scan", native.SCAN_ABI), "map_file", None
)
_TAG_LEN = len(TAG_BYTES)
BINARY_INPUT = "binary data and no contract line: not a quicsm log?"
C_FIELDS = (
    "conn",
    "cc",
    "t_us",
    "prev",
    "state",
    "cwnd",
    "inflight",
    "ssthresh",
    "pacing_bps",
    "bw_bps",
    "min_rtt_us",
    "srtt_us",
    "trigger",
)
"""Names of the fields ``_scan.scan`` returns after the line number, in order."""


Problem = Callable[[str, int, str, str], None]
"""Where a scan's problems go: ``(path, line, reason, kind)`` (:meth:`ParseReport.problem`, or a batch's list)."""


@dataclass(slots=True)
class ScanState:
    """Where a scan is: the line number at the start of the next window, and contract lines seen. The
    window buffer is kept from file to file (a run over many small files allocates it once)."""

    lineno: int = 1
    hits: int = 0
    buf: bytearray | None = None

    def next_file(self) -> None:
        self.lineno, self.hits = 1, 0


def scan_windows(
    stream: BinaryIO,
    path: str,
    report: ParseReport,
    on_bytes: Callable[[int], None] | None,
    st: ScanState,
    *,
    chunk: int | None = None,
    problem: Problem | None = None,
    mapped: bool = False,
) -> Generator[tuple[Any, int, int], None, None]:
    """Windows of whole lines ``(buffer, start, cut)`` with the bookkeeping every scanner shares.

    The caller scans ``buffer[start:cut]`` from line ``st.lineno``, then sets ``st.lineno`` to the line number
    at ``cut`` and adds the contract lines it saw to ``st.hits``. Bytes, lines, a file cut while read
    and binary input are counted and reported here (to ``problem``, by default the report's). ``mapped``:
    a plain file is scanned in its mapping (the buffer is then ``_scan.Mapped``, for the C scanners).
    """
    problem = problem or report.problem
    nul_seen = False
    size_at_start = regular_size(stream)
    read = 0
    skipped = [0]
    size = min(chunk or CHUNK, MAX_LINE)
    if st.buf is None or len(st.buf) < size:
        st.buf = bytearray(size)
    shrunk: list[int] = []
    if mapped and size_at_start is not None and mappable(size_at_start):
        windows = _mapped_windows(
            stream, size_at_start, size, shrunk, problem, path, lambda: st.lineno, skipped, st.buf
        )
    else:
        windows = (
            (buf, 0, cut) for buf, cut in _read_windows(stream, path, problem, lambda: st.lineno, size, skipped, st.buf)
        )
    for buf, start, cut in windows:
        if not nul_seen and read < _SNIFF and buf.find(0, start, min(cut, start + _SNIFF - read)) >= 0:
            nul_seen = True  # binary sniffing looks at the head of the file only
        read += cut - start
        report.bytes += cut - start
        yield buf, start, cut
        if cut > start and buf[cut - 1] != 10:
            st.lineno += 1  # a last line without its newline still counts
        if on_bytes is not None:
            on_bytes(cut - start)
    report.lines += st.lineno - 1
    read += skipped[0]
    report.bytes += skipped[0]
    if size_at_start is not None and (read < size_at_start or shrunk):
        problem(
            path,
            st.lineno,
            f"file shrank while being read ({min([read, *shrunk])} of {size_at_start} bytes; rotated with copytruncate?)",
            "file shrank while being read",
        )
    if nul_seen and st.hits == 0:
        problem(path, 1, BINARY_INPUT, "binary input")


def _mapped_windows(
    stream: BinaryIO,
    size: int,
    chunk: int,
    shrunk: list[int],
    problem: Problem,
    path: str,
    lineno: Callable[[], int],
    skipped: list[int],
    buf: bytearray,
) -> Iterator[tuple[Any, int, int]]:
    """Windows of complete lines of a plain file's first ``size`` bytes, in its mapping (``_scan.Mapped``):
    ``(mapping, start, cut)``, the pages of each made present before it is scanned and let go after it.
    What a mapping does not serve is read with :func:`_read_windows` from the first line not yet given:
    a line longer than :data:`MAX_LINE` (skipped and reported there), a file that grew (its last line may
    go on) or shrank (``read()`` ends where it ends now; ``shrunk`` gets its size, the bytes past its end
    having been read as zeros in a window already given)."""
    fd = stream.fileno()
    m = _mapping(fd, size)
    if m is None:
        yield from ((b, 0, c) for b, c in _read_windows(stream, path, problem, lineno, chunk, skipped, buf))
        return
    start = 0
    try:
        while start < size:
            end = min(size, start + chunk)
            cut = m.rfind(10, start, end) + 1 if end < size else size
            if not cut:  # a line longer than the window: whole, if it ends within MAX_LINE
                nl = m.find(10, end, min(size, start + MAX_LINE + 1))
                cut = nl + 1 if nl >= 0 else size if size - start <= MAX_LINE else 0
            if cut == size and os.fstat(fd).st_size != size or not cut or not m.populate(start, cut) or m.faulted:
                break
            yield m, start, cut
            m.release(start, cut)
            start = cut
            if m.faulted:
                shrunk.append(os.fstat(fd).st_size)
                break
    finally:
        m.close()
    if start < size or os.fstat(fd).st_size > size:
        stream.seek(start)
        for b, c in _read_windows(stream, path, problem, lineno, chunk, skipped, buf):
            yield b, 0, c


def _mapping(fd: int, size: int) -> Any:
    """The file's first ``size`` bytes mapped, or None where it cannot be (a file system without mmap): read then."""
    assert _map_file is not None
    try:
        return _map_file(fd, size)
    except OSError:
        return None


def mappable(size: int | None) -> bool:
    """Whether a plain file of ``size`` bytes (None: not a plain file read from its start) is scanned in its mapping."""
    return _map_file is not None and size is not None and size >= max(MAP_MIN, 1)


class Window:
    """A stream's bytes not consumed yet, ``buf[lo:end]``, for a scanner that takes (buffer, start, end).

    Read into ``buf`` (a bytearray kept from file to file; consumed bytes shifted out), or, for a plain file
    :func:`mappable`, taken from its mapping (``_scan.Mapped``: nothing copied, ``lo`` moves on; pages made
    present as they are taken and let go once consumed). Where the mapping stops serving (the file shrank,
    its pages past the new end read as zeros, or grew), what is not consumed is copied to ``buf`` and the
    rest is read with ``read()`` from there: it ends where the file now ends."""

    def __init__(self, stream: BinaryIO, buf: bytearray, grow: Callable[[bytearray, int], bytearray]) -> None:
        self.stream, self._spare, self._grow = stream, buf, grow
        self.lo = self.end = 0
        size = regular_size(stream)
        self._map = _mapping(stream.fileno(), size) if size is not None and mappable(size) else None
        self.buf: Any = buf if self._map is None else self._map
        self._size = size or 0

    def fill(self, n: int) -> tuple[int, Exception | None]:
        """Up to ``n`` more bytes at ``end``: how many, and the error that ended the stream (what was good kept)."""
        m = self._map
        if m is not None:
            got = min(n, self._size - self.end)
            if got and m.populate(self.end, self.end + got) and not m.faulted:
                self.end += got
                return got, None
            if not got and not m.faulted and os.fstat(self.stream.fileno()).st_size == self._size:
                return 0, None
            self._read_on()
        if len(self.buf) < self.end + n:
            self.buf = self._grow(self.buf, self.end + n)
        got, error = read_into(self.stream, self.buf, self.end, n)
        self.end += got
        return got, error

    def _read_on(self) -> None:
        """From the mapping to ``read()``: the bytes not consumed into the buffer, the file read on after them."""
        m, lo, end = self._map, self.lo, self.end
        assert m is not None
        buf = self._spare if len(self._spare) >= end - lo else self._grow(self._spare, end - lo)
        with memoryview(m) as view:
            buf[0 : end - lo] = view[lo:end]
        m.close()
        self._map = None
        self.stream.seek(end)
        self.buf, self.lo, self.end = buf, 0, end - lo

    def consumed(self, at: int) -> None:
        """The bytes before ``at`` are done with."""
        if self._map is not None:
            self._map.release(self.lo, at)
            self.lo = at
        else:
            rest = self.end - at
            self.buf[0:rest] = self.buf[at : self.end]
            self.lo, self.end = 0, rest

    def newlines(self, a: int, b: int) -> int:
        if self._map is None:
            return int(self.buf.count(b"\n", a, b))
        with memoryview(self._map) as view:
            return bytes(view[a:b]).count(b"\n")

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None


def regular_size(stream: BinaryIO) -> int | None:
    """The size of a plain regular file read from its start, else None (gzip, pipes, stdin)."""
    try:
        st = os.fstat(stream.fileno())
        at = stream.tell()
    except (AttributeError, OSError, ValueError):
        return None
    return st.st_size if (st.st_mode & 0o170000) == 0o100000 and at == 0 else None


def _read_windows(
    stream: BinaryIO,
    path: str,
    problem: Problem,
    lineno: Callable[[], int],
    chunk: int,
    skipped: list[int],
    buf: bytearray,
) -> Iterator[tuple[bytearray, int]]:
    """Windows of complete lines, about ``chunk`` bytes each: ``(buffer, end)``; the last may lack a newline.

    The buffer is one bytearray reused from window to window (read into, never reallocated once it is
    big enough: fresh 4 MiB blocks per window cost as much as scanning them); only ``buffer[:end]``
    is the window. A line longer than a window is read whole, up to :data:`MAX_LINE` bytes; a longer
    one is skipped (reported, its newline kept so line numbers stay right, its bytes added to
    ``skipped[0]``), so memory stays bounded whatever the input.
    """
    end = 0  # valid bytes at the front of buf
    done = False
    skipping = False  # inside an overlong line, dropping bytes until its newline
    scanned = 0  # bytes of buf already searched for a newline
    while not done:
        if len(buf) < end + chunk:
            buf.extend(bytes(end + chunk - len(buf)))
        got, error = read_into(stream, buf, end, chunk)
        if error is not None:
            where = lineno() + buf.count(b"\n", 0, end + got)
            problem(path, where, truncated(error), "truncated input")
        done = not got or error is not None
        if skipping:  # end == 0 here: the overlong line's bytes were dropped
            nl = buf.find(b"\n", 0, got)
            skipped[0] += got if nl < 0 else nl
            if nl < 0 and not done:
                continue
            if nl < 0:  # the file ends inside the line: a stand-in newline counts it (not its byte)
                buf[0] = 10
                end = 1
                skipped[0] -= 1
            else:  # the newline ends the skipped line (counted once)
                end = got - nl
                buf[0:end] = buf[nl:got]
            skipping = False
        else:
            end += got
        if end > MAX_LINE and buf.find(b"\n", 0, MAX_LINE + 1) < 0:
            problem(path, lineno(), f"line longer than {MAX_LINE} bytes skipped", "overlong line")
            nl = buf.find(b"\n", 0, end)
            skipped[0] += end if nl < 0 else nl
            if nl < 0:
                end = scanned = 0
                if not done:
                    skipping = True
                    continue
                buf[0] = 10
                end = 1
                skipped[0] -= 1
            else:
                buf[0 : end - nl] = buf[nl:end]
                end -= nl
        if done:
            cut = end
        else:
            cut = buf.rfind(b"\n", scanned, end) + 1
            scanned = end if not cut else 0
        if cut:
            yield buf, cut
            rest = end - cut
            buf[0:rest] = buf[cut:end]
            end, scanned = rest, 0


Buffer = bytes | bytearray


def find_tagged_py(buf: Buffer, start: int, cut: int, lineno: int) -> tuple[list[tuple[int, bytes]], int]:
    """Lines in ``buf[start:cut]`` holding the tag, as (line number, text after the tag); and the end line number."""
    out: list[tuple[int, bytes]] = []
    find, count = buf.find, buf.count
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


def read_into(stream: BinaryIO, buf: bytearray, at: int, chunk: int) -> tuple[int, Exception | None]:
    """Read up to ``chunk`` bytes into ``buf[at:]``; on a truncated/corrupt stream keep what was readable
    and return the error. Reads in steps, so the good data a gzip reader hands out before its error is kept."""
    readinto = getattr(stream, "readinto", None)
    got = 0
    with memoryview(buf) as view:
        while got < chunk:
            try:
                if readinto is not None:
                    n = readinto(view[at + got : at + chunk])
                else:
                    part = (getattr(stream, "read1", None) or stream.read)(chunk - got)
                    n = len(part)
                    view[at + got : at + got + n] = part
            except (EOFError, zlib.error, OSError) as exc:
                # without its traceback: its frames hold a view of ``buf``, which is kept for the next file
                return got, exc.with_traceback(None)
            if not n:
                break
            got += n
    return got, None
