"""What the fuzzer feeds: one :class:`Target` per reader, all through the public parse API.

Add a reader by appending a Target to :data:`TARGETS`: a seed kind, how to build an input from a seed
(mutate, maybe gzip) and a function that runs it. A run is fine if it returns or raises a
:class:`~quicsm.errors.QuicsmError` that is not marked ``unexpected``; anything else is a crash.
A target may also return a disagreement (a string) instead of None.
"""

from __future__ import annotations

import ctypes
import gzip
import io
import mmap
import os
import random
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from quicsm.errors import QuicsmError
from quicsm.traces import columnar, iter_traces, logscan
from quicsm.traces.contract import ContractError, parse_payload
from quicsm.traces.events import TraceMeta
from quicsm.traces.report import ParseReport
from tests.fuzz.mutate import Seeds, gzip_variant, mutate
from tests.traces import oracle
from tests.traces.oracle import TraceBuilder

WINDOWS = (logscan.CHUNK, 4096, 97, 8)
"""Scan window sizes the agreement target compares (the last ones are shorter than most lines)."""


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    seed_kind: str
    run: Callable[[bytes, Path], str | None]
    """Runs one input in a scratch directory; returns a disagreement, or None."""
    gzip: bool = False
    weight: int = 1

    def make(self, rng: random.Random, seeds: Seeds) -> bytes:
        data = mutate(seeds.pick(rng, self.seed_kind), rng, seeds, self.seed_kind)
        return gzip_variant(data, rng) if self.gzip else data


def _parse_file(name: str) -> Callable[[bytes, Path], str | None]:
    def run(data: bytes, scratch: Path) -> None:
        path = scratch / name
        path.write_bytes(data)
        for _ in iter_traces([str(path)], report=ParseReport(keep=3)):
            pass
        return None

    return run


def _run_meta(data: bytes, scratch: Path) -> None:
    side = scratch / "m"
    side.mkdir(exist_ok=True)
    (side / "meta.json").write_bytes(data)
    log = side / "s.log"
    if not log.exists():
        log.write_bytes(b"QUICSM v=1 conn=a t_us=1 cc=cubic from=Init to=SlowStart\n")
    for _ in iter_traces([str(log)]):
        pass
    return None


def _run_line(data: bytes, scratch: Path) -> None:
    try:
        parse_payload(data.decode("utf-8", "replace"))
    except ContractError:
        pass
    return None


def scan(data: bytes, *, use_c: bool, chunk: int) -> tuple[object, ...]:
    """Everything the text-log scanner reports for ``data``: records, line count, every problem."""
    finder = oracle.find_tagged_c if use_c else logscan.find_tagged_py
    saved = oracle.find_tagged
    oracle.find_tagged = finder
    try:
        report = ParseReport(keep=1 << 30)
        records = list(oracle.scan_contract(io.BytesIO(data), "x", report, chunk=chunk))
    finally:
        oracle.find_tagged = saved
    return records, report.lines, [str(i) for i in report.issues]


AGREEMENT_INPUT = 1 << 12
"""The agreement target scans 8 times, with windows down to 8 bytes: it takes the head of each input."""


def _run_agreement(data: bytes, scratch: Path) -> str | None:
    data = data[:AGREEMENT_INPUT]
    expected = scan(data, use_c=False, chunk=logscan.CHUNK)
    for use_c in (True, False) if HAVE_C else (False,):
        for chunk in WINDOWS:
            if (use_c, chunk) == (False, logscan.CHUNK):
                continue
            got = scan(data, use_c=use_c, chunk=chunk)
            if got != expected:
                return f"{'C' if use_c else 'Python'} scanner with a {chunk}-byte window differs from Python's"
    return None


def _object_traces(data: bytes) -> tuple[object, ...]:
    """The object path (scanner, then TraceBuilder): traces and the whole report."""
    report = ParseReport(keep=1 << 30)
    builder = TraceBuilder("x", "s", TraceMeta(), report)
    out = []
    for line, rec in oracle.scan_contract(io.BytesIO(data), "x", report):
        out += builder.feed(line, rec)
    out += builder.finish()
    return out, report.to_json()


def _run_columnar(data: bytes, scratch: Path) -> str | None:
    """The columnar path gives the object path's traces, counts and problems, whatever the batch size."""
    if not columnar.available():
        return None
    data = data[:AGREEMENT_INPUT]
    expected = _object_traces(data)
    for batch_rows in (1, 3, columnar.BATCH_ROWS):
        report = ParseReport(keep=1 << 30)
        batches = oracle.column_batches(io.BytesIO(data), "x", "s", TraceMeta(), report, batch_rows=batch_rows)
        got = [t for batch in batches for t in batch.traces()], report.to_json()
        if got != expected:
            return f"columnar path with batches of {batch_rows} records differs from the object path"
    if HAVE_C:  # the same log as a plain file, scanned in its mapping (windows down to 3 bytes, each split
        # between two threads at the line past its middle)
        log = scratch / "mapped.log"
        log.write_bytes(data)
        report = ParseReport(keep=1 << 30)
        chunk = _small_window(data)
        scan_c = columnar._scan_columns
        columnar._scan_columns = lambda *args: scan_c(*args, -1)
        try:
            with mapped_from(0), open(log, "rb") as fh:
                batches = list(oracle.column_batches(fh, "x", "s", TraceMeta(), report, chunk=chunk))
        finally:
            columnar._scan_columns = scan_c
        if ([t for batch in batches for t in batch.traces()], report.to_json()) != expected:
            return f"columnar path over the file's mapping in two threads, {chunk}-byte windows, differs from the object path"
    return None


@contextmanager
def mapped_from(size: int) -> Iterator[None]:
    """Plain files of ``size`` bytes and more scanned in their mapping (:data:`logscan.MAP_MIN`)."""
    saved = logscan.MAP_MIN
    logscan.MAP_MIN = size
    try:
        yield
    finally:
        logscan.MAP_MIN = saved


def _run_cli(data: bytes, scratch: Path) -> str | None:
    """The CLI on stdin: an error is one line and a non-zero exit, never a traceback."""
    from click.testing import CliRunner

    from quicsm.cli.main import cli

    result = CliRunner().invoke(cli, ["parse", "-", "-q", "-o", os.devnull], input=data)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    if result.exit_code != 0:
        lines = [ln for ln in result.output.splitlines() if ln.strip()]
        if len(lines) != 1 or not lines[0].startswith("Error: "):
            return f"CLI error is not one 'Error:' line: {result.output[:200]!r}"
    return None


def _run_baseline(data: bytes, scratch: Path) -> None:
    """The baseline bundle reader (quicsm check): a checked bundle, or one InputError line."""
    from quicsm.check.bundle import read_baseline

    read_baseline(data, "fuzz.qsb")
    return None


SMALL_WINDOWS = (4096, 97, 8, 3)
"""Window sizes the agreement targets read streams in, besides the default."""


def _pick(data: bytes, n: int, salt: int = 0) -> int:
    """A choice among ``n`` made from the input's bytes (so a saved input replays the same way)."""
    return (zlib.crc32(data) + salt) % n


def _small_window(data: bytes) -> int:
    return SMALL_WINDOWS[_pick(data, len(SMALL_WINDOWS))]


def _qlog_columns(
    data: bytes,
    kind: str,
    scanner: type,
    window: int | None,
    meta: TraceMeta = TraceMeta(),
    mapped: Path | None = None,
    metrics: bool = True,
) -> list[object]:
    """``mapped``: ``data`` written to this file and read in windows of its mapping (logscan.Window); ``metrics``
    False: read as ``infer`` reads it (metrics unknown)."""
    report = ParseReport(keep=1 << 30)
    b = exact_windows()(report, scanner=scanner, window=window, metrics=metrics)
    if mapped is not None:
        mapped.write_bytes(data)
        with mapped_from(0), open(mapped, "rb") as fh:
            batches = list(b.read(fh, "x", meta, kind)) + b.flush()
    elif window is None:
        batches = b.add(data, "x", meta, kind) + b.flush()
    else:
        batches = list(b.read(io.BytesIO(data), "x", meta, kind)) + b.flush()
    return [[t for tc in batches for t in tc.traces()], report.to_json()]


def fenced(data: bytes) -> memoryview:
    """``data`` copied to end where an unreadable page begins (and an unreadable page before the area): a
    read even one byte past its end faults at once (SIGSEGV; faulthandler names the test). A bytes object
    hides a one-byte overread even from AddressSanitizer (its trailing NUL is allocated). The area is kept
    and reused (a new mapping per window made the fuzz targets 2.6 times slower); the view is good until
    the next call."""
    global _fence
    if _mprotect is None:
        return memoryview(data)
    size = len(data)
    if _fence is None or len(_fence) < size + 2 * mmap.PAGESIZE:
        pages = max(16, -(-size // mmap.PAGESIZE) + 2)
        _fence = mmap.mmap(-1, pages * mmap.PAGESIZE)
        base = ctypes.addressof(ctypes.c_char.from_buffer(_fence))
        for page in (base, base + (pages - 1) * mmap.PAGESIZE):
            if _mprotect(ctypes.c_void_p(page), ctypes.c_size_t(mmap.PAGESIZE), 0) != 0:  # PROT_NONE
                raise OSError(ctypes.get_errno(), "mprotect")
    at = len(_fence) - mmap.PAGESIZE - size
    _fence[at : at + size] = data
    return memoryview(_fence)[at : at + size]


_fence: mmap.mmap | None = None
_mprotect = getattr(ctypes.CDLL(None, use_errno=True), "mprotect", None) if os.name == "posix" else None


@cache
def exact_windows() -> type:
    """QlogBatcher whose C scanner sees each window (and a file read whole) :func:`fenced`, exactly the
    window's bytes; the Python twin gets them as bytes. The reader's own window is a bytearray that only
    grows: past a window's end lie the bytes of earlier windows, so a scanner reading past the end finds
    valid memory and may even agree by chance. Here a read past the end faults."""
    from quicsm.traces.qlog_columns import QlogBatcher
    from quicsm.traces.qlog_scanner import QlogScannerPy

    feed, add = QlogBatcher._feed, QlogBatcher.add  # the reader's own (readers() puts these in their place)

    def window(self: QlogBatcher, data: bytes) -> Any:
        return bytes(data) if isinstance(self.sc, QlogScannerPy) else fenced(bytes(data))

    def exact_feed(self: QlogBatcher, document: bool, buf: bytearray, start: int, end: int, *rest: Any) -> int:
        return feed(self, document, window(self, memoryview(buf)[:end]), start, end, *rest)  # a bytearray or a mapping

    def exact_add(self: QlogBatcher, data: bytes, *rest: Any) -> list[Any]:
        return add(self, window(self, data), *rest)

    return type("ExactWindows", (QlogBatcher,), {"_feed": exact_feed, "add": exact_add})


def _run_metric_states(data: bytes, scratch: Path) -> str | None:
    """States read from metrics (quicsm.traces.metric_states), forced on every file (``states=metrics``)
    and automatic: the oracle and the column reader (C and Python scanners, whole and in windows) agree,
    and every inferred trace is well formed (time order, known states, the inferred label)."""
    from quicsm.traces.metric_states import INFERRED_LABEL
    from quicsm.traces.qlog_scanner import QlogScannerPy, Scanner
    from quicsm.traces.states import is_known_state
    from tests.traces import qlog_oracle
    from tests.traces.test_qlog_oracle import TWO_THREADS

    data = data[:AGREEMENT_INPUT]
    small = _small_window(data)
    scanner = (QlogScannerPy, Scanner, TWO_THREADS)[_pick(data, 3)] if HAVE_C else QlogScannerPy
    for states in ("metrics", "auto"):
        meta = TraceMeta(states=states)
        for kind, name in (("sqlog", "read_sqlog"), ("ndjson", "read_ndjson")):
            report = ParseReport(keep=1 << 30)
            want = list(getattr(qlog_oracle, name)(io.BytesIO(data), "x", meta, report))
            for t in want:
                inferred = t.labels.get("states") == INFERRED_LABEL["states"]
                if states == "metrics" and not inferred:
                    return "a trace with logged states under states=metrics"
                times = [e.t_us for e in t.events]
                if times != sorted(times):
                    return "inferred trace out of time order"
                if inferred and not all(is_known_state(e.state) for e in t.events if e.kind == "transition"):
                    return "inferred state quicsm does not know"
            wanted = [want, report.to_json()]
            for sc, window in ((Scanner, None), (scanner, small)):
                if _qlog_columns(data, kind, sc, window, meta) != wanted:
                    return f"{sc.__name__} differs from the oracle under states={states}"
    return None


def _run_qlog_agreement(data: bytes, scratch: Path) -> str | None:
    """The qlog column reader (JSON-SEQ, NDJSON, one document) by the C scanner (in one thread and in two)
    and by its Python twin,
    read whole and in windows down to a few bytes, gives one result; and that is the old object
    reader's (tests/traces/qlog_oracle.py), problems with their lines and reasons included, wherever
    that oracle applies (:func:`~tests.traces.qlog_oracle.comparable`)."""
    from quicsm.traces.qlog_scanner import QlogScannerPy
    from tests.traces import qlog_oracle

    whole = data[: AGREEMENT_INPUT * 8]  # a document is held to the oracle only while it is JSON: keep it whole
    data = whole if len(whole) > AGREEMENT_INPUT and qlog_oracle.comparable(whole, "qlog") else data[:AGREEMENT_INPUT]
    # the C scanner reading the file whole, and one other way per input (all of them over many inputs); a
    # whole document not in windows under 97 bytes: a value is scanned again as each window adds to it, so
    # 3-byte windows over a 20 KB document took 0.9 s (over the 10 s hang limit on a loaded machine)
    windows = SMALL_WINDOWS if len(data) <= AGREEMENT_INPUT else tuple(w for w in SMALL_WINDOWS if w >= 97)
    from tests.traces.test_qlog_oracle import ONE_THREAD, TWO_THREADS, without_metrics

    # (C in one thread first; in two threads every run of records is split between them)
    scanners = (ONE_THREAD, TWO_THREADS, QlogScannerPy) if HAVE_C else (QlogScannerPy,)
    others = [(s, w) for s in scanners for w in (None, *windows)]
    for kind, name in (("sqlog", "read_sqlog"), ("ndjson", "read_ndjson"), ("qlog", "read_qlog")):
        scanner, window = others[1:][_pick(data, len(others) - 1, len(kind))] if HAVE_C else others[_pick(data, 2)]
        first = _qlog_columns(data, kind, others[0][0], None)
        if _qlog_columns(data, kind, scanner, window) != first:
            where = "whole" if window is None else f"in {window}-byte windows"
            return f"qlog {kind} read by {scanner.__name__} {where} differs from the C scanner's whole read"
        if scanner is not QlogScannerPy:  # read without metrics (infer's read): only the metrics unknown
            bare = _qlog_columns(data, kind, scanner, window, metrics=False)
            if bare != [without_metrics(first[0]), first[1]]:  # type: ignore[arg-type]
                return f"qlog {kind} read without metrics by {scanner.__name__} differs from the read with them"
        if HAVE_C and window is not None and data:  # the same, from the file's mapping
            if _qlog_columns(data, kind, scanner, window, mapped=scratch / "mapped.qlog") != first:
                return f"qlog {kind} read by {scanner.__name__} in {window}-byte windows of its mapping differs"
        if qlog_oracle.comparable(data, kind):
            report = ParseReport(keep=1 << 30)
            want = [list(getattr(qlog_oracle, name)(io.BytesIO(data), "x", TraceMeta(), report)), report.to_json()]
            if first != want:
                return f"qlog {kind} differs from the old reader's"
    return None


@contextmanager
def readers(python: bool, window: int | None = None) -> Iterator[None]:
    """parse_inputs with the C scanners (``python`` False) or with every Python twin switched in (the
    text-log tag finder, the columnar scanners, the qlog scanner); streams read in ``window``-byte windows,
    each handed to the C qlog and text-log scanners :func:`fenced` (:func:`exact_windows`)."""
    from quicsm.traces import qlog_columns, qlog_scanner

    exact = vars(exact_windows())
    twins = [
        (oracle, "find_tagged", logscan.find_tagged_py),
        (columnar, "_scan_columns", columnar.scan_columns_py),
        (columnar, "_scan_files", columnar.scan_files_py),
        (qlog_scanner, "Scanner", qlog_scanner.QlogScannerPy),
    ]
    sizes = [(logscan, "CHUNK"), (qlog_columns, "WINDOW")]
    saved = [(m, name, getattr(m, name)) for m, name, _ in twins] + [(m, name, getattr(m, name)) for m, name in sizes]
    saved += [(qlog_columns.QlogBatcher, name, getattr(qlog_columns.QlogBatcher, name)) for name in ("_feed", "add")]
    for m, name, twin in twins if python else []:
        setattr(m, name, twin)
    for m, name in sizes if window is not None else []:
        setattr(m, name, window)
    qlog_columns.QlogBatcher._feed = exact["_feed"]  # type: ignore[method-assign]  # each window fenced
    qlog_columns.QlogBatcher.add = exact["add"]  # type: ignore[method-assign]
    if not python:  # and each text-log window too, split between two threads at the line past its middle
        scan_c = columnar._scan_columns
        columnar._scan_columns = lambda buf, start, cut, *rest: scan_c(fenced(bytes(buf[:cut])), start, cut, *rest, -1)
    try:
        yield
    finally:
        for m, name, value in saved:
            setattr(m, name, value)


def _parse_twins(name: str) -> Callable[[bytes, Path], str | None]:
    """parse_inputs, the entry point users call, on ``data`` as a plain file and gzipped (a stream read
    in windows): the C scanners and every Python twin, windows of 4 MiB and of a few bytes, agree on the
    traces and the whole report."""

    def run(data: bytes, scratch: Path) -> str | None:
        from quicsm.traces import parse_inputs

        data = data[:AGREEMENT_INPUT]
        small = _small_window(data)
        # plain (read whole when small) or gzipped (a stream, read in windows); the C scanners, and one of
        # the other ways per input
        suffix, raw = (("", data), (".gz", gzip.compress(data, mtime=0)))[_pick(data, 2, 1)]
        ways = [(False, small), (True, None), (True, small)] if HAVE_C else [(True, small)]
        path = scratch / (name + suffix)
        path.write_bytes(raw)
        first = None
        for python, window in ((not HAVE_C, None), ways[_pick(data, len(ways), 2)]):
            with readers(python, window):
                try:
                    res = parse_inputs([str(path)], require_transitions=False)
                    got: object = (res.traces, res.report.to_json())
                except QuicsmError as exc:
                    if getattr(exc, "unexpected", False):
                        raise
                    got = repr(exc)
            if first is None:
                first = got
            elif got != first:
                how = f"{'Python twins' if python else 'C scanners'}, {window or 'default'}-byte windows"
                return f"parse_inputs of {name}{suffix} with {how} differs from the C scanners'"
        return None

    return run


def _run_parquet(data: bytes, scratch: Path) -> None:
    return _parse_file("t.parquet")(data, scratch)


HAVE_C = oracle.find_tagged is oracle.find_tagged_c

TARGETS: list[Target] = [
    Target("log", "log", _parse_file("s.log"), weight=4),
    Target("log.gz", "log", _parse_file("s.log.gz"), gzip=True, weight=2),
    Target("contract-line", "line", _run_line, weight=4),
    Target("c-python-agreement", "log", _run_agreement, weight=3),
    Target("columnar-agreement", "log", _run_columnar, weight=3),
    Target("traces-jsonl", "jsonl", _parse_file("t.jsonl"), weight=2),
    Target("traces-jsonl.gz", "jsonl", _parse_file("t.jsonl.gz"), gzip=True),
    Target("meta.json", "meta", _run_meta, weight=2),
    Target("qlog", "qlog", _parse_file("s.qlog"), weight=2),
    Target("qlog.gz", "qlog", _parse_file("s.qlog.gz"), gzip=True),
    Target("sqlog", "sqlog", _parse_file("s.sqlog"), weight=2),
    Target("sqlog.gz", "sqlog", _parse_file("s.sqlog.gz"), gzip=True),
    Target("qlog-agreement", "sqlog", _run_qlog_agreement),
    Target("qlog-doc-agreement", "qlog", _run_qlog_agreement, weight=2),
    Target("qlog-metrics", "sqlog", _run_metric_states),
    Target("parse-twins-log", "log", _parse_twins("s.log")),
    Target("parse-twins-sqlog", "sqlog", _parse_twins("s.sqlog")),
    Target("parse-twins-qlog", "qlog", _parse_twins("s.qlog")),
    Target("traces-parquet", "parquet", _run_parquet),
    Target("cli-stdin", "log", _run_cli),
    Target("baseline-bundle", "baseline", _run_baseline, weight=2),
    Target("baseline-bundle.gz", "baseline", _run_baseline, gzip=True),
]
"""Every reader the fuzzer covers; ``weight`` is its share of the inputs."""


def parquet_seed(scratch: Path, jsonl: bytes) -> bytes:
    """A small Parquet trace file, the seed of the Parquet target."""
    from quicsm.traces import write_traces
    from quicsm.traces.store import iter_trace_file

    src = scratch / "seed.jsonl"
    src.write_bytes(jsonl)
    out = scratch / "seed.parquet"
    write_traces(list(iter_trace_file(str(src))), str(out))
    return out.read_bytes()
