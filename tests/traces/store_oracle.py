"""The Parquet store's object writer as it was (frozen): trace objects row by row, empty traces kept as one
placeholder row of kind ``none``. quicsm writes every store from columns now (trace objects through
``parquet.ObjectBatches``); this copy holds that path to the bytes the objects made, and makes the stores
with placeholder rows that older quicsm wrote and the readers still read: v3 (the metadata in the Arrow schema's
metadata, :func:`v3_footer`), or v2 (in a ``meta`` struct column on each trace's
first row, :func:`v2_meta_column`, written as quicsm wrote it before v3)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pyarrow as pa

from quicsm.traces import parquet
from quicsm.traces.events import METRIC_FIELDS, Trace, TraceEvent

__all__ = ["object_store", "v2_schema", "v3_footer"]


def object_store(traces: list[Trace], path: str, version: int = 3) -> int:
    """``traces`` written as the object writer wrote them (a row group at the first trace that brings it to
    ``ROWS_PER_GROUP`` rows; since 2026-11-28 one over twice that, holding a longer trace, in groups of
    ``ROWS_PER_GROUP`` rows as pyarrow cuts a table), as a v3 or a v2 store."""
    import pyarrow.parquet as pq

    schema = parquet.SCHEMA() if version == 3 else v2_schema()
    if version == 3:  # the metadata known up front: in the schema the writer opens with
        schema = schema.with_metadata({**schema.metadata, parquet.TRACES_KEY: v3_footer(traces)})
    dictionary = [f.name for f in schema if str(f.type).startswith("dictionary")]
    options = {"use_dictionary": dictionary, "write_statistics": ["t_us"], "compression_level": 1}
    cols: dict[str, list[Any]] = {f.name: [] for f in schema if f.name != "meta"}
    firsts: list[int] = []
    shells: list[Trace] = []

    def flush(writer: Any) -> None:
        if cols["t_us"]:
            arrays = {k: pa.array(v, type=schema.field(k).type) for k, v in cols.items()}
            if version == 2:
                arrays["meta"] = v2_meta_column(len(cols["t_us"]), firsts, shells)
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


def v3_footer(traces: list[Trace]) -> bytes:
    """The v3 ``quicsm-traces`` value for ``traces``: their metadata as :class:`parquet.StoreTraces`, each distinct
    template once in order of first use, zstd-compressed and base64 behind the JSON's length."""
    import base64

    templates: dict[tuple[Any, ...], int] = {}
    shared = [
        templates.setdefault((t.implementation, t.version, t.sources, tuple(t.labels.items())), len(templates))
        for t in traces
    ]
    doc = parquet.StoreTraces(
        format="quicsm-trace-store",
        v=3,
        ids=[t.id for t in traces],
        keys=[t.key for t in traces],
        ccs=[t.cc for t in traces],
        shared=shared,
        templates=[
            parquet.StoreTemplate(implementation=i, version=v, sources=list(s), labels=dict(lab))
            for i, v, s, lab in templates
        ],
    )
    text = msgspec.json.encode(doc)
    return b"%d:%s" % (len(text), base64.b64encode(pa.Codec("zstd", 1).compress(text, asbytes=True)))


def v2_schema() -> Any:
    """The v2 store's schema: v3's with the ``meta`` struct after ``trace``."""
    schema = parquet.SCHEMA()
    text = pa.dictionary(pa.int32(), pa.string())
    meta = pa.struct(
        [
            ("key", text),
            ("cc", text),
            ("implementation", text),
            ("version", text),
            ("sources", pa.list_(pa.string())),
            ("labels", pa.map_(pa.string(), pa.string())),
        ]
    )
    return schema.insert(1, pa.field("meta", meta)).with_metadata({b"quicsm": b"quicsm-trace v2"})


def v2_meta_column(rows: int, firsts: list[int], traces: list[Trace]) -> Any:
    """The v2 ``meta`` column: trace i's metadata on its first row (``firsts[i]``), null on the others."""
    at = dict(zip(firsts, traces))
    values = [
        None
        if (t := at.get(r)) is None
        else {
            "key": t.key,
            "cc": t.cc,
            "implementation": t.implementation,
            "version": t.version,
            "sources": list(t.sources),
            "labels": list(t.labels.items()),
        }
        for r in range(rows)
    ]
    return pa.array(values, v2_schema().field("meta").type)


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
