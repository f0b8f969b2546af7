"""The log contract (docs/log-format.md): write one line, read one line.

Reading is on the hot path of the parser: :func:`parse_payload` takes the text after the tag and does
one split per field; everything that is not a plain field lands in ``extra``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from quicsm.traces.events import EVENT_KINDS, SSTHRESH_INF, TraceEvent
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

INT_FIELDS = ("cwnd", "inflight", "ssthresh", "pacing_bps", "bw_bps", "min_rtt_us", "srtt_us")
_KNOWN = frozenset(("v", "conn", "t_us", "cc", "ev", "from", "to", "recovery", "trigger", *INT_FIELDS))
_ORDER = ("v", "conn", "t_us", "cc", "ev", "from", "to", *INT_FIELDS, "recovery", "cycle", "trigger")


class ContractError(ValueError):
    """A line that carries the tag but breaks the contract; the message is the reason."""


@dataclass(frozen=True, slots=True)
class ContractRecord:
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
    *, conn: str, t_us: int, cc: str, to: str | None = None, frm: str | None = None, ev: str | None = None, **fields: Any
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
    if key == "ssthresh" and value == "inf":
        return SSTHRESH_INF
    try:
        return int(value)
    except ValueError:
        try:
            f = float(value)
        except ValueError:
            raise ContractError(f"{key}={value!r} is not a number") from None
        if f != f or f in (float("inf"), float("-inf")):
            raise ContractError(f"{key}={value!r} is not a finite number")
        return int(f)


def parse_payload(payload: str) -> ContractRecord:
    """Parse the text after ``QUICSM `` (trailing whitespace allowed). Raises :class:`ContractError`."""
    fields: dict[str, str] = {}
    for token in payload.split():
        key, eq, value = token.partition("=")
        if not eq or not key:
            raise ContractError(f"field {token[:40]!r} is not key=value")
        if key in fields:
            raise ContractError(f"field {key!r} appears twice")
        fields[key] = value
    version = fields.get("v")
    if version is None:
        raise ContractError("no format version (v=)")
    if version != FORMAT_VERSION:
        raise ContractError(f"format version v={version} is not supported (this quicsm reads v={FORMAT_VERSION})")
    conn = fields.get("conn")
    if not conn or conn == "-":
        raise ContractError("no connection key (conn=)")
    t = fields.get("t_us")
    if t is None or t == "-":
        raise ContractError("no timestamp (t_us=)")
    try:
        t_us = int(t)
    except ValueError:
        raise ContractError(f"t_us={t!r} is not an integer") from None
    cc = fields.get("cc")
    if not cc or cc == "-":
        raise ContractError("no congestion controller (cc=)")
    kind = fields.get("ev", "transition")
    if kind not in EVENT_KINDS:
        raise ContractError(f"unknown event kind ev={kind!r}")
    to = fields.get("to")
    if to == "-":
        to = None
    if kind == "transition" and not to:
        raise ContractError("transition without a state entered (to=)")
    frm = fields.get("from")
    if frm == "-":
        frm = None
    ints: dict[str, int | None] = {}
    for k in INT_FIELDS:
        v = fields.get(k)
        ints[k] = None if v is None or v == "-" else _int(k, v)
    extra = tuple((k, v) for k, v in fields.items() if k not in _KNOWN)
    recovery = fields.get("recovery")
    trigger = fields.get("trigger")
    event = TraceEvent(
        t_us=t_us,
        state=canonical_state(to) if to else "",
        kind=kind,
        prev=canonical_state(frm) if frm else None,
        recovery=None if recovery in (None, "-") else recovery,
        trigger=None if trigger in (None, "-") else trigger,
        extra=extra,
        **ints,  # type: ignore[arg-type]
    )
    return ContractRecord(conn, cc.lower(), event)


def parse_line(line: str) -> ContractRecord | None:
    """Find the contract in a log line (any prefix); ``None`` if the line has no tag."""
    pos = line.find(TAG + " ")
    if pos < 0:
        return None
    return parse_payload(line[pos + len(TAG) + 1 :])
