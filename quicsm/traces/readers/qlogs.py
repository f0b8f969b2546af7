"""qlogs: JSON documents, JSON-SEQ and NDJSON, plain or gzip, of any size (:mod:`quicsm.traces.qlog_columns`)."""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import TYPE_CHECKING, BinaryIO

from quicsm.traces.readers import ReadContext, ReaderSpec, Source, register

if TYPE_CHECKING:
    from quicsm.traces.columnar import TraceColumns


class QlogReader:
    """Small qlogs read whole are gathered into one batch; streams are read in windows."""

    def __init__(self, ctx: ReadContext) -> None:
        from quicsm.traces.qlog_columns import QlogBatcher

        self.batcher = QlogBatcher(ctx.report, ctx.on_bytes, metrics=ctx.metrics, ahead=ctx.ahead)

    def read(self, stream: BinaryIO, src: Source) -> Iterable[TraceColumns]:
        if type(stream) is io.BytesIO:
            return self.batcher.add(stream.getvalue(), src.path, src.meta, src.kind)
        return self.batcher.read(stream, src.path, src.meta, src.kind)

    def flush(self) -> Iterable[TraceColumns]:
        return self.batcher.flush()


register(ReaderSpec("qlog", ("qlog", "sqlog", "ndjson"), QlogReader))
