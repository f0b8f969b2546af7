"""Normalized traces on disk: JSON Lines (one connection per line) and Parquet (one event per row).

Both read back losslessly (same dataclasses, same field values). Writes are atomic: a temp file next to
the target, renamed into place only when complete. Both writers stream, so a parse of any size never
holds more than the connections open at a time.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Iterator
from typing import IO, Annotated, Any, BinaryIO, Final, Literal

import msgspec

from quicsm.errors import reading
from quicsm.files import atomic_output, open_binary
from quicsm.formats import checked
from quicsm.traces.events import Trace, TraceEvent

__all__ = [
    "TRACE_FORMAT",
    "TRACE_FORMAT_VERSION",
    "write_traces",
    "read_traces",
    "iter_trace_file",
    "EventLine",
    "TraceLine",
    "trace_to_json",
    "trace_from_json",
]

TRACE_FORMAT = "quicsm-trace"
TRACE_FORMAT_VERSION = 1
_TRANSITION: Final = "transition"
"""EventLine's default kind: its writer passes this very object (msgspec omits defaults by identity)."""
Int64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]
Count = Annotated[int, msgspec.Meta(ge=0, le=(1 << 63) - 1)]


class EventLine(msgspec.Struct, omit_defaults=True, gc=False):  # gc: no cycles; a reader holds 10^5 of them
    """One event of a trace line (:class:`~quicsm.traces.events.TraceEvent`, same fields in the same
    order); absent fields are unknown, and the writer leaves out what is unknown."""

    t_us: Int64
    state: str
    kind: Literal["transition", "update", "metrics", "close"] = _TRANSITION
    prev: str | None = None
    cwnd: Count | None = None
    inflight: Count | None = None
    ssthresh: Count | None = None
    pacing_bps: Count | None = None
    bw_bps: Count | None = None
    min_rtt_us: Count | None = None
    srtt_us: Count | None = None
    recovery: str | None = None
    trigger: str | None = None
    extra: tuple[tuple[str, str], ...] = ()
    """Other contract fields of the line, as ``[key, value]`` pairs."""

    def event(self) -> TraceEvent:
        return TraceEvent(
            *(self.t_us, self.state, self.kind, self.prev, self.cwnd, self.inflight, self.ssthresh),
            *(self.pacing_bps, self.bw_bps, self.min_rtt_us, self.srtt_us, self.recovery, self.trigger),
            self.extra,
        )


class TraceLine(msgspec.Struct, kw_only=True):
    """One line of a trace file (JSON Lines): a connection's metadata and its events, in written order."""

    format: Literal["quicsm-trace"]
    v: Literal[1]
    """Format version (:data:`TRACE_FORMAT_VERSION`)."""
    id: str
    key: str | None = ""
    cc: str
    implementation: str | None = None
    version: str | None = None
    sources: list[str] = []
    """Input files the trace came from."""
    labels: dict[str, str] | None = None
    events: list[EventLine]

    def trace(self) -> Trace:
        return Trace(
            self.id,
            self.cc,
            [e.event() for e in self.events],
            self.key or "",
            self.implementation,
            self.version,
            tuple(self.sources),
            dict(self.labels or {}),
        )


def trace_to_json(t: Trace) -> dict[str, Any]:
    """A trace as its line's JSON object (dumped with :mod:`json`, which escapes non-ASCII text)."""
    events = [
        EventLine(e.t_us, e.state, _TRANSITION if e.kind == _TRANSITION else e.kind, *e[3:-1], e.extra)  # type: ignore[arg-type]
        for e in t.events
    ]
    line = TraceLine(format=TRACE_FORMAT, v=TRACE_FORMAT_VERSION, events=events, **t.metadata())  # type: ignore[arg-type]
    return msgspec.to_builtins(line)


def trace_from_json(d: Any, source: str = "<trace>") -> Trace:
    """One line of a trace file, decoded or not; InputError naming ``source`` and the field on a wrong shape."""
    return checked(d, TraceLine, source).trace()


def _is_parquet(path: str) -> bool:
    return path.lower().endswith(".parquet")


def write_traces(traces: Iterable[Trace], path: str) -> int:
    """Write traces to ``.jsonl``, ``.jsonl.gz``, ``.parquet`` or ``-`` (JSON Lines on stdout). Returns the count."""
    if _is_parquet(path):
        from quicsm.traces.parquet import object_batches, write_parquet

        return write_parquet(object_batches(traces), path)
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
        for n, raw in numbered_lines(fh, path):
            if raw.strip():
                yield trace_from_json(raw, f"{path}:{n}: bad trace record")


def numbered_lines(stream: BinaryIO, path: str, block: int = 1 << 20) -> Iterator[tuple[int, bytes]]:
    """The stream's lines with their numbers, read in blocks (a read error names the line it stopped at)."""
    n, parts = 0, []
    while True:
        with reading(f"{path}:{n + 1}"):
            data = stream.read(block)
        if not data:
            break
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            parts.append(data[start:end])
            n += 1
            yield n, b"".join(parts)
            parts, start = [], end + 1
        parts.append(data[start:])
    if any(parts):
        yield n + 1, b"".join(parts)


def read_traces(path: str) -> list[Trace]:
    return list(iter_trace_file(path))
