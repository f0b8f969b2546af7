"""Reduce every input file to a :class:`Summary` (here or as one Dask task per file) and merge them in input order.

Connection keys are scoped to a file, so files are independent tasks. A worker that fails on a file
(unreadable, ``--strict`` and a malformed line) returns the error instead of raising, so the run stops
naming that file and line; nothing is dropped silently.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar

from quicsm.errors import InputError, ParseError, QuicsmError
from quicsm.fleet.sources import expand_sources, is_url, open_url
from quicsm.fleet.summary import Summary, merge_reports
from quicsm.traces.events import StateView, Trace
from quicsm.traces.report import ParseReport
from quicsm.traces.select import trace_matches

if TYPE_CHECKING:
    from quicsm.compare.stays import Connection
    from quicsm.traces.builder import TraceMeta
    from quicsm.traces.columnar import TraceColumns
    from quicsm.traces.parquet import StoreBatch
    from quicsm.traces.parse import ParseResult
    from quicsm.traces.select import Kept

__all__ = [
    "FileTask",
    "connections_file",
    "connections_files",
    "file_traces",
    "summarize_file",
    "summarize_inputs",
    "iter_file_traces",
    "parse_file",
    "parse_files",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class FileTask:
    """Everything a worker needs to reduce one file (picklable)."""

    path: str
    scope: str
    view: StateView = StateView()
    labels: dict[str, str] = field(default_factory=dict)
    implementation: str | None = None
    version: str | None = None
    cc: str | None = None
    strict: bool = False
    where: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Failure:
    """A file's error, carried back from a worker as text (exceptions with custom arguments do not unpickle)."""

    kind: str
    message: str
    path: str = ""
    line: int = 0
    reason: str = ""

    def raise_(self) -> None:
        if self.kind == "ParseError":
            raise ParseError(self.path, self.line, self.reason)
        raise InputError(self.message)


def iter_file_traces(task: FileTask, report: ParseReport) -> Iterator[Trace]:
    """The traces of one input, with trace ids scoped as :func:`quicsm.traces.iter_traces` scopes them in a
    multi-file run: logs (local or fsspec URLs, streamed) here, qlogs and trace files through ``iter_traces``."""
    from quicsm.traces.parse import iter_traces, read_input

    kind, meta, opener = _file_source(task)
    if opener is None:
        yield from iter_traces(
            [task.path],
            labels=task.labels,
            implementation=task.implementation,
            version=task.version,
            cc=task.cc,
            report=report,
        )
        return
    report.files += 1
    yield from read_input(task.path, kind, task.scope, meta, report, opener=opener)


def _file_source(task: FileTask) -> tuple[str, TraceMeta, Callable[[str], BinaryIO] | None]:
    """The input's kind, its metadata, and how to open it (None: a local non-log input, read by iter_traces)."""
    from quicsm.files import open_binary
    from quicsm.traces.builder import TraceMeta
    from quicsm.traces.inputs import input_kind, sidecar_meta
    from quicsm.traces.sniff import kind_by_name

    url = is_url(task.path)
    kind = kind_by_name(task.path.split("?", 1)[0]) if url else input_kind(task.path)
    if not url and kind != "log":
        return kind, TraceMeta(), None
    side = TraceMeta() if url else sidecar_meta(task.path)
    meta = TraceMeta(
        implementation=task.implementation or side.implementation,
        version=task.version or side.version,
        labels={**side.labels, **task.labels},
        cc=task.cc or side.cc,
    )
    if kind.startswith("traces-"):
        raise InputError(f"{task.path}: trace files are read from local paths only; download it first")
    return kind, meta, open_url if url else open_binary


def summarize_file(task: FileTask) -> Summary | Failure:
    """One Dask task: a file's traces reduced to a summary, or the reason it failed."""
    report = ParseReport(strict=task.strict)
    s = Summary(view=task.view, report=report)
    try:
        columns = _columnar_source(task, report)
        summarize_items(columns if columns is not None else iter_file_traces(task, report), s, task.where)
    except ParseError as exc:
        return Failure("ParseError", str(exc), exc.path, exc.line, exc.reason)
    except QuicsmError as exc:
        return Failure(type(exc).__name__, str(exc))
    except OSError as exc:  # truncated gzip, I/O errors: name the file
        return Failure("InputError", f"{task.path}: cannot read ({exc})")
    except EOFError as exc:
        return Failure("InputError", f"{task.path}: truncated ({exc})")
    return s


def summarize_items(items: Iterable[Trace | TraceColumns], s: Summary, where: dict[str, str] | None) -> None:
    """Traces (objects, or column batches) into ``s``; ``where`` keeps only matching ones (transitions
    are looked for before it, as every verb does)."""
    for item in items:
        if isinstance(item, Trace):
            if not item.events:
                continue
            if not where or trace_matches(item, where):
                s.add(item)
            elif not s.transitions:
                s.transitions = any(True for _ in item.transitions())
        else:
            _summarize_columns(item, s, where)


def _columnar_source(task: FileTask, report: ParseReport, *, metrics: bool = False) -> Iterator[TraceColumns] | None:
    """A text log's or Parquet store's trace batches as columns (no object per event), when the columnar
    path can read it; ``metrics``: a store's metric columns too (logs always have them)."""
    from quicsm.traces.parse import columnar_ok, read_log_columnar

    kind, meta, opener = _file_source(task)
    if kind == "traces-parquet" and columnar_ok():
        report.files += 1
        return _stored_columns(task, report, metrics)
    if kind != "log" or opener is None or not columnar_ok():
        return None
    report.files += 1
    return read_log_columnar(task.path, task.scope, meta, report, opener=opener)


def _stored_columns(task: FileTask, report: ParseReport, metrics: bool = False) -> Iterator[TraceColumns]:
    """A Parquet store's batches, with the command line's labels and overrides applied as for trace files."""
    from quicsm.traces.inputs import sidecar_meta
    from quicsm.traces.parse import merge_meta, read_store_columnar

    meta = merge_meta(
        sidecar_meta(task.path),
        labels=task.labels,
        implementation=task.implementation,
        version=task.version,
        cc=task.cc,
    )
    return read_store_columnar(task.path, meta, report, metrics=metrics)


def _summarize_columns(tc: TraceColumns, s: Summary, where: dict[str, str] | None) -> None:
    """A batch's stays go into the summary as arrays; Python work per trace only for ``--where``
    (selectors read trace metadata) and per metadata change."""
    import numpy as np

    from quicsm.traces.columnar import stay_arrays

    stays = stay_arrays(tc, s.view)
    if where:
        shells = [tc.shell(i) for i in range(len(tc))]
        keep = np.fromiter((trace_matches(t, where) for t in shells), bool, len(shells))
        # as parse_inputs: transitions are looked for before --where
        s.add_packed(stays.names, stays.seqs.take(keep), bool(stays.has_transition.any()))
        for shell in (t for t, k in zip(shells, keep.tolist()) if k):
            s.note_metadata(shell)
        return
    s.add_packed(stays.names, stays.seqs, bool(stays.has_transition.any()))
    for shell in tc.distinct_shells():
        s.note_metadata(shell)


def _file_tasks(paths: Sequence[str], view: StateView = StateView(), **fields: Any) -> list[FileTask]:
    """One task per input file (directories and globs expanded), trace ids scoped as a local run scopes
    them; ``fields``: the other :class:`FileTask` fields (labels, overrides, strict, where)."""
    if not paths:
        raise InputError("no input files given")
    from quicsm.traces.inputs import trace_scopes

    files = expand_sources(list(paths))
    scopes = trace_scopes(files)
    for key in ("labels", "where"):
        fields[key] = dict(fields.get(key) or {})
    return [FileTask(p, scopes[p], view, **fields) for p in files]


def summarize_inputs(
    paths: Sequence[str],
    *,
    view: StateView = StateView(),
    labels: dict[str, str] | None = None,
    implementation: str | None = None,
    version: str | None = None,
    cc: str | None = None,
    strict: bool = False,
    where: dict[str, str] | None = None,
    dask: str | None = None,
    progress: bool = False,
    require_transitions: bool = True,
) -> Summary:
    """All inputs reduced and merged in input order; ``dask`` is ``local[:N]`` or a scheduler address."""
    fields: dict[str, Any] = dict(labels=labels, implementation=implementation, version=version, cc=cc)
    if not dask and not any(is_url(p) for p in paths):  # here: files pooled into shared batches
        from quicsm.traces.parse import iter_trace_batches, progress_bar

        total = Summary(view=view, report=ParseReport(strict=strict))
        with progress_bar(paths, progress) as on_bytes:
            items = iter_trace_batches(
                list(paths), stores=True, metrics=False, report=total.report, on_bytes=on_bytes, **fields
            )
            summarize_items(items, total, where)
    else:
        total = _summarize_tasks(paths, view, dask, progress, strict=strict, where=where, **fields)
    if require_transitions and not total.transitions:
        from quicsm.traces.parse import no_transitions

        raise no_transitions(paths, total.report)
    return total


def _summarize_tasks(paths: Sequence[str], view: StateView, dask: str | None, progress: bool, **fields: Any) -> Summary:
    """One task per file (on Dask, or here for URLs), the summaries merged in input order."""
    tasks = _file_tasks(paths, view, **fields)
    if dask:
        from quicsm.fleet.cluster import run_tasks

        results = run_tasks(dask, summarize_file, tasks, progress=progress)
    else:
        results = [summarize_file(t) for t in tasks]
    total: Summary | None = None
    for r in results:
        if isinstance(r, Failure):
            r.raise_()
        assert isinstance(r, Summary)
        if total is None:  # the first input's summary is the start of the total (no copy)
            total = r
        else:
            total.merge(r)
    return total if total is not None else Summary(view=view, report=ParseReport(strict=fields.get("strict", False)))


def _attempt(path: str, work: Callable[[], T]) -> T | Failure:
    """``work()`` on the file ``path``, or the reason it failed as a :class:`Failure` (what a Dask task returns)."""
    try:
        return work()
    except ParseError as exc:
        return Failure("ParseError", str(exc), exc.path, exc.line, exc.reason)
    except QuicsmError as exc:
        return Failure(type(exc).__name__, str(exc))
    except (OSError, EOFError) as exc:
        return Failure("InputError", f"{path}: cannot read ({exc})")


def parse_file(task: FileTask) -> tuple[list[Trace], ParseReport] | Failure:
    """One Dask task of ``parse``: a file's non-empty traces and its report, or why it failed."""
    report = ParseReport(strict=task.strict)
    return _attempt(task.path, lambda: ([t for t in iter_file_traces(task, report) if t.events], report))


@dataclass(slots=True)
class StoredFile:
    """One Dask task of ``parse -o x.parquet``: a file's kept traces as row groups of the store, built on
    the worker from columns where the columnar path reads the file, with its report and tally."""

    batches: list[StoreBatch]
    report: ParseReport
    kept: Kept


def store_file(task: FileTask) -> StoredFile | Failure:
    from quicsm.traces.parquet import store_batches
    from quicsm.traces.select import Kept

    report = ParseReport(strict=task.strict)

    def work() -> StoredFile:
        tally = Kept()
        return StoredFile(store_batches(_kept_items(task, report, tally)), report, tally)

    return _attempt(task.path, work)


def _kept_items(task: FileTask, report: ParseReport, tally: Kept) -> Iterator[Trace | TraceColumns]:
    """One input's non-empty traces that ``task.where`` keeps: column batches where the columnar path
    reads it (text logs, local or URLs; stores), else objects."""
    from quicsm.traces.select import keep_traces

    columns = _columnar_source(task, report, metrics=True)
    items: Iterable[Trace | TraceColumns] = columns if columns is not None else iter_file_traces(task, report)
    yield from keep_traces(items, task.where or None, tally)


def store_files(
    paths: Sequence[str],
    *,
    dask: str | None,
    report: ParseReport,
    tally: Kept,
    progress: bool = False,
    **fields: Any,
) -> Iterator[StoreBatch | Trace | TraceColumns]:
    """What ``parse -o x.parquet`` writes, one input after the other. With ``dask``, :func:`store_file`
    over every input, one task per file: the row groups in input order, each file's fetched when the
    writer reaches it (the client holds one file's, whatever the fleet's size). Without, the inputs are
    read here, streamed batch by batch (the verbs that read only local paths hand URLs to this).
    ``report`` and ``tally`` fill as files arrive; a failed file raises when reached. ``fields``:
    labels, implementation, version, cc, strict, where (as :class:`FileTask`)."""
    tasks = _file_tasks(paths, **fields)
    if dask is None:
        for task in tasks:
            try:
                yield from _kept_items(task, report, tally)
            except (OSError, EOFError) as exc:
                raise InputError(f"{task.path}: cannot read ({exc})") from None
        return
    from quicsm.fleet.cluster import iter_tasks

    for r in iter_tasks(dask, store_file, tasks, progress=progress):
        if isinstance(r, Failure):
            r.raise_()
        assert not isinstance(r, Failure)
        merge_reports(report, r.report)
        tally.merge(r.kept)
        yield from r.batches


def connections_file(task: FileTask, metrics: bool = False) -> tuple[list[Connection], ParseReport] | Failure:
    """One Dask task of ``compare``: a file's connections as rows (:mod:`quicsm.compare.stays`) for
    ``task.view``, from columns where the columnar path reads the file, and its report."""
    from quicsm.compare.stays import column_connections, connection

    report = ParseReport(strict=task.strict)

    def work() -> tuple[list[Connection], ParseReport]:
        columns = _columnar_source(task, report, metrics=metrics)
        if columns is not None:
            return [r for tc in columns for r in column_connections(tc, task.view)], report
        rows = [connection(t, task.view) for t in iter_file_traces(task, report) if t.events]
        return rows, report

    return _attempt(task.path, work)


def connections_files(
    paths: Sequence[str],
    *,
    dask: str | None,
    view: StateView,
    metrics: bool = False,
    progress: bool = False,
    strict: bool = False,
) -> tuple[list[Connection], ParseReport]:
    """:func:`connections_file` over every input, one Dask task per file (``dask``) or file by file here
    (``dask`` None: inputs that are URLs); rows in input order."""
    from functools import partial

    from quicsm.fleet.cluster import run_tasks

    tasks = _file_tasks(paths, view, strict=strict)
    report = ParseReport(strict=strict)
    rows: list[Connection] = []
    one = partial(connections_file, metrics=metrics)
    for r in run_tasks(dask, one, tasks, progress=progress) if dask else map(one, tasks):
        if isinstance(r, Failure):
            r.raise_()
        assert not isinstance(r, Failure)
        rows.extend(r[0])
        merge_reports(report, r[1])
    return rows, report


def file_traces(task: FileTask, ids: set[str]) -> Iterator[Trace]:
    """The traces of one input whose id is in ``ids``, with their events; only those become objects
    where the columnar path reads the file."""
    report = ParseReport(strict=task.strict)
    columns = _columnar_source(task, report, metrics=True)
    if columns is None:
        yield from (t for t in iter_file_traces(task, report) if t.id in ids)
        return
    for tc in columns:
        keep = [i in ids for i in tc.ids]
        if any(keep):
            yield from tc.select(keep).traces()


def parse_files(
    paths: Sequence[str],
    *,
    dask: str | None,
    labels: dict[str, str] | None = None,
    implementation: str | None = None,
    version: str | None = None,
    cc: str | None = None,
    strict: bool = False,
    progress: bool = False,
) -> ParseResult:
    """:func:`quicsm.traces.parse_inputs` with one Dask task per file (``dask``), or file by file here
    (``dask`` None: inputs ``parse_inputs`` cannot read, such as URLs); the same traces in the same order."""
    from quicsm.fleet.cluster import run_tasks
    from quicsm.traces.parse import ParseResult

    tasks = _file_tasks(paths, labels=labels, implementation=implementation, version=version, cc=cc, strict=strict)
    report = ParseReport(strict=strict)
    traces: list[Trace] = []
    results = run_tasks(dask, parse_file, tasks, progress=progress) if dask else map(parse_file, tasks)
    for r in results:
        if isinstance(r, Failure):
            r.raise_()
        assert not isinstance(r, Failure)
        traces.extend(r[0])
        merge_reports(report, r[1])
    if not any(any(True for _ in t.transitions()) for t in traces):
        from quicsm.traces.parse import no_transitions

        raise no_transitions(paths, report)
    return ParseResult(traces, report)
