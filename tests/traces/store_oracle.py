"""The Parquet store's object writer as it was (frozen): trace objects row by row, empty traces kept as one
placeholder row of kind ``none``. quicsm writes every store from columns now (trace objects through
``parquet.ObjectBatches``); this copy holds that path to the bytes the objects made, and makes the stores
with placeholder rows that older quicsm wrote and the readers still read."""

from __future__ import annotations

import json
from typing import Any

from quicsm.traces import parquet
from quicsm.traces.events import METRIC_FIELDS, Trace, TraceEvent

__all__ = ["object_store"]


def object_store(traces: list[Trace], path: str) -> int:
    """``traces`` written as the object writer wrote them (a row group at the first trace that brings it to
    ``ROWS_PER_GROUP`` rows; since 2026-11-28 one over twice that, holding a longer trace, in groups of
    ``ROWS_PER_GROUP`` rows as pyarrow cuts a table)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = parquet.SCHEMA()
    dictionary = [f.name for f in schema if str(f.type).startswith("dictionary")]
    options = {"use_dictionary": dictionary, "write_statistics": ["t_us"], "compression_level": 1}
    cols: dict[str, list[Any]] = {f.name: [] for f in schema if f.name != "meta"}
    firsts: list[int] = []
    shells: list[Trace] = []

    def flush(writer: Any) -> None:
        if cols["t_us"]:
            arrays = {k: pa.array(v, type=schema.field(k).type) for k, v in cols.items()}
            keys, ccs = [t.key for t in shells], [t.cc for t in shells]
            arrays["meta"] = parquet.meta_column(len(cols["t_us"]), firsts, keys, ccs, shells, list(range(len(shells))))
            table = pa.table(arrays, schema=schema)
            rows = parquet.ROWS_PER_GROUP
            writer.write_table(table, row_group_size=rows if table.num_rows > 2 * rows else max(rows, table.num_rows))
            firsts.clear()
            shells.clear()
            for v in cols.values():
                v.clear()

    with pq.ParquetWriter(path, schema, compression="zstd", **options) as writer:
        for t in traces:
            firsts.append(len(cols["t_us"]))
            shells.append(t)
            for e in t.events or [None]:
                _row(cols, t.id, e)
            if len(cols["t_us"]) >= parquet.ROWS_PER_GROUP:
                flush(writer)
        flush(writer)
    return len(traces)


def _row(cols: dict[str, list[Any]], tid: str, e: TraceEvent | None) -> None:
    cols["trace"].append(tid)
    if e is None:
        for k in cols:
            if k != "trace":
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
