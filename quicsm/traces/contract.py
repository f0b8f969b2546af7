"""The log contract (docs/log-format.md): write one line, read one line.

Reading is on the hot path of the parser: :func:`parse_payload` takes the text after the tag and does
one split per field; everything that is not a plain field lands in ``extra``.
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
]

TAG = "QUICSM"
TAG_BYTES = b"QUICSM "
FORMAT_VERSION = "1"

INT_FIELDS = METRIC_FIELDS
_KNOWN = frozenset(("v", "conn", "t_us", "cc", "ev", "from", "to", "recovery", "trigger", *INT_FIELDS))
_ORDER = ("v", "conn", "t_us", "cc", "ev", "from", "to", *INT_FIELDS, "recovery", "cycle", "trigger")


class ContractError(ValueError):
    """A line that carries the tag but breaks the contract; the message is the reason."""


class ContractRecord(NamedTuple):
    """One contract line: the connection it belongs to and the event it carries."""

    conn: str
    cc: str
    event: TraceEvent

    @property
    def starts_connection(self) -> bool:
        """``from=Init`` / ``to=Init``: the emitter just created a sender (a reused key starts anew)."""
        ev = self.event
        return ev.kind == "transition" and (ev.prev == "Init" or ev.state == "Init")


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
        text = str(v).replace(" ", "_")
        if not text:
            text = "-"
        parts.append(f"{k}={text}")
    return f"{TAG} " + " ".join(parts)


def _int(key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        if key == "ssthresh" and value == "inf":
            return SSTHRESH_INF
        try:
            f = float(value)
        except ValueError:
            raise ContractError(f"{key}={value!r} is not a number") from None
        if f != f or f in (float("inf"), float("-inf")):
            raise ContractError(f"{key}={value!r} is not a finite number") from None
        return int(f)


# Lines in the canonical field order (what format_line and the shipped patch sets write) take one regex
# match; anything else falls back to the general key=value reader below.
_FAST = re.compile(
    r"v=1 conn=(\S+) t_us=(-?\d+) cc=([a-z0-9]+)(?: from=(\S+))? to=(\S+)"
    r"(?: cwnd=(\d+))?(?: inflight=(\d+))?(?: ssthresh=(\d+))?(?: pacing_bps=(\d+))?(?: bw_bps=(\d+))?"
    r"(?: min_rtt_us=(\d+))?(?: srtt_us=(\d+))?(?: trigger=([\w.-]+))?\s*$"
)


def parse_payload(payload: str) -> ContractRecord:
    """Parse the text after ``QUICSM `` (trailing whitespace allowed). Raises :class:`ContractError`."""
    m = _FAST.match(payload)
    if m is not None:
        conn, t, cc, frm, to, *nums, trigger = m.groups()
        if frm == "-":
            frm = None
        return ContractRecord(
            conn,
            cc,
            TraceEvent(
                int(t),
                canonical_state(to),
                "transition",
                canonical_state(frm) if frm else None,
                *[None if v is None else int(v) for v in nums],
                None,
                None if trigger == "-" else trigger,
            ),
        )
    return _parse_general(payload)


def _parse_general(payload: str) -> ContractRecord:
    tokens = payload.split()
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
        raise ContractError(f"format version v={version} is not supported (this quicsm reads v={FORMAT_VERSION})")
    conn = get("conn")
    if not conn or conn == "-":
        raise ContractError("no connection key (conn=)")
    t = get("t_us")
    if t is None or t == "-":
        raise ContractError("no timestamp (t_us=)")
    try:
        t_us = int(t)
    except ValueError:
        raise ContractError(f"t_us={t!r} is not an integer") from None
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
    frm = get("from")
    if frm == "-":
        frm = None
    ints = [None if (v := get(k)) is None or v == "-" else _int(k, v) for k in INT_FIELDS]
    extra = tuple((k, v) for k, v in fields.items() if k not in _KNOWN) if len(fields) > 4 else ()
    recovery = get("recovery")
    trigger = get("trigger")
    event = TraceEvent(
        t_us,
        canonical_state(to) if to else "",
        kind,
        canonical_state(frm) if frm else None,
        *ints,  # type: ignore[arg-type]
        None if recovery == "-" else recovery,
        None if trigger == "-" else trigger,
        extra,
    )
    return ContractRecord(conn, cc if cc.islower() else cc.lower(), event)


def parse_line(line: str) -> ContractRecord | None:
    """Find the contract in a log line (any prefix); ``None`` if the line has no tag."""
    pos = line.find(TAG + " ")
    if pos < 0:
        return None
    return parse_payload(line[pos + len(TAG) + 1 :])
