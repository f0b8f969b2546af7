"""Normalized traces on disk: JSON Lines (one connection per line) and Parquet (one event per row).

Both read back losslessly (same dataclasses, same field values). Writes are atomic: a temp file next to
the target, renamed into place only when complete. Both writers stream, so a parse of any size never
holds more than the connections open at a time.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterable, Iterator
from typing import IO, Any

from quicsm.errors import InputError
from quicsm.files import atomic_output, file_mode, open_binary
from quicsm.traces.events import METRIC_FIELDS, Trace, TraceEvent

__all__ = [
    "TRACE_FORMAT",
    "TRACE_FORMAT_VERSION",
    "write_traces",
    "read_traces",
    "iter_trace_file",
    "atomic_output",
    "file_mode",
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


def event_from_json(d: dict[str, Any]) -> TraceEvent:
    extra = tuple((str(k), str(v)) for k, v in d.get("extra", ()))
    opt = {k: d[k] for k in _EVENT_OPTIONAL if k in d}
    return TraceEvent(t_us=int(d["t_us"]), state=str(d["state"]), kind=d.get("kind", "transition"), extra=extra, **opt)


def trace_to_json(t: Trace) -> dict[str, Any]:
    return {
        "format": TRACE_FORMAT,
        "v": TRACE_FORMAT_VERSION,
        **t.metadata(),
        "events": [event_to_json(e) for e in t.events],
    }


def trace_from_json(d: dict[str, Any]) -> Trace:
    return Trace(
        id=str(d["id"]),
        cc=str(d["cc"]),
        events=[event_from_json(e) for e in d["events"]],
        key=str(d.get("key", "")),
        implementation=d.get("implementation"),
        version=d.get("version"),
        sources=tuple(d.get("sources", ())),
        labels={str(k): str(v) for k, v in (d.get("labels") or {}).items()},
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
        fh: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) if path.endswith(".gz") else raw
        for t in traces:
            fh.write(json.dumps(trace_to_json(t), separators=(",", ":")).encode())
            fh.write(b"\n")
            n += 1
        if fh is not raw:
            fh.close()
        raw.flush()
    return n


def iter_trace_file(path: str) -> Iterator[Trace]:
    """Stream traces back from a file :func:`write_traces` wrote."""
    if _is_parquet(path):
        from quicsm.traces.parquet import read_parquet

        yield from read_parquet(path)
        return
    with open_binary(path) as fh:
        for n, line in enumerate(io.TextIOWrapper(fh, encoding="utf-8"), 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                if d.get("format") != TRACE_FORMAT:
                    raise ValueError(f"not a {TRACE_FORMAT} record")
                if d.get("v") != TRACE_FORMAT_VERSION:
                    raise ValueError(f"trace format v={d.get('v')} is not supported")
                yield trace_from_json(d)
            except (ValueError, KeyError, TypeError) as exc:
                raise InputError(f"{path}:{n}: bad trace record ({exc})") from None


def read_traces(path: str) -> list[Trace]:
    return list(iter_trace_file(path))
