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


def _whole() -> int:
    from quicsm.traces.qlog_columns import whole_below

    return whole_below()


register(ReaderSpec("qlog", ("qlog", "sqlog", "ndjson"), QlogReader, whole=_whole))
"""A qlog under 1 MiB is read whole either way (:func:`~quicsm.traces.qlog_columns.whole_below`): handed over
whole, it costs no seek back, buffered file, size check or second read of its head (2,000 quic-go qlogs of
0.11 MB: ~7 % of ``infer``'s samples went there)."""
