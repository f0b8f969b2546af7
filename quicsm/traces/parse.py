"""From input files to traces: logs (any prefix, gzip), qlogs, or trace files written earlier.

Each input may have a sidecar ``meta.json`` in its directory (the testbed writes one per run) with
``implementation``, ``version``, ``cc`` and ``labels``; command-line labels win over it.
"""

from __future__ import annotations

import gzip
import os
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, BinaryIO

from quicsm.errors import InputError, NoTransitionsError, QuicsmError
from quicsm.files import STDIN, GzipReader, open_binary
from quicsm.traces.builder import TraceBuilder, TraceMeta
from quicsm.traces.events import Trace
from quicsm.traces.inputs import Sidecars, expand_inputs, open_input, trace_scopes
from quicsm.traces.logscan import scan_contract
from quicsm.traces.qlog import read_ndjson, read_qlog, read_sqlog
from quicsm.traces.report import ParseReport
from quicsm.traces.store import iter_trace_file

if TYPE_CHECKING:
    from quicsm.traces.columnar import TraceColumns

__all__ = [
    "ParseResult",
    "iter_traces",
    "iter_trace_batches",
    "parse_inputs",
    "merge_meta",
    "parse_label",
    "READER_ERRORS",
]

READER_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    AttributeError,
    RecursionError,
    OverflowError,
    EOFError,
    OSError,
    zlib.error,
)
"""What a reader bug on bad input raises. :func:`iter_traces` turns these into a one-line InputError marked
``unexpected`` (the fuzz harness counts those as crashes: the reader should have said why itself)."""


@dataclass(slots=True)
class ParseResult:
    traces: list[Trace]
    report: ParseReport = field(default_factory=ParseReport)


def parse_label(text: str) -> tuple[str, str]:
    """``client=mobile`` -> ``("client", "mobile")``; InputError otherwise."""
    key, eq, value = text.partition("=")
    if not eq or not key.strip():
        raise InputError(f"label {text!r} is not KEY=VALUE")
    return key.strip(), value.strip()


def merge_meta(
    base: TraceMeta, *, labels: dict[str, str], implementation: str | None, version: str | None, cc: str | None
) -> TraceMeta:
    return TraceMeta(
        implementation=implementation or base.implementation,
        version=version or base.version,
        labels={**base.labels, **labels},
        cc=cc or base.cc,
    )


def iter_traces(
    paths: Sequence[str],
    *,
    labels: dict[str, str] | None = None,
    implementation: str | None = None,
    version: str | None = None,
    cc: str | None = None,
    report: ParseReport | None = None,
    on_bytes: Callable[[int], None] | None = None,
) -> Iterator[Trace]:
    """Stream traces from inputs; memory follows the connections open at once, not the input size."""
    for item in _iter_inputs(paths, labels, implementation, version, cc, report, on_bytes, columns=False):
        assert isinstance(item, Trace)
        yield item


def iter_trace_batches(
    paths: Sequence[str], *, stores: bool = False, metrics: bool = True, **kw: Any
) -> Iterator[Trace | TraceColumns]:
    """:func:`iter_traces` (same keywords), with text logs as columnar batches (no object per event) where
    :func:`columnar_ok`; the same traces in the same order. ``stores``: Parquet stores too, as
    :func:`read_store_columnar` reads them (``metrics`` as there)."""
    keys = ("labels", "implementation", "version", "cc", "report", "on_bytes")
    unknown = set(kw) - set(keys)
    if unknown:
        raise TypeError(f"iter_trace_batches: unexpected keyword(s) {', '.join(sorted(unknown))}")
    yield from _iter_inputs(paths, *(kw.get(k) for k in keys), columns=True, stores=stores, metrics=metrics)


def _iter_inputs(
    paths: Sequence[str],
    labels: dict[str, str] | None,
    implementation: str | None,
    version: str | None,
    cc: str | None,
    report: ParseReport | None,
    on_bytes: Callable[[int], None] | None,
    *,
    columns: bool,
    stores: bool = False,
    metrics: bool = True,
) -> Iterator[Trace | TraceColumns]:
    report = report if report is not None else ParseReport()
    if not paths:
        raise InputError("no input files given")
    paths = expand_inputs(paths)
    scopes = trace_scopes(paths)
    sidecars = Sidecars()
    labels = labels or {}
    logs = None
    if columns and columnar_ok():
        from quicsm.traces.columnar import ColumnReader

        logs = ColumnReader(report, on_bytes)
    merged: dict[int, TraceMeta] = {}  # per sidecar (one per folder)
    for path in paths:
        side = sidecars(path)
        meta = merged.get(id(side))
        if meta is None:
            meta = merged[id(side)] = merge_meta(
                side, labels=labels, implementation=implementation, version=version, cc=cc
            )
        report.files += 1
        try:
            kind, stream = open_input(path)
            with stream:
                if logs is not None and kind == "log":  # files one after the other into shared batches
                    yield from logs.read(stream, path, scopes[path], meta)
                    continue
                if logs is not None:  # what the logs before this input left, in input order
                    yield from logs.flush()
                if logs is not None and stores and kind == "traces-parquet":
                    yield from read_store_columnar(path, meta, report, metrics=metrics)
                else:
                    yield from read_input(path, kind, scopes[path], meta, report, on_bytes, opener=_given(stream))
        except QuicsmError:
            raise
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:  # a reader that does not count them itself
            raise InputError(f"{path}: truncated or corrupt gzip data ({str(exc)[:200]})") from None
        except READER_ERRORS as exc:
            err = InputError(f"{path}: cannot read ({type(exc).__name__}: {str(exc)[:200]})")
            err.unexpected = True
            raise err from exc
    if logs is not None:
        yield from logs.flush()


def read_input(
    path: str,
    kind: str,
    scope: str,
    meta: TraceMeta,
    report: ParseReport,
    on_bytes: Callable[[int], None] | None = None,
    opener: Callable[[str], BinaryIO] = open_binary,
) -> Iterator[Trace]:
    """The traces of one input of a known kind; ``opener`` gives its bytes (local files, or fsspec URLs)."""
    if kind.startswith("traces-"):
        for t in iter_trace_file(path):
            report.traces += 1
            report.records += len(t.events)
            yield relabel(t, meta)
        return
    with _opened(path, opener, report) as fh:
        if kind == "qlog":
            yield from read_qlog(fh, path, meta, report)
        elif kind == "sqlog":
            yield from read_sqlog(fh, path, meta, report, on_bytes)
        elif kind == "ndjson":
            yield from read_ndjson(fh, path, meta, report, on_bytes)
        else:
            builder = TraceBuilder(path, scope, meta, report)
            feed = builder.feed
            for lineno, rec in scan_contract(fh, path, report, on_bytes):
                finished = feed(lineno, rec)
                if finished:
                    yield from finished
            yield from builder.finish()


def _given(stream: BinaryIO) -> Callable[[str], BinaryIO]:
    """An opener that hands out a stream already open."""
    return lambda _: stream


def columnar_ok() -> bool:
    """Whether text logs can be read as columns (:class:`~quicsm.traces.columnar.ColumnReader`): the C
    scanner is built. Verbs that want trace objects use the object path: it needs no NumPy."""
    from quicsm.traces.columnar import available

    return available()


@contextmanager
def _opened(path: str, opener: Callable[[str], BinaryIO], report: ParseReport) -> Iterator[BinaryIO]:
    """The input's bytes; a gzip stream that broke without the reader noticing is reported at the end."""
    with opener(path) as fh:
        yield fh
        if isinstance(fh, GzipReader) and fh.error is not None and not fh.error_raised:
            report.problem(path, 0, f"truncated or corrupt input ({fh.error})", "truncated input")


def read_log_columnar(
    path: str,
    scope: str,
    meta: TraceMeta,
    report: ParseReport,
    on_bytes: Callable[[int], None] | None = None,
    opener: Callable[[str], BinaryIO] = open_binary,
) -> Iterator[TraceColumns]:
    """One text log's traces as column batches (:mod:`quicsm.traces.columnar`); needs :func:`columnar_ok`."""
    from quicsm.traces.columnar import iter_trace_columns

    with opener(path) as fh:
        yield from iter_trace_columns(fh, path, scope, meta, report, on_bytes)


def read_store_columnar(
    path: str, meta: TraceMeta, report: ParseReport, *, metrics: bool = False
) -> Iterator[TraceColumns]:
    """A Parquet store's batches with ``meta`` (sidecar, command line) applied to every trace as
    :func:`read_input` applies it; ``metrics=False`` reads only what stays need."""
    from quicsm.traces.parquet import read_parquet_columns

    for tc in read_parquet_columns(path, metrics=metrics):
        tc.shared.templates = [relabel(t, meta) for t in tc.shared.templates]
        if meta.cc:
            tc.ccs = [meta.cc] * len(tc)
        report.traces += len(tc)
        report.records += int(tc.offsets[-1])
        yield tc


def relabel(t: Trace, meta: TraceMeta) -> Trace:
    if not (meta.labels or meta.implementation or meta.version or meta.cc):
        return t
    return replace(
        t,
        labels={**t.labels, **meta.labels},
        implementation=meta.implementation or t.implementation,
        version=meta.version or t.version,
        cc=meta.cc or t.cc,
    )


def _input_bytes(paths: Iterable[str]) -> int | None:
    try:
        return sum(os.path.getsize(p) for p in expand_inputs(list(paths)) if p != STDIN)
    except OSError:
        return None


def parse_inputs(
    paths: Sequence[str],
    *,
    labels: dict[str, str] | None = None,
    implementation: str | None = None,
    version: str | None = None,
    cc: str | None = None,
    strict: bool = False,
    progress: bool = False,
    require_transitions: bool = True,
) -> ParseResult:
    """Parse all inputs into traces. Problems are counted in ``report``; ``strict`` makes them errors.

    Raises :class:`NoTransitionsError` if nothing usable was found (unless ``require_transitions=False``).
    """
    report = ParseReport(strict=strict)
    with progress_bar(paths, progress) as on_bytes:
        traces = [
            t
            for t in iter_traces(
                paths,
                labels=labels,
                implementation=implementation,
                version=version,
                cc=cc,
                report=report,
                on_bytes=on_bytes,
            )
            if t.events
        ]
    if require_transitions and not any(any(True for _ in t.transitions()) for t in traces):
        raise no_transitions(paths, report)
    return ParseResult(traces, report)


@contextmanager
def progress_bar(paths: Sequence[str], progress: bool) -> Iterator[Callable[[int], None] | None]:
    """A byte progress bar on stderr over the inputs (tqdm), as the reader's ``on_bytes``; None without one."""
    if not progress:
        yield None
        return
    from tqdm import tqdm

    bar = tqdm(total=_input_bytes(paths), unit="B", unit_scale=True, desc="parse", file=sys.stderr, leave=False)
    try:
        yield bar.update
    finally:
        bar.close()


def no_transitions(paths: Sequence[str], report: ParseReport) -> NoTransitionsError:
    detail = f" ({report.total_issues} malformed record(s), first: {report.issues[0]})" if report.issues else ""
    return NoTransitionsError(
        f"no state transitions found in {', '.join(paths)}{detail}; "
        "are these logs from an instrumented server (lines with 'QUICSM v=1 ...', see docs/log-format.md) or qlogs?"
    )
