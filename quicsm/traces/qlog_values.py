"""Guarded JSON decoding and bounded numbers for qlog input.

qlog files come from many stacks and sometimes from nowhere good: integers of thousands of digits,
``Infinity``/``NaN``, nesting deep enough to exhaust the stack, strings where numbers belong. Nothing
here raises on such input; callers get None (or a reason) and report the record.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import msgspec

from quicsm.traces.events import SSTHRESH_INF

__all__ = ["DECODER", "loads", "decode_record", "JSON_ERRORS", "count_value", "time_value", "BadValue", "MAX_COUNT"]

MAX_COUNT = SSTHRESH_INF
"""Largest byte count or rate kept; larger values are out of range (ssthresh: unbounded)."""
_MAX_DIGITS = 40


class BadValue(ValueError):
    """A field whose value cannot be used (wrong type, out of range, not finite)."""


def _parse_int(text: str) -> int | float:
    if len(text.lstrip("-")) > _MAX_DIGITS:
        return -math.inf if text.startswith("-") else math.inf  # far beyond any counter: unbounded
    return int(text)


def _parse_constant(text: str) -> float:
    return {"Infinity": math.inf, "-Infinity": -math.inf}.get(text, math.nan)


DECODER = json.JSONDecoder(parse_int=_parse_int, parse_constant=_parse_constant)
"""Never builds huge integers (4301+ digits would raise) and keeps Infinity/NaN as floats for the
field checks to judge. RecursionError and decode errors propagate (see JSON_ERRORS)."""


def loads(text: str | bytes) -> Any:
    """``json.loads`` with :data:`DECODER`'s guards."""
    return json.loads(text, parse_int=_parse_int, parse_constant=_parse_constant)


_FAST = msgspec.json.Decoder()
_LONG_INT = re.compile(rb"[0-9]{%d}" % (_MAX_DIGITS + 1))
_NESTED = 400


def decode_record(raw: bytes) -> Any:
    """One small JSON record (a JSON-SEQ or NDJSON line), as :func:`loads` decodes it, by msgspec (10x
    faster): where msgspec refuses the bytes, or could decode them otherwise (integers longer than
    :func:`loads` keeps, nesting near the recursion limit), :func:`loads` decides, with its errors."""
    if raw.count(b"[") + raw.count(b"{") < _NESTED and _LONG_INT.search(raw) is None:
        try:
            return _FAST.decode(raw)
        except (msgspec.DecodeError, RecursionError, ValueError):  # ValueError: bad UTF-8
            pass
    return loads(raw)


JSON_ERRORS = (json.JSONDecodeError, UnicodeDecodeError, RecursionError, ValueError)
"""What decoding a record may raise; each means "report this record, go on"."""


def count_value(v: Any, *, field: str, scale: float = 1.0, unbounded_ok: bool = False) -> int | None:
    """A byte count, rate or duration as an int (``scale`` converts units); None if absent.

    ``unbounded_ok`` (ssthresh): 2^64-1, 2^63-1 or more, and Infinity mean "unbounded" and give
    :data:`SSTHRESH_INF`. Otherwise raises :class:`BadValue` for wrong types, NaN, infinities,
    negatives and values out of range.
    """
    if type(v) is int and 0 <= v < MAX_COUNT and scale == 1.0:  # the common case: what the checks below return
        return v
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise BadValue(f"{field} is {type(v).__name__} {_show(v)}, not a number")
    if isinstance(v, float) and math.isnan(v):
        raise BadValue(f"{field} is NaN")
    if unbounded_ok and v >= MAX_COUNT:
        return SSTHRESH_INF  # quiche writes u64::MAX, others i64::MAX or Infinity
    if v < 0:
        raise BadValue(f"{field} is negative ({_show(v)})")
    if math.isinf(v):
        raise BadValue(f"{field} is infinite")
    out = v * scale if scale != 1.0 else v
    if out > MAX_COUNT:
        raise BadValue(f"{field} {_show(v)} is out of range")
    return int(round(out)) if isinstance(out, float) else int(out)


def time_value(v: Any) -> float:
    """An event time as a finite float, in the file's unit; raises :class:`BadValue` otherwise."""
    if isinstance(v, str):
        try:
            v = float(v)  # picoquic's reference_time, some drafts' times are strings
        except ValueError:
            raise BadValue(f"time {_show(v)} is not a number") from None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise BadValue(f"time is {type(v).__name__} {_show(v)}, not a number")
    if not math.isfinite(v) or abs(v) > 1e15:
        raise BadValue(f"time {_show(v)} is out of range")
    return float(v)


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."
