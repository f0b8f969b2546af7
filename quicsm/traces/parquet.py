"""Parquet storage of traces: one row per event, trace metadata dictionary-encoded per row group.

Rows are written in row groups as traces arrive (streaming); a trace's rows are contiguous, so reading
back regroups them in order without a sort.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from quicsm.errors import InputError
from quicsm.traces.events import METRIC_FIELDS, Trace, TraceEvent
from quicsm.traces.store import atomic_output

__all__ = ["write_parquet", "read_parquet", "SCHEMA"]

_ROWS_PER_GROUP = 200_000


def _schema() -> Any:
    import pyarrow as pa

    fields = [
        pa.field("trace", pa.dictionary(pa.int32(), pa.string())),
        pa.field("trace_meta", pa.dictionary(pa.int32(), pa.string())),
        pa.field("t_us", pa.int64()),
        pa.field("state", pa.dictionary(pa.int32(), pa.string())),
        pa.field("kind", pa.dictionary(pa.int8(), pa.string())),
        pa.field("prev", pa.dictionary(pa.int32(), pa.string())),
        *(pa.field(k, pa.int64()) for k in METRIC_FIELDS),
        pa.field("recovery", pa.dictionary(pa.int8(), pa.string())),
        pa.field("trigger", pa.dictionary(pa.int32(), pa.string())),
        pa.field("extra", pa.string()),
    ]
    return pa.schema(fields, metadata={b"quicsm": b"quicsm-trace v1"})


SCHEMA = _schema


def write_parquet(traces: Iterable[Trace], path: str) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _schema()
    cols: dict[str, list[Any]] = {f.name: [] for f in schema}
    n = 0

    def flush(writer: Any) -> None:
        if cols["t_us"]:
            writer.write_table(
                pa.table({k: pa.array(v, type=schema.field(k).type) for k, v in cols.items()}, schema=schema)
            )
            for v in cols.values():
                v.clear()

    with atomic_output(path) as fh, pq.ParquetWriter(fh, schema, compression="zstd") as writer:
        for t in traces:
            n += 1
            meta = json.dumps(t.metadata(), sort_keys=True, separators=(",", ":"))
            if not t.events:  # keep empty traces: one placeholder row of kind "none"
                _row(cols, t.id, meta, None)
            for e in t.events:
                _row(cols, t.id, meta, e)
            if len(cols["t_us"]) >= _ROWS_PER_GROUP:
                flush(writer)
        flush(writer)
    return n


def _row(cols: dict[str, list[Any]], tid: str, meta: str, e: TraceEvent | None) -> None:
    cols["trace"].append(tid)
    cols["trace_meta"].append(meta)
    if e is None:
        for k in cols:
            if k not in ("trace", "trace_meta"):
                cols[k].append(None)
        cols["kind"][-1] = "none"
        cols["t_us"][-1] = 0
        return
    cols["t_us"].append(e.t_us)
    cols["state"].append(e.state)
    cols["kind"].append(e.kind)
    cols["prev"].append(e.prev)
    for k in METRIC_FIELDS:
        cols[k].append(getattr(e, k))
    cols["recovery"].append(e.recovery)
    cols["trigger"].append(e.trigger)
    cols["extra"].append(json.dumps([list(p) for p in e.extra], separators=(",", ":")) if e.extra else None)


def read_parquet(path: str) -> Iterator[Trace]:
    """Traces back from :func:`write_parquet`'s file; InputError (one line) for a damaged or foreign file."""
    try:
        yield from _read_parquet(path)
    except InputError:
        raise
    except Exception as exc:  # pyarrow's errors, and wrong shapes/types in rows or trace_meta
        raise InputError(f"{path}: bad Parquet trace file ({type(exc).__name__}: {str(exc)[:200]})") from None


def _read_parquet(path: str) -> Iterator[Trace]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise InputError(f"{path}: not a readable Parquet file ({exc})") from None
    if b"quicsm" not in (pf.schema_arrow.metadata or {}):
        raise InputError(f"{path}: Parquet file was not written by quicsm (no quicsm schema metadata)")
    cur: Trace | None = None
    for g in range(pf.num_row_groups):
        rows = pf.read_row_group(g).to_pydict()
        for i in range(len(rows["t_us"])):
            tid = rows["trace"][i]
            if cur is None or cur.id != tid:
                if cur is not None:
                    yield cur
                m = json.loads(rows["trace_meta"][i])
                cur = Trace(
                    id=m["id"],
                    cc=m["cc"],
                    events=[],
                    key=m.get("key", ""),
                    implementation=m.get("implementation"),
                    version=m.get("version"),
                    sources=tuple(m.get("sources", ())),
                    labels=dict(m.get("labels") or {}),
                )
            if rows["kind"][i] == "none":
                continue
            extra = rows["extra"][i]
            cur.events.append(
                TraceEvent(
                    t_us=rows["t_us"][i],
                    state=rows["state"][i],
                    kind=rows["kind"][i],
                    prev=rows["prev"][i],
                    recovery=rows["recovery"][i],
                    trigger=rows["trigger"][i],
                    extra=tuple((k, v) for k, v in json.loads(extra)) if extra else (),
                    **{k: rows[k][i] for k in METRIC_FIELDS},
                )
            )
    if cur is not None:
        yield cur
