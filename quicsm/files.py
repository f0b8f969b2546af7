"""Files in and out: opening inputs (plain, gzip, stdin) and writing outputs atomically.

Gzip inputs are read with :class:`GzipReader` rather than :class:`gzip.GzipFile`: on a truncated or
corrupt stream it first hands out every byte that decompressed cleanly (what ``zcat`` prints), and
raises only on the next read, so a reader keeps the good part of a damaged log.
"""

from __future__ import annotations

import errno
import functools
import gzip
import io
import os
import re
import shutil
import signal
import stat
import sys
import tempfile
import threading
import types
import zlib
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any, BinaryIO

from quicsm.errors import InputError, OutputError, reading

__all__ = [
    "STDIN",
    "GzipReader",
    "atomic_output",
    "file_mode",
    "guard_inputs",
    "is_gzip",
    "note_inputs",
    "remove_stale_temporaries",
    "replace_dir",
    "open_binary",
    "read_limited",
    "write_output",
]

STDIN = "-"
GZIP_MAGIC = b"\x1f\x8b"
_inflate: types.ModuleType = zlib
"""What inflates gzip members: zlib-ng, twice as fast as zlib 1.2 (the same bytes and messages; the
stdlib fallback, for an install without it, is tested on the same inputs)."""
try:
    from zlib_ng import zlib_ng as _inflate
except ImportError:  # pragma: no cover - a dependency
    pass
_INFLATE_ERRORS: tuple[type[Exception], ...] = (zlib.error, _inflate.error)
_IN_STEP = 1 << 16
_OUT_STEP = 1 << 20
"""Decompressed bytes per step: bounds memory whatever the compression ratio (a gzip bomb)."""
_ZERO_WINDOW = bytes(32768)


class GzipReader(io.BufferedIOBase):
    """Gunzip ``raw`` (multi-member, zero padding allowed); good data first, then the error.

    The error is :class:`gzip.BadGzipFile` for corrupt data and :class:`EOFError` for a truncated
    stream, the types :mod:`gzip` raises; :attr:`error` keeps it for callers that read to the end.

    Like ``zcat``, a back-reference before the start of the data (what a flipped bit often makes)
    reads zeros instead of stopping there: the members are inflated as raw deflate over a window of
    zeros, and the header, CRC and length are checked here.
    """

    def __init__(self, raw: BinaryIO, *, close_raw: bool = True, head: bytes = b"") -> None:
        self._raw = raw
        self._close_raw = close_raw
        self._d: Any = None
        self._state = "header"  # header -> body -> trailer -> header (next member) ...
        self._crc = 0
        self._size = 0
        self._pending = head
        """Compressed bytes read and not yet inflated (first: ``head``, bytes already read from ``raw``)."""
        self._first: int | None = None
        """The first member's inflated size, once it has ended."""
        self._bad_first = False
        self._out: deque[memoryview] = deque()  # inflated steps not yet handed out, each copied once
        self._have = 0
        self._done = False
        self.error: Exception | None = None
        self.error_raised = False
        """Whether a read has raised :attr:`error` (else the caller may still need to report it)."""

    def readable(self) -> bool:
        return True

    def _fail(self, exc: Exception) -> None:
        self.error = exc
        self._done = True
        self._bad_first = self._first is None

    def head(self, n: int, whole: bool = False) -> bytes:
        """The first ``n`` bytes the head (the compressed bytes given at construction) inflates to, in the
        first member, before anything is read (they stay to be read): what a separate inflate of the head
        in zlib's gzip mode gave, which decided the file's kind, without inflating the head twice. Where
        the head's data is bad, that separate inflate's answer (b"" for corrupt data, a bad CRC or length
        within them, or, when the head is the ``whole`` file, a first member that does not end in it). A
        stream that refers before its start (zeros for zcat and here, an error for zlib's gzip mode) is
        then caught; in a longer file's head it is read as zcat reads it."""
        head = self._pending
        while self._have < n and not self._done and self._pending:  # no read from raw: the head only
            if self._state == "header":
                if not self._header():
                    break
            elif self._state == "body":
                self._step()
            elif not self._trailer():
                break
        if whole and self._state == "trailer":  # a small file's only member: checked now, not at the next read
            self._trailer()
        if self._bad_first or whole and self._first is None:
            try:
                return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, n)
            except zlib.error:
                return b""
        size = min(n, self._have if self._first is None else self._first)
        out = bytearray()
        for chunk in self._out:
            if len(out) >= size:
                break
            out += chunk[: size - len(out)]
        return bytes(out)

    def _fill(self, want: int) -> None:
        while self._have < want and not self._done:
            progressed = False
            if self._state == "header":
                progressed = self._header()
            elif self._state == "body" and self._pending:
                self._step()
                progressed = True
            elif self._state == "trailer":
                progressed = self._trailer()
            if progressed or self._done:
                continue
            try:
                data = self._raw.read(_IN_STEP)
            except OSError as exc:
                self._fail(exc)
                return
            if not data:
                if self._state != "header" or self._pending:
                    self._fail(EOFError("compressed file ended before the end-of-stream marker was reached"))
                self._done = True
                return
            self._pending += data

    def _header(self) -> bool:
        """Parse a member header from the pending bytes; False if more bytes are needed."""
        p = self._pending = self._pending.lstrip(b"\x00")  # zero padding between or after members
        if len(p) < 10:
            if p and not GZIP_MAGIC.startswith(p[:2]):
                self._fail(gzip.BadGzipFile(f"not gzip data after byte {self._size} (trailing garbage?)"))
            return False
        if p[:2] != GZIP_MAGIC or p[2] != 8:
            self._fail(gzip.BadGzipFile("not gzip data (bad magic or compression method)"))
            return True
        flags, at = p[3], 10
        if flags & 4:  # FEXTRA
            if len(p) < at + 2:
                return False
            at += 2 + int.from_bytes(p[at : at + 2], "little")
        for bit in (8, 16):  # FNAME, FCOMMENT: zero-terminated
            if flags & bit:
                end = p.find(b"\x00", at)
                if end < 0:
                    return False
                at = end + 1
        if flags & 2:  # FHCRC
            at += 2
        if len(p) < at:
            return False
        self._pending = p[at:]
        self._d = _inflate.decompressobj(-15, zdict=_ZERO_WINDOW)
        self._crc = self._size = 0
        self._state = "body"
        return True

    def _step(self) -> None:
        data, d = self._pending, self._d
        saved = d.copy()
        try:
            out = d.decompress(data, _OUT_STEP)
        except _INFLATE_ERRORS as exc:
            self._salvage(saved, data)
            self._fail(gzip.BadGzipFile(f"corrupt gzip data: {exc}"))
            return
        self._emit(out)
        if d.eof:
            self._pending = d.unused_data
            self._state = "trailer"
        else:
            self._pending = d.unconsumed_tail

    def _emit(self, out: bytes) -> None:
        if out:
            self._out.append(memoryview(out))
            self._have += len(out)
        self._crc = _inflate.crc32(out, self._crc)
        self._size += len(out)

    def _trailer(self) -> bool:
        p = self._pending
        if len(p) < 8:
            return False
        crc, size = int.from_bytes(p[:4], "little"), int.from_bytes(p[4:8], "little")
        if crc != self._crc:
            self._fail(gzip.BadGzipFile("CRC check failed (the data above it may be damaged)"))
        elif size != self._size & 0xFFFFFFFF:
            self._fail(gzip.BadGzipFile("length check failed (the data above it may be damaged)"))
        elif self._first is None:
            self._first = self._size
        self._pending = p[8:]
        self._state = "header"
        return True

    def _salvage(self, d: Any, data: bytes) -> None:
        """Replay the failed step a byte at a time: keep everything before the bad byte."""
        for i in range(len(data)):
            try:
                self._emit(d.decompress(data[i : i + 1]))
            except _INFLATE_ERRORS:
                return
            if d.eof:
                return

    def _take(self, n: int) -> bytes:
        if not self._have and self.error is not None:
            self.error_raised = True
            raise self.error
        n = self._have if n < 0 else min(n, self._have)
        out = bytearray(n)
        self._into(out, n)
        return bytes(out)

    def _into(self, b: Any, n: int) -> None:
        """Move the first ``n`` inflated bytes into ``b`` (one copy)."""
        at, chunks = 0, self._out
        with memoryview(b) as view:
            while at < n:
                head = chunks[0]
                k = min(n - at, len(head))
                view[at : at + k] = head[:k]
                at += k
                if k == len(head):
                    chunks.popleft()
                else:
                    chunks[0] = head[k:]
        self._have -= n

    def read(self, size: int | None = -1) -> bytes:
        size = -1 if size is None else size
        self._fill(sys.maxsize if size < 0 else size)
        return self._take(size)

    def read1(self, size: int = -1) -> bytes:
        self._fill(_OUT_STEP if size < 0 else max(1, min(size, _OUT_STEP)))
        return self._take(size)

    def peek(self, size: int = 1) -> bytes:
        self._fill(max(1, size))
        return b"".join(self._out)

    def readinto(self, b: Any) -> int:
        size = len(b) if not isinstance(b, memoryview) else b.nbytes
        self._fill(max(1, min(size, _OUT_STEP)))
        if not self._have and self.error is not None:
            self.error_raised = True
            raise self.error
        n = min(size, self._have)
        self._into(b, n)
        return n

    def close(self) -> None:
        if not self.closed and self._close_raw:
            self._raw.close()
        super().close()


class _Borrowed(io.BufferedIOBase):
    """A stream that closing leaves open (stdin belongs to the process, not to one reader); with
    ``close_raw``, one that closes it (:func:`headed`)."""

    def __init__(self, raw: BinaryIO, head: bytes = b"", *, close_raw: bool = False) -> None:
        self._raw = raw
        self._head = head
        """Bytes already read from ``raw`` (to sniff gzip), served first."""
        self._close_raw = close_raw

    def close(self) -> None:
        if not self.closed and self._close_raw:
            self._raw.close()
        super().close()

    def readable(self) -> bool:
        return True

    def _from_head(self, size: int) -> bytes:
        n = len(self._head) if size < 0 else min(size, len(self._head))
        out, self._head = self._head[:n], self._head[n:]
        return out

    def read(self, size: int | None = -1) -> bytes:
        size = -1 if size is None else size
        if self._head:
            out = self._from_head(size)
            return out + self._raw.read(-1 if size < 0 else size - len(out))
        return self._raw.read(size)

    def read1(self, size: int = -1) -> bytes:
        if self._head:
            return self._from_head(size)
        read1 = getattr(self._raw, "read1", None)
        return read1(size) if read1 is not None else self._raw.read(size)

    def readinto(self, b: Any) -> int:
        data = self.read1(len(b))
        b[: len(data)] = data
        return len(data)


def headed(raw: BinaryIO, head: bytes) -> BinaryIO:
    """``head`` (bytes already read from ``raw``) then the rest of ``raw``, which closing this closes: a
    pipe or FIFO cannot seek back to serve its head again."""
    return _Borrowed(raw, head, close_raw=True)  # type: ignore[return-value]


def is_gzip(path: str) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def open_binary(path: str) -> BinaryIO:
    """Open for reading bytes; gunzip transparently (by magic bytes, not name); ``-`` is stdin.

    Missing or unreadable files raise :class:`InputError`. Closing the result never closes stdin.
    """
    if path == STDIN:
        raw: BinaryIO = sys.stdin.buffer
        head = raw.read(2)
        if len(head) == 1:
            head += raw.read(1)
        stream = _Borrowed(raw, head)
        if head == GZIP_MAGIC:
            return GzipReader(stream, close_raw=False)  # type: ignore[arg-type, return-value]
        return stream  # type: ignore[return-value]
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory")
    with reading(path):
        fh = open(path, "rb")
        try:
            magic = fh.read(2)
            fh.seek(0)
        except OSError:
            fh.close()
            raise
    if magic == GZIP_MAGIC:
        return GzipReader(fh)  # type: ignore[return-value]
    return fh


_WRITE_FAILURES = frozenset(
    (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO, errno.EISDIR)
    + (errno.ENOTDIR, errno.ENAMETOOLONG, errno.ENOENT, errno.ELOOP, errno.EEXIST)
)
"""What a write can meet that is the place's fault (full, read-only, not allowed, not a directory)."""
_TEMP = re.compile(r"\.(?P<name>.+)\.(?P<pid>[0-9]+)-(?P<host>[0-9a-f]{8})\.[^.]+\.tmp")
_TEMPS: dict[str, int] = {}
"""Outputs being written through a temporary, with the pid that writes each (forked workers inherit it)."""
_HANDLER_PID = [0]
_INPUTS: list[Sequence[str]] | None = None
"""The inputs of the running command (:func:`guard_inputs`): no output may replace one of them."""


@functools.cache
def _host_tag() -> str:
    import hashlib  # here, not at import: _hashlib loads OpenSSL, and only a write needs the tag

    # the host name as socket.gethostname() gives it (both are gethostname(2)'s), without importing socket
    # (3.5 ms of every writing command's start-up)
    return hashlib.sha1(os.uname().nodename.encode()).hexdigest()[:8]


def _cannot_write(path: str, exc: OSError | str) -> OutputError:
    reason = exc if isinstance(exc, str) else exc.strerror or str(exc)
    kept = "; the old file is kept" if os.path.isfile(path) else ""
    return OutputError(f"{path}: cannot write ({reason}){kept}")


def _temp_prefix(target: Path, pid: int) -> str:
    return f".{target.name}.{pid}-{_host_tag()}."


def _on_signal(signum: int, frame: Any) -> None:
    """SIGTERM / SIGHUP: remove this process's temporaries, then end as the signal would have (a
    ``SystemExit`` first, so ``finally`` blocks still stop the local workers). The temporaries are
    found by name beside each output being written, so one made an instant before is found too."""
    me = os.getpid()
    for target, pid in list(_TEMPS.items()):
        if pid != me:
            continue
        prefix = _temp_prefix(Path(target), me)
        try:
            with os.scandir(Path(target).parent) as entries:
                mine = [e.path for e in entries if e.name.startswith(prefix) and e.name.endswith(".tmp")]
        except OSError:
            mine = []
        for tmp in mine:
            with suppress(OSError):
                os.unlink(tmp)
    signal.signal(signum, signal.SIG_DFL)
    if me != _HANDLER_PID[0]:  # a forked child that inherited the handler: die as the signal says
        os.kill(me, signum)
    raise SystemExit(128 + signum)


def _catch_signals() -> None:
    """Handle SIGTERM and SIGHUP while temporaries exist (main thread only: Python runs handlers there;
    a handler someone else set is left alone)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            _HANDLER_PID[0] = os.getpid()
            signal.signal(sig, _on_signal)


def remove_stale_temporaries(target: Path) -> list[str]:
    """Remove the temporaries of ``target`` that a writer killed outright (SIGKILL, power loss) left:
    those named for a process of this host that no longer runs. Returns their names."""
    removed: list[str] = []
    host = _host_tag()
    try:
        entries = os.scandir(target.parent)
    except OSError:
        return removed
    with entries:
        for e in entries:
            m = _TEMP.fullmatch(e.name)
            if m is None or m["name"] != target.name or m["host"] != host:
                continue
            pid = int(m["pid"])
            try:
                os.kill(pid, 0)
                continue  # its writer still runs
            except ProcessLookupError:
                pass
            except PermissionError:
                continue  # runs, as another user
            try:
                os.unlink(e.path)
                removed.append(e.name)
            except OSError:
                pass
    return removed


def read_limited(path: str, limit: int, what: str, *, starts: bytes = b"") -> bytearray:
    """The whole of ``path`` (gunzipped; ``-`` = stdin), at most ``limit`` bytes: a file that is not
    ``what`` it should be (``/dev/zero``, a gzip bomb, a log given as a model) stops there, and when
    ``starts`` is given, at once if its first non-blank byte is not one of ``starts``."""
    name = "<stdin>" if path == STDIN else path
    with reading(name), open_binary(path) as fh:
        data = bytearray(fh.read(4096))
        first = bytes(data).lstrip(b" \t\r\n\xef\xbb\xbf")[:1]
        if starts and first and first not in starts:
            raise InputError(f"{name}: not {what} (starts with {first!r})")
        while len(data) <= limit:  # in steps into one buffer: the limit, not twice it, in memory
            chunk = fh.read(min(1 << 20, limit + 1 - len(data)))
            if not chunk:
                break
            data += chunk
    if len(data) > limit:
        raise InputError(f"{name}: larger than {limit >> 20} MiB (decompressed); not {what}")
    return data


@contextmanager
def guard_inputs() -> Iterator[None]:
    """While this block runs (a CLI command), no output may replace an input :func:`note_inputs` named:
    ``parse in.log.gz -o in.log.gz`` is refused instead of destroying the raw log."""
    global _INPUTS
    saved, _INPUTS = _INPUTS, []
    try:
        yield
    finally:
        _INPUTS = saved


def note_inputs(paths: Sequence[str]) -> None:
    """Inputs of the running command (kept by reference; nothing when no :func:`guard_inputs` block runs)."""
    if _INPUTS is not None:
        _INPUTS.append(paths)


def _is_input(path: str) -> bool:
    """Whether ``path`` (an existing file) is one of the guarded inputs: the same file under the same
    name or a name that resolves to it (other spellings, symbolic links to its folder)."""
    if not _INPUTS:
        return False
    names = {os.path.basename(path), os.path.basename(os.path.realpath(path))}
    for paths in _INPUTS:
        for p in paths:
            if p[p.rfind("/") + 1 :] in names and "://" not in p:
                try:
                    if os.path.samefile(p, path):
                        return True
                except OSError:
                    pass
    return False


@contextmanager
def atomic_output(path: str, binary: bool = True) -> Iterator[IO[Any]]:
    """Yield a temp file beside ``path``; rename it over ``path`` only if the block finishes. ``-`` = stdout;
    a path that is not a regular file (``/dev/null``, a FIFO) is written in place.

    Whatever stops the block, the temporary goes: an exception, Ctrl-C, SIGTERM or SIGHUP (a handler is
    set while it exists); one a SIGKILL left is removed on the next write of ``path``. A place that
    cannot be written (full disk, read-only, a directory in the way) and an input of the running
    command (:func:`guard_inputs`) are :class:`OutputError` naming ``path``; the old file is kept."""
    if path == "-":
        yield sys.stdout.buffer if binary else sys.stdout
        return
    target = Path(path)
    try:
        kind = os.stat(target).st_mode
    except OSError:
        kind = 0
    if stat.S_ISDIR(kind):
        raise _cannot_write(path, "is a directory")
    if kind and not stat.S_ISREG(kind):  # /dev/null, a FIFO, /dev/stdout: renaming over it would replace the device
        try:
            fh = open(target, "wb" if binary else "w")
        except OSError as exc:
            raise _cannot_write(path, exc) from None
        try:
            with fh:
                yield fh
        except OSError as exc:  # /dev/full, a FIFO whose reader went away
            if exc.errno in _WRITE_FAILURES | {errno.EPIPE} and exc.filename in (None, str(target)):
                raise _cannot_write(path, exc) from None
            raise
        return
    if kind and _is_input(path):
        raise OutputError(f"{path}: is also an input; not overwritten (give another output)")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    mode = file_mode(path)
    remove_stale_temporaries(target)
    key = os.path.abspath(path)
    _TEMPS[key] = os.getpid()  # before the temporary exists: a signal at any instant finds it
    _catch_signals()
    try:
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(target, os.getpid()), suffix=".tmp", dir=target.parent)
    except OSError as exc:
        _TEMPS.pop(key, None)
        raise _cannot_write(path, exc) from None
    try:
        try:
            with os.fdopen(fd, "wb" if binary else "w") as fh:
                yield fh
            os.chmod(tmp, mode)  # mkstemp makes 0600; give the file the mode a plain open() would
            os.replace(tmp, target)
        except OSError as exc:
            if exc.errno in _WRITE_FAILURES and exc.filename in (None, tmp, str(target)):
                raise _cannot_write(path, exc) from None
            raise
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    finally:
        _TEMPS.pop(key, None)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where that is unavailable."""
    import ctypes

    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def replace_dir(new: Path, target: Path) -> None:
    """Put the finished directory ``new`` (beside ``target``) at ``target`` and remove the one it replaces.

    The two are swapped in one ``renameat2(RENAME_EXCHANGE)``, so whoever resolved a path in ``target`` finds
    the old or the new directory whole at every moment (cache entries, patch sets); without renameat2 the old
    one is renamed aside first (``target`` is missing for that moment only)."""
    if not target.exists():
        os.replace(new, target)
    elif _exchange(new, target):
        shutil.rmtree(new, ignore_errors=True)  # the old one now
    else:
        os.replace(target, f"{new}.old")
        os.replace(new, target)
        shutil.rmtree(f"{new}.old", ignore_errors=True)


def write_output(path: str, data: str | bytes) -> None:
    """Write ``data`` whole to ``path`` (``-`` = stdout) through :func:`atomic_output`."""
    with atomic_output(path, binary=isinstance(data, bytes)) as fh:
        fh.write(data)


def file_mode(path: str | Path) -> int:
    """The mode an output should get: the replaced file's, else 0666 less the umask."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask
