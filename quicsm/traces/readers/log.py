"""Text logs with log contract lines (any prefix, plain or gzip): cut into traces on columns (:mod:`quicsm.traces.columnar`)."""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import TYPE_CHECKING, BinaryIO

from quicsm.traces.readers import ReadContext, ReaderSpec, Source, register

if TYPE_CHECKING:
    from quicsm.traces.columnar import TraceColumns


class LogReader:
    """Small logs read whole are joined and scanned in one call; larger ones are streamed in windows."""

    def __init__(self, ctx: ReadContext) -> None:
        from quicsm.traces.columnar import ColumnReader

        self.columns = ColumnReader(ctx.report, ctx.on_bytes)

    def read(self, stream: BinaryIO, src: Source) -> Iterable[TraceColumns]:
        if type(stream) is io.BytesIO:
            return self.columns.add(stream.getvalue(), src.path, src.scope, src.meta)
        return self.columns.read(stream, src.path, src.scope, src.meta)

    def flush(self) -> Iterable[TraceColumns]:
        return self.columns.flush()


register(ReaderSpec("log", ("log",), LogReader))
