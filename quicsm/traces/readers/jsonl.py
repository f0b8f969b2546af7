"""Trace files quicsm wrote as JSON Lines (``.jsonl``, ``.jsonl.gz``): one connection a line
(:class:`quicsm.traces.store.TraceLine`), read into column batches."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, BinaryIO

from quicsm.traces.readers import ReadContext, ReaderSpec, Source, register

if TYPE_CHECKING:
    from quicsm.traces.columnar import TraceColumns


class JsonlReader:
    """Consecutive trace files gathered into batches (:class:`quicsm.traces.parquet.ObjectBatches`)."""

    def __init__(self, ctx: ReadContext) -> None:
        from quicsm.traces.parquet import ObjectBatches

        self.report = ctx.report
        self.batches = ObjectBatches()

    def read(self, stream: BinaryIO, src: Source) -> Iterator[TraceColumns]:
        from quicsm.formats import checked
        from quicsm.traces.store import TraceLine, numbered_lines

        for n, raw in numbered_lines(stream, src.path):
            if not raw.strip():
                continue
            line = checked(raw, TraceLine, f"{src.path}:{n}: bad trace record")
            self.report.traces += 1
            self.report.records += len(line.events)
            if (tc := self.batches.add(line, src.meta)) is not None:
                yield tc

    def flush(self) -> Iterator[TraceColumns]:
        if (tc := self.batches.flush()) is not None:
            yield tc


register(ReaderSpec("jsonl", ("traces-jsonl",), JsonlReader, urls=False))
