"""Parquet trace stores quicsm wrote (v1 to v3, :mod:`quicsm.traces.parquet`), read as column batches."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, BinaryIO

from quicsm.traces.readers import ReadContext, ReaderSpec, Source, register

if TYPE_CHECKING:
    from quicsm.traces.columnar import TraceColumns


class StoreReader:
    """One row group at a time; the file's metadata (sidecar, command line) applied to every trace."""

    def __init__(self, ctx: ReadContext) -> None:
        self.ctx = ctx

    def read(self, stream: BinaryIO, src: Source) -> Iterator[TraceColumns]:
        from quicsm.traces.parquet import read_parquet_columns

        report, meta = self.ctx.report, src.meta
        for tc in read_parquet_columns(src.path, metrics=self.ctx.metrics, source=stream):
            tc.shared.templates = [meta.apply(t) for t in tc.shared.templates]
            if meta.cc:
                tc.ccs = [meta.cc] * len(tc)
            report.traces += len(tc)
            report.records += int(tc.offsets[-1])
            yield tc

    def flush(self) -> Iterator[TraceColumns]:
        return iter(())


register(ReaderSpec("parquet", ("traces-parquet",), StoreReader, urls=False))
