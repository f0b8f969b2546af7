"""The log contract (docs/log-format.md): write one line, read one line.

Reading is on the hot path of the parser: :func:`parse_payload` takes the text after the tag and does
one split per field; everything that is not a plain field lands in ``extra``.

The reading rules, shared by this module, the C scanner (``_scan.c``) and any other reader, which must
give the same record for the same bytes:

* Fields are separated by runs of the ASCII separators :data:`SEPARATORS` (space, tab, CR, VT, FF) and
  by nothing else: U+00A0, U+3000, ``\x1c``-``\x1f`` and every other character belong to the value.
  Separators before the first and after the last field are ignored.
* A value of ``-`` means "not known" and is the same as leaving the field out, in any field order:
  ``conn=-``, ``t_us=-``, ``cc=-`` and (for transitions) ``to=-`` are therefore errors.
* Numbers are ASCII decimal. ``t_us`` lies in [-2^63, 2^63); the metric fields lie in [0, 2^63).
  ``ssthresh`` may also be ``inf`` / ``Infinity`` or any integer from 2^63-1 up (``2^64-1`` is what a
  C++ ``std::numeric_limits<uint64_t>::max()`` prints): all mean unbounded (:data:`SSTHRESH_INF`).
  A decimal fraction or exponent (``1.5e3``) is truncated to an integer; anything else is an error.
* Lines in the canonical field order take a fast path (a regex here, a hand-written parser in C); every
  other line, and every canonical line the fast path does not accept, takes the general reader, which
  owns every error message. Both paths build the event with :func:`contract_event`.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from quicsm.traces.events import EVENT_KINDS, METRIC_FIELDS, SSTHRESH_INF, TraceEvent
from quicsm.traces.states import canonical_state

__all__ = [
    "TAG",
    "TAG_BYTES",
    "FORMAT_VERSION",
    "ContractError",
    "ContractRecord",
    "format_line",
    "parse_payload",
    "parse_line",
    "INT_FIELDS",
    "SEPARATORS",
    "contract_event",
    "split_fields",
]

TAG = "QUICSM"
TAG_BYTES = b"QUICSM "
FORMAT_VERSION = "1"

INT_FIELDS = METRIC_FIELDS
_KNOWN = frozenset(("v", "conn", "t_us", "cc", "ev", "from", "to", "recovery", "trigger", *INT_FIELDS))
SEPARATORS = " \t\r\v\f"
"""The only characters that separate fields (ASCII space, tab, CR, VT, FF)."""
_SPLIT = re.compile(r"[ \t\r\v\f]+")
_INT_MAX = (1 << 63) - 1
_INFINITE = frozenset(("inf", "Inf", "INF", "infinity", "Infinity", "INFINITY", "+inf", "+Infinity"))
_INTEGER = re.compile(r"-?[0-9]{1,20}", re.ASCII)
_DECIMAL = re.compile(r"-?(?:[0-9]{1,20}(?:\.[0-9]{0,20})?|\.[0-9]{1,20})(?:[eE][+-]?[0-9]{1,3})?", re.ASCII)
_ORDER = ("v", "conn", "t_us", "cc", "ev", "from", "to", *INT_FIELDS, "recovery", "cycle", "trigger")


class ContractError(ValueError):
    """A line that carries the tag but breaks the contract; the message is the reason."""


class ContractRecord(NamedTuple):
    """One contract line: the connection it belongs to and the event it carries."""

    conn: str
    cc: str
    event: TraceEvent


def format_line(
    *,
    conn: str,
    t_us: int,
    cc: str,
    to: str | None = None,
    frm: str | None = None,
    ev: str | None = None,
    **fields: Any,
) -> str:
    """Write a contract line (without a newline). ``frm`` is the ``from`` field (a Python keyword)."""
    values: dict[str, Any] = {"v": FORMAT_VERSION, "conn": conn, "t_us": int(t_us), "cc": cc}
    if ev and ev != "transition":
        values["ev"] = ev
    if frm is not None:
        values["from"] = frm
    if to is not None:
        values["to"] = to
    values.update({k: v for k, v in fields.items() if v is not None})
    keys = [k for k in _ORDER if k in values] + sorted(k for k in values if k not in _ORDER)
    parts = []
    for k in keys:
        v = values[k]
        if k == "ssthresh" and v == SSTHRESH_INF:
            v = "inf"
        text = _SPLIT.sub("_", str(v))
        if not text:
            text = "-"
        parts.append(f"{k}={text}")
    return f"{TAG} " + " ".join(parts)


def _number(key: str, value: str) -> int:
    """A contract integer within its range (see the module docstring); ContractError otherwise."""
    if _INTEGER.fullmatch(value):
        n = int(value)
    elif key == "ssthresh" and value in _INFINITE:
        return SSTHRESH_INF
    elif _DECIMAL.fullmatch(value):
        f = float(value)
        if f != f or f in (float("inf"), float("-inf")):
            raise ContractError(f"{key}={value[:40]!r} is not a finite number")
        n = int(f)
    else:
        raise ContractError(f"{key}={value[:40]!r} is not a number")
    if key == "t_us":
        if not -_INT_MAX - 1 <= n <= _INT_MAX:
            raise ContractError(f"t_us={value[:40]!r} is out of range (a signed 64-bit count of microseconds)")
        return n
    if key == "ssthresh" and n >= _INT_MAX:
        return SSTHRESH_INF
    if not 0 <= n <= _INT_MAX:
        raise ContractError(f"{key}={value[:40]!r} is out of range (0 to 2^63-1)")
    return n


def contract_event(
    *,
    t_us: int,
    state: str | None,
    kind: str = "transition",
    prev: str | None = None,
    cwnd: int | None = None,
    inflight: int | None = None,
    ssthresh: int | None = None,
    pacing_bps: int | None = None,
    bw_bps: int | None = None,
    min_rtt_us: int | None = None,
    srtt_us: int | None = None,
    recovery: str | None = None,
    trigger: str | None = None,
    extra: tuple[tuple[str, str], ...] = (),
) -> TraceEvent:
    """The one constructor of events read from the contract (fast paths in Python and C, general reader).

    State names are made canonical; ``-`` (not known) becomes ``None`` in ``prev``, ``recovery`` and
    ``trigger``. Callers have already refused ``-`` where a value is required.
    """
    return TraceEvent(
        t_us,
        canonical_state(state) if state else "",
        kind,
        canonical_state(prev) if prev and prev != "-" else None,
        cwnd,
        inflight,
        ssthresh,
        pacing_bps,
        bw_bps,
        min_rtt_us,
        srtt_us,
        None if recovery == "-" else recovery,
        None if trigger == "-" else trigger,
        extra,
    )


# Lines in the canonical field order (what format_line and the shipped patch sets write) take one regex
# match; anything else falls back to the general key=value reader below.
# Same acceptance as fast_record() in _scan.c: single spaces between fields, up to 18 digits per number.
_TOKEN = r"[^ \t\r\v\f]+"
_FAST = re.compile(
    rf"v=1 conn=(?P<conn>{_TOKEN}) t_us=(?P<t_us>-?[0-9]{{1,18}}) cc=(?P<cc>[a-z0-9]+)(?: from=(?P<prev>{_TOKEN}))?"
    rf" to=(?P<state>{_TOKEN})"
    + "".join(rf"(?: {k}=(?P<{k}>[0-9]{{1,18}}))?" for k in METRIC_FIELDS)
    + r"(?: trigger=(?P<trigger>[A-Za-z0-9_.-]+))?[ \t\r\v\f]*",
    re.ASCII,
)


def parse_payload(payload: str) -> ContractRecord:
    """Parse the text after ``QUICSM `` (trailing whitespace allowed). Raises :class:`ContractError`."""
    m = _FAST.fullmatch(payload)
    if m is not None:
        f = m.groupdict()
        conn, cc = f.pop("conn"), f.pop("cc")
        if conn != "-" and f["state"] != "-":
            fields: dict[str, Any] = {k: v if v is None or k in _TEXT else int(v) for k, v in f.items()}
            return ContractRecord(conn, cc, contract_event(**fields))
    return _parse_general(payload)


_TEXT = frozenset(("state", "prev", "trigger"))


def split_fields(payload: str) -> list[str]:
    """The ``key=value`` tokens of a payload, split on :data:`SEPARATORS` only."""
    payload = payload.strip(SEPARATORS)
    return _SPLIT.split(payload) if payload else []


def _parse_general(payload: str) -> ContractRecord:
    tokens = split_fields(payload)
    try:
        fields = dict(t.split("=", 1) for t in tokens)
    except ValueError:
        bad = next(t for t in tokens if "=" not in t)
        raise ContractError(f"field {bad[:40]!r} is not key=value") from None
    if len(fields) != len(tokens):
        seen: set[str] = set()
        dup = next(k for k in (t.split("=", 1)[0] for t in tokens) if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise ContractError(f"field {dup!r} appears twice")
    get = fields.get
    version = get("v")
    if version != FORMAT_VERSION:
        if version is None:
            raise ContractError("no format version (v=)")
        raise ContractError(
            f"format version v={version[:40]!r} is not supported (this quicsm reads v={FORMAT_VERSION})"
        )
    conn = get("conn")
    if not conn or conn == "-":
        raise ContractError("no connection key (conn=)")
    t = get("t_us")
    if t is None or t == "-":
        raise ContractError("no timestamp (t_us=)")
    t_us = _number("t_us", t)
    cc = get("cc")
    if not cc or cc == "-":
        raise ContractError("no congestion controller (cc=)")
    kind = get("ev", "transition")
    if kind not in EVENT_KINDS:
        raise ContractError(f"unknown event kind ev={kind!r}")
    to = get("to")
    if to == "-" or not to:
        if kind == "transition":
            raise ContractError("transition without a state entered (to=)")
        to = None
    ints = {k: None if (v := get(k)) is None or v == "-" else _number(k, v) for k in INT_FIELDS}
    extra = tuple((k, v) for k, v in fields.items() if k not in _KNOWN) if len(fields) > 4 else ()
    event = contract_event(
        t_us=t_us,
        state=to,
        kind=kind,
        prev=get("from"),
        recovery=get("recovery"),
        trigger=get("trigger"),
        extra=extra,
        **ints,
    )
    return ContractRecord(conn, cc if cc.islower() else cc.lower(), event)


def parse_line(line: str) -> ContractRecord | None:
    """Find the contract in a log line (any prefix); ``None`` if the line has no tag."""
    pos = line.find(TAG + " ")
    if pos < 0:
        return None
    return parse_payload(line[pos + len(TAG) + 1 :])
