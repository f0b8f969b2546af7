"""Normalized traces on disk: JSON Lines (one connection per line) and Parquet (one event per row).

Both read back losslessly (same dataclasses, same field values). Writes are atomic: a temp file next to
the target, renamed into place only when complete. Both writers stream, so a parse of any size never
holds more than the connections open at a time.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterable, Iterator
from typing import IO, Any

from quicsm.errors import InputError
from quicsm.files import atomic_output, open_binary
from quicsm.traces.events import EVENT_KINDS, METRIC_FIELDS, Trace, TraceEvent

__all__ = [
    "TRACE_FORMAT",
    "TRACE_FORMAT_VERSION",
    "write_traces",
    "read_traces",
    "iter_trace_file",
    "event_to_json",
    "event_from_json",
    "trace_to_json",
    "trace_from_json",
]

TRACE_FORMAT = "quicsm-trace"
TRACE_FORMAT_VERSION = 1
_EVENT_OPTIONAL = ("prev", *METRIC_FIELDS, "recovery", "trigger")


def event_to_json(e: TraceEvent) -> dict[str, Any]:
    d: dict[str, Any] = {"t_us": e.t_us, "state": e.state}
    if e.kind != "transition":
        d["kind"] = e.kind
    for k in _EVENT_OPTIONAL:
        v = getattr(e, k)
        if v is not None:
            d[k] = v
    if e.extra:
        d["extra"] = [list(p) for p in e.extra]
    return d


_INT_MIN, _INT_MAX = -(1 << 63), (1 << 63) - 1


def _int(d: dict[str, Any], key: str, low: int) -> int | None:
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= _INT_MAX:
        raise ValueError(f"{key} must be an integer from {low} to 2^63-1, not {v!r:.40}")
    return v


def _text(d: dict[str, Any], key: str, *, required: bool = False) -> str | None:
    v = d.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, str):
        raise ValueError(f"{key} must be a string, not {type(v).__name__}")
    return v


def event_from_json(d: dict[str, Any]) -> TraceEvent:
    """One event of a trace file; ValueError (saying which field) on a wrong type or range."""
    if not isinstance(d, dict):
        raise ValueError(f"an event must be an object, not {type(d).__name__}")
    kind = d.get("kind", "transition")
    if kind not in EVENT_KINDS:
        raise ValueError(f"unknown event kind {str(kind)[:40]!r}")
    extra = d.get("extra", ())
    if not isinstance(extra, (list, tuple)) or not all(
        isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in extra
    ):
        raise ValueError("extra must be a list of [key, value] strings")
    t_us = _int(d, "t_us", _INT_MIN)
    if t_us is None:
        raise ValueError("event without t_us")
    return TraceEvent(
        t_us=t_us,
        state=_text(d, "state", required=True) or "",
        kind=kind,
        prev=_text(d, "prev"),
        recovery=_text(d, "recovery"),
        trigger=_text(d, "trigger"),
        extra=tuple((k, v) for k, v in extra),
        **{k: _int(d, k, 0) for k in METRIC_FIELDS},
    )


def trace_to_json(t: Trace) -> dict[str, Any]:
    return {
        "format": TRACE_FORMAT,
        "v": TRACE_FORMAT_VERSION,
        **t.metadata(),
        "events": [event_to_json(e) for e in t.events],
    }


def trace_from_json(d: dict[str, Any]) -> Trace:
    """One line of a trace file; ValueError (saying which field) on a wrong shape."""
    events = d.get("events")
    if not isinstance(events, list):
        raise ValueError("events must be a list")
    sources = d.get("sources", ())
    if not isinstance(sources, list | tuple) or not all(isinstance(x, str) for x in sources):
        raise ValueError("sources must be a list of strings")
    labels = d.get("labels") or {}
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise ValueError("labels must map names to strings")
    return Trace(
        id=_text(d, "id", required=True) or "",
        cc=_text(d, "cc", required=True) or "",
        events=[event_from_json(e) for e in events],
        key=_text(d, "key") or "",
        implementation=_text(d, "implementation"),
        version=_text(d, "version"),
        sources=tuple(sources),
        labels=dict(labels),
    )


def _is_parquet(path: str) -> bool:
    return path.lower().endswith(".parquet")


def write_traces(traces: Iterable[Trace], path: str) -> int:
    """Write traces to ``.jsonl``, ``.jsonl.gz``, ``.parquet`` or ``-`` (JSON Lines on stdout). Returns the count."""
    if _is_parquet(path):
        from quicsm.traces.parquet import write_parquet

        return write_parquet(traces, path)
    n = 0
    with atomic_output(path) as raw:
        fh: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) if path.endswith(".gz") else raw  # type: ignore[assignment]
        for t in traces:
            fh.write(json.dumps(trace_to_json(t), separators=(",", ":")).encode())
            fh.write(b"\n")
            n += 1
        if fh is not raw:
            fh.close()
        raw.flush()
    return n


def iter_trace_file(path: str) -> Iterator[Trace]:
    """Stream traces back from a file :func:`write_traces` wrote; InputError naming the line otherwise."""
    if _is_parquet(path):
        from quicsm.traces.parquet import read_parquet

        yield from read_parquet(path)
        return
    with open_binary(path) as fh:
        n = 0
        while True:
            n += 1
            try:
                raw = fh.readline()
            except (OSError, EOFError, zlib.error) as exc:
                raise InputError(f"{path}:{n}: truncated or corrupt file ({exc})") from None
            if not raw:
                return
            if not raw.strip():
                continue
            try:
                d = json.loads(raw.decode("utf-8"))
                if not isinstance(d, dict) or d.get("format") != TRACE_FORMAT:
                    raise ValueError(f"not a {TRACE_FORMAT} record")
                if d.get("v") != TRACE_FORMAT_VERSION:
                    raise ValueError(f"trace format v={d.get('v')!r:.20} is not supported")
                trace = trace_from_json(d)
            except RecursionError:
                raise InputError(f"{path}:{n}: bad trace record (JSON nested too deeply)") from None
            except ValueError as exc:  # also JSONDecodeError, UnicodeDecodeError, 4301-digit integers
                raise InputError(f"{path}:{n}: bad trace record ({str(exc)[:200]})") from None
            yield trace


def read_traces(path: str) -> list[Trace]:
    return list(iter_trace_file(path))
