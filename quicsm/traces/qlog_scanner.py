"""The qlog scanner: ``QlogScanner`` from the C extension (``_scan.c``), or :class:`QlogScannerPy`, its
pure-Python twin, where the extension is not built. :data:`Scanner` is the one this install uses.

A scanner reads qlogs window by window into rows (see ``_scan.c`` for the columns): the records of a
JSON-SEQ or NDJSON file (:meth:`~QlogScannerPy.records`), or the traces and events of one JSON
document (:meth:`~QlogScannerPy.document`), handing what it does not decide to a handler
(:class:`quicsm.traces.qlog.QlogFile`). The C scanner decides the records stacks write in the plain
shape; the twin decides none and hands every record and event to the handler, so both give the same
rows, problems and counts (the fuzzer in tests/ compares them, windows down to a few bytes).
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable
from typing import Any

import numpy as np

from quicsm.traces import native

__all__ = ["QlogScannerPy", "Scanner", "available", "DOC_KEYS", "TRACE_KEYS", "AUX_DTYPE", "MARK_DTYPE"]

AUX_DTYPE = np.dtype([("row", "<i8"), ("values", "<f8", 3)])
"""An entry of ``trace()``'s AUX side table: a metrics row of the trace and its AUX values as written."""
MARK_DTYPE = np.dtype([("t", "<f8"), ("code", "i1")])
"""An entry of ``trace()``'s marks: the time (file unit) of a loss (1), timer (2) or PTO (3) expiry, or a loss found spurious (4)."""

Buffer = bytes | bytearray
DOC_KEYS = frozenset((b"title", b"description", b"code_version", b"configuration"))
"""Members of the document the reader reads (the others are checked and passed over)."""
TRACE_KEYS = frozenset(
    (b"title", b"description", b"configuration", b"common_fields", b"vantage_point", b"event_fields", b"events")
)
"""Members of a trace the reader reads (``events`` when it is not an array: that is reported)."""

# the document walker's states (as in _scan.c)
D_TOP, D_DOC, D_TRACES, D_TRACE, D_EVENTS, D_AFTER, D_DONE = range(7)
V_OK, V_MORE, V_BAD = range(3)
_WS = b" \t\n\r"
_WS_RE = re.compile(rb"[ \t\n\r]*")
_STR_PREFIX = re.compile(rb'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*')
_DIGITS = re.compile(rb"[0-9]*")
_WORDS = {ord("t"): b"true", ord("f"): b"false", ord("n"): b"null", ord("N"): b"NaN", ord("I"): b"Infinity"}
_DELIMS = frozenset(b",]}:" + _WS)
_PLACEHOLDER = 3


def _skip_ws(buf: Buffer, p: int, e: int) -> int:
    m = _WS_RE.match(buf, p, e)
    return m.end() if m else p


def _string_end(buf: Buffer, p: int, e: int) -> tuple[int, int, str]:
    """(status, end, why) of the string at ``p`` (``"``): Python json's strings (no raw control byte,
    escapes checked), any other byte allowed."""
    m = _STR_PREFIX.match(buf, p, e)
    q = m.end() if m else p + 1
    if q >= e:
        return V_MORE, 0, ""
    c = buf[q]
    if c == 0x22:
        return V_OK, q + 1, ""
    if c < 0x20:
        return V_BAD, 0, "a control character in a string"
    # a backslash the prefix did not take: cut at the end, or a bad escape
    if q + 1 >= e:
        return V_MORE, 0, ""
    if buf[q + 1] == ord("u"):
        for i in range(q + 2, min(q + 6, e)):
            ch = buf[i]
            if not (48 <= ch <= 57 or 97 <= (ch | 32) <= 102):
                return V_BAD, 0, "a bad \\u escape"
        return V_MORE, 0, ""
    return V_BAD, 0, "a bad escape"


def value_end(buf: Buffer, p: int, e: int) -> tuple[int, int, str]:
    """(status, end, why) of the JSON value at ``p`` in Python json's grammar (NaN, Infinity,
    -Infinity; strings without raw control bytes): ``V_OK`` with its end, ``V_MORE`` if it runs past
    ``e``, ``V_BAD`` with what was expected. The same walk as ``value_end`` in ``_scan.c``."""
    stack: list[int] = []
    expect_key = False
    while True:
        p = _skip_ws(buf, p, e)
        if p >= e:
            return V_MORE, 0, ""
        c = buf[p]
        if expect_key and c != 0x22:
            return V_BAD, 0, "a member name"
        if c == 0x22:
            status, q, why = _string_end(buf, p, e)
            if status != V_OK:
                return status, 0, why
            p = q
            if expect_key:
                p = _skip_ws(buf, p, e)
                if p >= e:
                    return V_MORE, 0, ""
                if buf[p] != 0x3A:
                    return V_BAD, 0, "':'"
                p += 1
                expect_key = False
                continue
        elif c == 0x7B or c == 0x5B:
            if len(stack) >= 1024:
                return V_BAD, 0, "nesting deeper than 1024"
            stack.append(0x7D if c == 0x7B else 0x5D)
            p = _skip_ws(buf, p + 1, e)
            if p >= e:
                return V_MORE, 0, ""
            if buf[p] == stack[-1]:
                p += 1
                stack.pop()
            else:
                expect_key = stack[-1] == 0x7D
                continue
        elif c in _WORDS:
            word = _WORDS[c]
            n = len(word)
            if e - p < n:
                return (V_MORE, 0, "") if bytes(buf[p:e]) == word[: e - p] else (V_BAD, 0, "a value")
            if bytes(buf[p : p + n]) != word:
                return V_BAD, 0, "a value"
            p += n
        elif c == 0x2D and e - p >= 2 and buf[p + 1] == 0x49:
            word = b"-Infinity"
            if e - p < 9:
                return (V_MORE, 0, "") if bytes(buf[p:e]) == word[: e - p] else (V_BAD, 0, "a value")
            if bytes(buf[p : p + 9]) != word:
                return V_BAD, 0, "a value"
            p += 9
        else:
            r = p
            if buf[r] == 0x2D:
                r += 1
            if r >= e:
                return V_MORE, 0, ""
            if not 48 <= buf[r] <= 57:
                return V_BAD, 0, "a value"
            r = r + 1 if buf[r] == 48 else _DIGITS.match(buf, r, e).end()  # type: ignore[union-attr]
            if r < e and buf[r] == 0x2E and r + 1 < e and 48 <= buf[r + 1] <= 57:
                r = _DIGITS.match(buf, r + 1, e).end()  # type: ignore[union-attr]
            elif r + 1 >= e and r < e and buf[r] == 0x2E:
                return V_MORE, 0, ""
            if r < e and buf[r] in (0x65, 0x45):
                x = r + 1
                if x < e and buf[x] in (0x2B, 0x2D):
                    x += 1
                if x < e and 48 <= buf[x] <= 57:
                    r = _DIGITS.match(buf, x, e).end()  # type: ignore[union-attr]
                elif x >= e:
                    return V_MORE, 0, ""
            if r >= e:
                return V_MORE, 0, ""
            p = r
        # after a value: the end, or ',' / the container's close
        if not stack:
            return V_OK, p, ""
        p = _skip_ws(buf, p, e)
        if p >= e:
            return V_MORE, 0, ""
        c = buf[p]
        if c == 0x2C:
            p += 1
            expect_key = stack[-1] == 0x7D
            continue
        if c != stack[-1]:
            return V_BAD, 0, "',' or a closing bracket"
        p += 1
        stack.pop()
        while stack:
            r = _skip_ws(buf, p, e)
            if r >= e:
                return V_MORE, 0, ""
            if buf[r] == 0x2C:
                p = r + 1
                expect_key = stack[-1] == 0x7D
                break
            if buf[r] == stack[-1]:
                p = r + 1
                stack.pop()
                continue
            return V_BAD, 0, "',' or a closing bracket"
        if not stack:
            return V_OK, p, ""


class _Broken(Exception):
    def __init__(self, at: int, why: str) -> None:
        self.at, self.why = at, why


class QlogScannerPy:
    """The pure-Python twin of ``_scan.QlogScanner``: the same members, methods and rows; every record
    and event goes to the handler."""

    def __init__(self, table: dict[bytes, int], names: list[str]) -> None:
        self.table, self.names = table, names
        self.max_value = 1 << 24
        self.states = 1
        self.keep_metrics = 1
        """Kept for the C scanner's member: the twin keeps every row's metrics either way."""
        self._buf: Buffer = b""
        self._line_at = 0
        self._clear()
        self.rows = self.trace_row0 = 0
        self.new_file()

    def _clear(self) -> None:
        self.t, self.kind, self.state, self.prev = array("d"), array("b"), array("i"), array("i")
        self.trig, self.recov, self.metrics, self.rtt = array("i"), array("i"), array("q"), array("d")

    def tables(self, table: dict[bytes, int], names: list[str]) -> None:
        self.table, self.names = table, names

    def new_trace(self) -> None:
        self.header = self.delta = self.has_t = self.trans = self.skipped = 0
        self.current = self.first_prev = -1
        self.last_time = self.tmin = self.tmax = self.row_tmax = 0.0
        self.trace_row0 = self.rows
        self._side()

    def _side(self) -> None:
        """What the metric-state reader reads besides the rows: per metrics row (its row in the trace,
        the AUX values) and per loss or timer expiry (its time and code)."""
        self.aux_rows, self.aux_values = array("q"), array("d")
        self.mark_t, self.mark_code = array("d"), array("b")

    def new_file(self) -> None:
        self.lines = self.record_no = 0
        self.dstate, self.dexpect = D_TOP, 0
        self.skip_what = self.skip_depth = self.skip_str = self.skip_esc = 0
        self.trace_index = self.event_index = 0
        self.new_trace()

    def drop_trace(self) -> None:
        n = self.trace_row0
        for col, width in ((self.t, 1), (self.kind, 1), (self.state, 1), (self.prev, 1), (self.trig, 1)):
            del col[n * width :]
        del self.recov[n:]
        del self.metrics[7 * n :]
        del self.rtt[2 * n :]
        self.rows = n

    def _keeps_aux(self) -> bool:
        return self.states == 2 or (self.states == 1 and not self.trans)

    def mark(self, t: float, code: int) -> None:
        if self._keeps_aux():
            self.mark_t.append(t)
            self.mark_code.append(code)

    def trace(self) -> tuple[bytes, ...]:
        """The trace being read (t, kind, metrics) and its side tables, packed as ``_scan.c``'s ``trace()``."""
        r0 = self.trace_row0
        aux = np.zeros(len(self.aux_rows), AUX_DTYPE)
        aux["row"] = self.aux_rows
        aux["values"] = np.frombuffer(self.aux_values.tobytes(), np.float64).reshape(-1, 3)
        marks = np.zeros(len(self.mark_t), MARK_DTYPE)
        marks["t"] = self.mark_t
        marks["code"] = self.mark_code
        t, kind, metrics = self.t[r0:].tobytes(), self.kind[r0:].tobytes(), self.metrics[7 * r0 :].tobytes()
        return t, kind, metrics, self.rtt[2 * r0 :].tobytes(), aux.tobytes(), marks.tobytes()

    def put(
        self,
        kind: int,
        t: float,
        state: int,
        prev: int,
        trig: int,
        recov: int,
        metrics: tuple[int, ...],
        rtt: tuple[float, float],
        aux: tuple[float, ...],
    ) -> None:
        if kind == 0 and self.states == 2:  # the logged states set aside: the metrics tell them
            self.skipped += 1
            return
        if kind == 0 and self.states == 1 and not self.trans:
            self._side()
        if kind == 2 and self._keeps_aux():
            self.aux_rows.append(self.rows - self.trace_row0)
            self.aux_values.extend(aux)
        self.t.append(t)
        self.kind.append(kind)
        self.state.append(state)
        self.prev.append(prev)
        self.trig.append(trig)
        self.recov.append(recov)
        self.metrics.extend(metrics)
        self.rtt.extend(rtt)
        if kind != _PLACEHOLDER:
            if kind == 0:
                if self.trans == 0:
                    self.first_prev = prev
                self.trans += 1
            if self.rows == self.trace_row0 or t > self.row_tmax:
                self.row_tmax = t
        self.rows += 1

    def take(self) -> tuple[bytes, ...]:
        cols = (self.t, self.kind, self.state, self.prev, self.trig, self.recov, self.metrics, self.rtt)
        out = tuple(c.tobytes() for c in cols)
        self._clear()
        self.rows = self.trace_row0 = 0
        return out

    def take_uses(self) -> bytes:
        return b""  # the twin decides no record itself: the handler lists unknown states

    def records(self, buf: Buffer, start: int, end: int, sep: int, final: bool, handler: Callable[..., Any]) -> int:
        """The records of ``buf[start:end]``, all for the handler (see ``_scan.c``)."""
        sep_b = bytes((sep,))
        pos = start
        while True:
            q = buf.find(sep_b, pos, end)
            if q < 0:
                if not final:
                    break
                q = end
            self.record_no += 1
            piece = bytes(buf[pos:q])
            handler(piece, self.lines + 1, self.record_no)
            self.lines += piece.count(b"\n") + (q < end and sep == 10)
            if q == end:
                pos = end
                break
            pos = q + 1
        return pos

    def document(self, buf: Buffer, start: int, end: int, final: bool, handler: Callable[..., Any]) -> int:
        """The document walker of ``_scan.c``, every event for the handler."""
        self._buf, self._line_at = buf, start
        try:
            p = self._walk(buf, start, end, final, handler)
        except _Broken as b:
            handler(9, None, b.why, self._line(b.at), self.trace_index, self.event_index)
            self.dstate = D_DONE
            p = end
        self.lines += buf.count(b"\n", self._line_at, p)
        self._buf = b""
        return p

    def _line(self, at: int) -> int:
        self.lines += self._buf.count(b"\n", self._line_at, at)
        self._line_at = at
        return self.lines + 1

    def _walk(self, buf: Buffer, p: int, e: int, final: bool, handler: Callable[..., Any]) -> int:
        while p < e:
            if self.skip_what:
                ended = False
                while p < e and not ended:
                    c = buf[p]
                    if self.skip_str:
                        if self.skip_esc:
                            self.skip_esc = 0
                        elif c == 0x5C:
                            self.skip_esc = 1
                        elif c == 0x22:
                            self.skip_str = 0
                            ended = not self.skip_depth
                    elif c == 0x22:
                        self.skip_str = 1
                    elif c in (0x7B, 0x5B):
                        self.skip_depth += 1
                    elif c in (0x7D, 0x5D):
                        if self.skip_depth <= 1:
                            ended = True
                        self.skip_depth -= 1
                    elif not self.skip_depth and c in _DELIMS:
                        ended = True
                        p -= 1
                    p += 1
                if not ended:
                    break
                if self.skip_what == 2:
                    self.event_index += 1
                self.skip_what = 0
                self.dexpect = 1
                continue
            p = _skip_ws(buf, p, e)
            if p >= e:
                break
            st = self.dstate
            if st == D_DONE:
                return e
            if st == D_AFTER:
                handler(11, None, None, self._line(p), self.trace_index, self.event_index)
                self.dstate = D_DONE
                return e
            if st == D_TOP:
                if e - p >= 3 and bytes(buf[p : p + 3]) == b"\xef\xbb\xbf":
                    p += 3
                    continue
                if buf[p] != 0x7B:  # no object, so no traces[] array: the file is skipped as such
                    self.dstate = D_DONE
                    return e
                p += 1
                self.dstate, self.dexpect = D_DOC, 0
                continue
            close = 0x7D if st in (D_DOC, D_TRACE) else 0x5D
            c = buf[p]
            if self.dexpect == 1:
                if c == 0x2C:
                    p += 1
                    self.dexpect = 2
                    continue
                if c != close:
                    raise _Broken(p, "',' or a closing bracket")
            if c == close:
                if self.dexpect == 2:
                    raise _Broken(p, "a value after ','")
                p += 1
                self.dexpect = 1
                if st == D_DOC:
                    self.dstate = D_AFTER
                elif st == D_TRACES:
                    self.dstate = D_DOC
                elif st == D_TRACE:
                    handler(7, None, None, self.lines + 1, self.trace_index, self.event_index)
                    self.trace_index += 1
                    self.dstate = D_TRACES
                else:
                    handler(6, None, None, self.lines + 1, self.trace_index, self.event_index)
                    self.dstate = D_TRACE
                continue
            key = None
            v = p
            if st in (D_DOC, D_TRACE):
                if c != 0x22:
                    raise _Broken(p, "a member name")
                status, q, why = value_end(buf, p, e)
                if status != V_OK:
                    if status == V_BAD:
                        raise _Broken(p, why)
                    if final:
                        raise _Broken(p, "the end of a member name")
                    if e - p > self.max_value:
                        raise _Broken(p, "a member name this long")
                    break
                key = bytes(buf[p + 1 : q - 1])
                v = _skip_ws(buf, q, e)
                if v >= e:
                    if final:
                        raise _Broken(p, "':'")
                    break
                if buf[v] != 0x3A:
                    raise _Broken(v, "':'")
                v = _skip_ws(buf, v + 1, e)
                if v >= e:
                    if final:
                        raise _Broken(p, "a value")
                    break
                if st == D_DOC and buf[v] == 0x5B and key == b"traces":
                    handler(12, None, None, self.lines + 1, self.trace_index, 0)
                    p = v + 1
                    self.dstate, self.dexpect = D_TRACES, 0
                    continue
                if st == D_TRACE and buf[v] == 0x5B and key == b"events":
                    handler(4, None, None, self._line(v), self.trace_index, 0)
                    p = v + 1
                    self.dstate, self.dexpect, self.event_index = D_EVENTS, 0, 0
                    continue
            elif st == D_TRACES and c == 0x7B:
                handler(2, None, None, self._line(p), self.trace_index, 0)
                p += 1
                self.dstate, self.dexpect = D_TRACE, 0
                continue
            status, vend, why = value_end(buf, v, e)
            if status == V_BAD:
                raise _Broken(v, why)
            if status == V_MORE:
                if final:
                    raise _Broken(v, "the end of a value (the file is cut)")
                if e - v > self.max_value:
                    handler(10, key, None, self._line(v), self.trace_index, self.event_index)
                    self.skip_what = 2 if st == D_EVENTS else 1
                    self.skip_depth = self.skip_str = self.skip_esc = 0
                    if buf[v] == 0x22:
                        self.skip_str, p = 1, v + 1
                    elif buf[v] in (0x7B, 0x5B):
                        self.skip_depth, p = 1, v + 1
                    else:
                        p = v
                    continue
                break
            if st == D_EVENTS:
                handler(5, None, bytes(buf[v:vend]), self._line(v), self.trace_index, self.event_index)
                self.event_index += 1
            elif st == D_TRACES:
                handler(8, None, None, self._line(v), self.trace_index, 0)
                self.trace_index += 1
            elif key in (DOC_KEYS if st == D_DOC else TRACE_KEYS):
                handler(1 if st == D_DOC else 3, key, bytes(buf[v:vend]), self._line(v), self.trace_index, 0)
            p = vend
            self.dexpect = 1
        if final and self.dstate not in (D_DONE, D_AFTER):
            raise _Broken(e, "more (the file ends inside the document)")
        return p


_c = native.load("quicsm.traces._scan", native.SCAN_ABI)
Scanner: type[Any] = _c.QlogScanner if _c is not None else QlogScannerPy


def available() -> bool:
    """Whether the C scanner is built (without it, :class:`QlogScannerPy` gives the same rows, slower)."""
    return Scanner is not QlogScannerPy
