"""From input files to traces: logs (any prefix, gzip), qlogs, or trace files written earlier.

Every verb reads its inputs through :func:`read_inputs`: each file is read by the reader registered for
its kind (:mod:`quicsm.traces.readers`: text logs cut by the one trace cutter, qlogs, JSONL trace
files, Parquet stores) into column batches, in input order. :func:`iter_traces` gives every trace as an
object (views built from the columns).

Each input may have a sidecar ``meta.json`` in its directory (the testbed writes one per run) with
``implementation``, ``version``, ``cc`` and ``labels``; command-line labels win over it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from quicsm.errors import InputError, NoTransitionsError, reading
from quicsm.files import STDIN
from quicsm.traces.events import Trace, TraceMeta
from quicsm.traces.inputs import AUTO, FileBatch, Sidecars, expand_inputs, open_input, trace_scopes
from quicsm.traces.report import ParseReport
from quicsm.traces.select import Kept, Selector, keep_traces, trace_matches

if TYPE_CHECKING:
    from quicsm.traces.columnar import TraceColumns

__all__ = [
    "Overrides",
    "ParseResult",
    "iter_traces",
    "read_batch",
    "read_inputs",
    "parse_inputs",
    "write_store",
    "parse_label",
    "no_transitions",
    "progress_bar",
]


@dataclass(slots=True)
class ParseResult:
    """What :func:`parse_inputs` read.

    Attributes
    ----------
    traces : list of Trace
        The non-empty traces, in input order (within a file, in the order connections finished).
    report : ParseReport
        Files, lines, records and traces read; problem records with file and line; files skipped.

    Examples
    --------
    >>> import quicsm
    >>> result = quicsm.parse([TRACES / "fig13/mobile"])
    >>> result.report.traces, sum(len(t.events) for t in result.traces) == result.report.records
    (11, True)
    """

    traces: list[Trace]
    report: ParseReport = field(default_factory=ParseReport)


@dataclass(frozen=True, slots=True)
class Overrides:
    """What the command line says of every input: labels (over the sidecar's), stack, version, cc."""

    labels: dict[str, str] = field(default_factory=dict)
    implementation: str | None = None
    version: str | None = None
    cc: str | None = None
    states: str = "auto"
    """:attr:`TraceMeta.states` for every input (``--states``)."""

    def over(self, base: TraceMeta) -> TraceMeta:
        return TraceMeta(
            implementation=self.implementation or base.implementation,
            version=self.version or base.version,
            labels={**base.labels, **self.labels},
            cc=self.cc or base.cc,
            states=self.states if self.states != "auto" else base.states,
        )


def parse_label(text: str) -> tuple[str, str]:
    """``client=mobile`` -> ``("client", "mobile")``; InputError otherwise."""
    key, eq, value = text.partition("=")
    if not eq or not key.strip():
        raise InputError(f"label {text!r} is not KEY=VALUE")
    return key.strip(), value.strip()


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
    """Stream traces from inputs as objects; memory follows one batch and the connections open at once."""
    over = Overrides(labels or {}, implementation, version, cc)
    for tc in read_inputs(paths, over, report=report, on_bytes=on_bytes):
        yield from tc.traces()


def read_inputs(
    paths: Sequence[str],
    over: Overrides = Overrides(),
    *,
    report: ParseReport | None = None,
    on_bytes: Callable[[int], None] | None = None,
    metrics: bool = True,
    scopes: Mapping[str, str] | None = None,
    storage_options: dict[str, str] | None = None,
    ahead: bool = False,
) -> Iterator[TraceColumns]:
    """Every input's traces as column batches, in input order: each file opened once, its kind sniffed
    and read by the reader registered for it (:mod:`quicsm.traces.readers`); consecutive files of one
    family share batches. ``metrics=False``: a store's metric columns are not read.

    ``scopes`` (trace-id scope per file) is for a share of a run's files read apart (a Dask task):
    ``paths`` are then files, scoped as the whole run scopes them. ``storage_options``: fsspec's, for
    URLs. ``ahead``: a long trace's row groups may come before its batch (for the store writer only:
    :class:`~quicsm.traces.parquet.GroupAhead`). Problems are counted in ``report`` (an error on the
    first under ``report.strict``, the first in the file); any other failure is one :class:`InputError`
    naming the file.
    """
    from quicsm.fleet.sources import is_url, open_url
    from quicsm.traces.readers import ReadContext, Reader, ReaderSpec, Source, name_kind, spec_for

    report = report if report is not None else ParseReport()
    if not paths:
        raise InputError("no input files given")
    if scopes is None:
        paths = expand_inputs(paths, storage_options)
        scopes = trace_scopes(paths)
    ctx = ReadContext(report, on_bytes, metrics, ahead)
    sidecars = Sidecars()
    merged: dict[int, TraceMeta] = {}  # per sidecar (one per folder)
    readers: dict[str, Reader] = {}
    last: ReaderSpec | None = None
    for path in paths:
        report.files += 1
        with reading(path):  # what lower layers raise, said once (errors.as_quicsm_error)
            if is_url(path):
                kind = name_kind(path.split("?", 1)[0])
                spec = spec_for(kind)
                if not spec.urls:
                    raise InputError(f"{path}: trace files are read from local paths only; download it first")
                meta, stream = over.over(TraceMeta()), open_url(path, storage_options)
            else:
                side = sidecars(path)
                meta = merged.get(id(side)) or merged.setdefault(id(side), over.over(side))
                kind, stream = open_input(path)
                spec = spec_for(kind)
            if last is not None and last is not spec:  # another family: what the last one gathered first
                yield from readers[last.name].flush()
            last = spec
            reader = readers.get(spec.name) or readers.setdefault(spec.name, spec.reader(ctx))
            with stream:
                yield from reader.read(stream, Source(path, kind, scopes[path], meta))
    if last is not None:
        yield from readers[last.name].flush()


def _input_bytes(files: Iterable[str]) -> int | None:
    try:
        return sum(os.path.getsize(p) for p in files if p != STDIN and "://" not in p)
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
    where: Selector | None = None,
    dask: str | None = AUTO,
    storage_options: dict[str, str] | None = None,
    states: str = "auto",
) -> ParseResult:
    """Parse logs, qlogs and trace files into per-connection traces (``quicsm parse``).

    Parameters
    ----------
    paths : sequence of str or path-like
        Logs (any prefix, ``.gz``), qlogs, trace files (JSONL, Parquet), quoted globs, directories
        (read recursively), URLs, or ``-`` for stdin. A ``meta.json`` beside an input (the testbed
        writes one per run) gives its traces' stack, version, controller and labels.
    labels : dict of str to str, optional
        Labels for every trace (over the sidecar's).
    implementation, version, cc : str, optional
        The stack, its version and the congestion controller, for inputs that do not say.
    strict : bool
        Stop at the first malformed record (:class:`~quicsm.errors.ParseError`, ``file:line: reason``)
        instead of counting it in the report.
    progress : bool
        A progress bar on stderr.
    require_transitions : bool
        Refuse inputs without a single state transition (:class:`~quicsm.errors.NoTransitionsError`).
    where : dict of str to str, optional
        Keep only traces whose labels (or ``cc``, ``implementation``, ``version``) match.
    dask : str, optional
        ``local[:N]`` or a Dask scheduler address: read batches of files as parallel tasks (the same
        traces, in the same order). None or ``"off"``: one process. ``"auto"`` (the default, as for
        :func:`write_store`): one process here, since workers send each trace back as an object, which
        costs more than they save (2,000 small qlogs to JSON Lines: ``local:2`` took 1.14x the wall
        time of one process).
    storage_options : dict of str to str, optional
        fsspec options for URL inputs.

    Returns
    -------
    ParseResult
        The non-empty traces in input order, and the report of what was read and skipped.

    Raises
    ------
    quicsm.errors.QuicsmError
        An unreadable input, a malformed record under ``strict``, no transition at all, or nothing
        matching ``where``.

    See Also
    --------
    summarize : the same inputs folded into distinct state sequences, without a trace object each.

    Examples
    --------
    >>> import quicsm
    >>> result = quicsm.parse([TRACES / "fig13/desktop"])
    >>> len(result.traces), result.traces[0].cc, result.report.files
    (11, 'reno', 11)
    >>> result.traces[0].labels["profile"]
    'desktop'
    """
    from quicsm.traces.inputs import workers

    over = Overrides(dict(labels or {}), implementation, version, cc, states)
    report = ParseReport(strict=strict)
    files = expand_inputs(paths, storage_options)
    with workers(None if dask == AUTO else dask, files) as run_on:
        if run_on:
            from quicsm.fleet.run import map_tasks
            from quicsm.traces.inputs import file_batches, show_batches

            traces = []
            task = partial(traces_task, over=over, strict=strict)
            batches = file_batches(files, dask=run_on, storage_options=storage_options)
            shown = show_batches("dask: parsed", batches) if progress else None
            for got, part in map_tasks(task, batches, dask=run_on, progress=shown, imports=TASK_IMPORTS):
                traces.extend(got)
                report.merge(part)
        else:
            with progress_bar(files, progress) as on_bytes:
                items = read_inputs(
                    files,
                    over,
                    report=report,
                    on_bytes=on_bytes,
                    scopes=trace_scopes(files),
                    storage_options=storage_options,
                )
                traces = [t for tc in items for t in tc.traces()]
    if require_transitions and not any(any(True for _ in t.transitions()) for t in traces):
        raise no_transitions(paths, report)
    if where:
        traces = [t for t in traces if trace_matches(t, where)]
        if not traces:
            raise no_match(where)
    return ParseResult(traces, report)


def no_match(where: Selector) -> InputError:
    return InputError(f"no trace matches --where {' '.join(f'{k}={v}' for k, v in where.items())}")


def traces_task(batch: FileBatch, *, over: Overrides, strict: bool) -> tuple[list[Trace], ParseReport]:
    """One Dask task of ``parse`` to JSON Lines: a batch of files' non-empty traces and its report."""
    report = ParseReport(strict=strict)
    return [t for tc in read_batch(batch, over, report) for t in tc.traces()], report


TASK_IMPORTS = (
    "numpy",
    "quicsm.fleet.sources",
    "quicsm.traces.columnar",
    "quicsm.traces.contract",
    "quicsm.traces.logscan",
    "quicsm.traces.parquet",
    "quicsm.traces.qlog_columns",
)
"""What reading a batch imports on first use (:func:`quicsm.fleet.run.map_tasks`' ``imports``): forked
local workers then start with it (each importing it cost 0.15-0.3 s of CPU)."""


def read_batch(batch: FileBatch, over: Overrides, report: ParseReport, **kw: Any) -> Iterator[TraceColumns]:
    """:func:`read_inputs` of one Dask task's files, their trace ids scoped as the whole run scopes them."""
    return read_inputs(
        batch.files, over, report=report, scopes=batch.scope_map(), storage_options=batch.storage_options(), **kw
    )


def store_task(batch: FileBatch, *, over: Overrides, strict: bool, where: Selector | None) -> Stored:
    """One Dask task of ``parse -o x.parquet``: a batch of files' kept traces as row groups of the store
    (built from columns where the files are logs or stores), with its report and tally."""
    from quicsm.traces.parquet import store_batches

    report = ParseReport(strict=strict)
    tally = Kept()
    return Stored(store_batches(keep_traces(read_batch(batch, over, report), where, tally)), report, tally)


@dataclass(slots=True)
class Stored:
    """What :func:`store_task` returns."""

    batches: list[Any]
    report: ParseReport
    kept: Kept


def write_store(
    paths: Sequence[str],
    output: str,
    over: Overrides = Overrides(),
    *,
    strict: bool = False,
    where: Selector | None = None,
    dask: str | None = AUTO,
    progress: bool = False,
    storage_options: dict[str, str] | None = None,
) -> tuple[int, ParseReport, Kept]:
    """Inputs straight into a Parquet store as column batches, streamed: no object per event, memory
    bounded by one batch and the open connections (with ``dask``: by one task's row groups, fetched in
    input order). Returns the traces written, the report and what was kept; nothing is written when
    no input has a transition or ``where`` keeps nothing.

    The files are read in the batches :func:`~quicsm.traces.inputs.file_batches` cuts them into as for
    :data:`STORE_SPLIT` workers (:func:`joined`), whoever reads them (this process, ``local:N``, a
    cluster); the store's row groups end where the batches end, so its bytes are the same whatever
    ``dask`` chose. ``"auto"`` (the default, the CLI's): as :func:`~quicsm.traces.inputs.workers_for`
    chooses (2,000 small qlogs: ``local:2``, 0.88x the wall time of one process)."""
    from quicsm.traces.inputs import file_batches, workers
    from quicsm.traces.parquet import write_parquet

    report = ParseReport(strict=strict)
    tally = Kept()
    files = expand_inputs(paths, storage_options)

    def stream(tasks: Iterator[Stored] | None, on_bytes: Callable[[int], None] | None) -> Iterator[Any]:
        if tasks is not None:
            for got in tasks:
                report.merge(got.report)
                tally.merge(got.kept)
                yield from got.batches
        else:
            for batch in batches:  # what store_task does, without packing the tables
                part, kept = ParseReport(strict=strict), Kept()
                yield from keep_traces(read_batch(batch, over, part, on_bytes=on_bytes, ahead=True), where, kept)
                report.merge(part)
                tally.merge(kept)
        if not tally.transitions:  # raised inside the writer: the output file is not made
            raise no_transitions(paths, report)
        if where and not tally.kept:
            raise no_match(where)

    with workers(dask, files) as run_on:
        batches = joined(
            file_batches(files, dask=run_on, storage_options=storage_options, workers=STORE_SPLIT), STORE_BATCH_BYTES
        )
        tasks: Iterator[Stored] | None = None
        if run_on:  # local workers start here, before the writer (its allocator starts a thread)
            from quicsm.fleet.run import map_tasks
            from quicsm.traces.inputs import show_batches

            task = partial(store_task, over=over, strict=strict, where=where)
            shown = show_batches("dask: written", batches) if progress else None
            tasks = map_tasks(task, batches, dask=run_on, progress=shown, imports=TASK_IMPORTS)
        with progress_bar(files, progress and not run_on) as on_bytes:
            n = write_parquet(stream(tasks, on_bytes), output)
    return n, report, tally


STORE_SPLIT = 2
"""The workers :func:`write_store` cuts its files for, however many read them: at least
:data:`~quicsm.traces.inputs.TASKS_PER_WORKER` times this many batches, each at most
:data:`~quicsm.traces.inputs.TASK_BYTES`, joined up to :data:`STORE_BATCH_BYTES`."""
STORE_BATCH_BYTES = 8 << 20
"""Batches of fewer bytes are joined with the next (:func:`joined`): a run too small for workers (the
bundled traces) is not cut into a row group a file."""


def joined(batches: Sequence[FileBatch], floor: int = STORE_BATCH_BYTES) -> list[FileBatch]:
    """Consecutive batches joined while the one being filled holds fewer than ``floor`` bytes (batches of
    unknown size, 0: URLs, a run cut by count, are left as they are)."""
    out: list[FileBatch] = []
    for b in batches:
        last = out[-1] if out else None
        if last is not None and 0 < last.bytes < floor and b.bytes > 0 and b.options == last.options:
            out[-1] = FileBatch(last.files + b.files, last.scopes + b.scopes, last.bytes + b.bytes, last.options)
        else:
            out.append(b)
    return out


@contextmanager
def progress_bar(files: Sequence[str], progress: bool) -> Iterator[Callable[[int], None] | None]:
    """A byte progress bar on stderr over the input files (expanded once: :func:`expand_inputs`), as the reader's
    ``on_bytes``; None without one."""
    if not progress:
        yield None
        return
    from tqdm import tqdm

    bar = tqdm(total=_input_bytes(files), unit="B", unit_scale=True, desc="parse", file=sys.stderr, leave=False)
    try:
        yield bar.update
    finally:
        bar.close()


def no_transitions(paths: Sequence[str], report: ParseReport) -> NoTransitionsError:
    """Nothing to learn from: the problems the read met say why (the first, then every kind's count, in the
    words the report uses); with none, the inputs are not of a kind quicsm reads states from. The inputs
    are named as given (a pattern, not the files it matched)."""
    paths = [os.fspath(p) for p in paths]
    where = ", ".join(paths)
    if not report.issues:
        return NoTransitionsError(
            f"no state transitions found in {where}; are these logs from an instrumented server "
            "(lines with 'QUICSM v=1 ...', see docs/log-format.md) or qlogs?"
        )
    kinds = ", ".join(f"{n} {kind}" for kind, n in report.issue_counts.most_common())
    more = f" ({report.total_issues} problem(s): {kinds})" if report.total_issues > 1 else ""
    first = report.issues[0]
    return NoTransitionsError(
        f"no state transitions found{'' if [first.path] == paths else ' in ' + where}: {first}{more}"
    )
