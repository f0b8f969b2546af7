"""From input files to traces: logs (any prefix, gzip), qlogs, or trace files written earlier.

Each input may have a sidecar ``meta.json`` in its directory (the testbed writes one per run) with
``implementation``, ``version``, ``cc`` and ``labels``; command-line labels win over it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from quicsm.errors import InputError, NoTransitionsError
from quicsm.traces.builder import TraceBuilder, TraceMeta
from quicsm.traces.events import Trace
from quicsm.traces.inputs import STDIN, input_kind, open_binary
from quicsm.traces.logscan import scan_contract
from quicsm.traces.qlog import read_ndjson, read_qlog, read_sqlog
from quicsm.traces.report import ParseReport
from quicsm.traces.store import iter_trace_file

__all__ = ["ParseResult", "iter_traces", "parse_inputs", "sidecar_meta", "parse_label", "expand_inputs"]

SIDECAR = "meta.json"


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


def sidecar_meta(path: str) -> TraceMeta:
    """The ``meta.json`` beside an input, if any (testbed runs write one)."""
    if path == STDIN:
        return TraceMeta()
    side = os.path.join(os.path.dirname(os.path.abspath(path)), SIDECAR)
    if not os.path.isfile(side):
        return TraceMeta()
    try:
        with open(side, encoding="utf-8") as fh:
            d = json.load(fh)
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"{side}: unreadable sidecar metadata ({exc})") from None
    if not isinstance(d, dict):
        raise InputError(f"{side}: sidecar metadata must be a JSON object")
    labels = d.get("labels") or {}
    return TraceMeta(
        implementation=d.get("implementation"),
        version=d.get("version"),
        labels={str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {},
        cc=d.get("cc"),
    )


def _merge(
    base: TraceMeta, *, labels: dict[str, str], implementation: str | None, version: str | None, cc: str | None
) -> TraceMeta:
    return TraceMeta(
        implementation=implementation or base.implementation,
        version=version or base.version,
        labels={**base.labels, **labels},
        cc=cc or base.cc,
    )


_INPUT_SUFFIXES = (
    ".log",
    ".log.gz",
    ".txt",
    ".txt.gz",
    ".qlog",
    ".qlog.gz",
    ".sqlog",
    ".sqlog.gz",
    ".jsonl",
    ".jsonl.gz",
    ".parquet",
)


def expand_inputs(paths: Sequence[str]) -> list[str]:
    """Directories become the log, qlog and trace files below them (sorted); files stay as given."""
    out: list[str] = []
    for p in paths:
        if p != STDIN and os.path.isdir(p):
            found = sorted(
                os.path.join(root, f)
                for root, _, files in os.walk(p)
                for f in files
                if f.lower().endswith(_INPUT_SUFFIXES)
            )
            if not found:
                raise InputError(f"{p}: directory holds no log, qlog or trace files ({', '.join(_INPUT_SUFFIXES)})")
            out.extend(found)
        else:
            out.append(p)
    return out


def _scopes(paths: Sequence[str]) -> dict[str, str]:
    """Short, unique trace-id prefixes: the file name, or more of the path where names collide."""
    names: dict[str, str] = {}
    for p in paths:
        parts = os.path.normpath(p).split(os.sep)
        depth = 1
        while (
            depth < len(parts)
            and sum(1 for q in paths if os.path.normpath(q).split(os.sep)[-depth:] == parts[-depth:]) > 1
        ):
            depth += 1
        names[p] = "/".join(parts[-depth:])
    return names


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
    report = report if report is not None else ParseReport()
    if not paths:
        raise InputError("no input files given")
    paths = expand_inputs(paths)
    for p in paths:
        if p != STDIN and not os.path.exists(p):
            raise InputError(f"{p}: no such file")
    scopes = _scopes(list(paths))
    labels = labels or {}
    for path in paths:
        meta = _merge(sidecar_meta(path), labels=labels, implementation=implementation, version=version, cc=cc)
        kind = input_kind(path)
        report.files += 1
        if kind.startswith("traces-"):
            for t in iter_trace_file(path):
                report.traces += 1
                report.records += len(t.events)
                yield _relabel(t, meta)
            continue
        with open_binary(path) as fh:
            if kind == "qlog":
                yield from read_qlog(fh, path, meta, report)
            elif kind == "sqlog":
                yield from read_sqlog(fh, path, meta, report, on_bytes)
            elif kind == "ndjson":
                yield from read_ndjson(fh, path, meta, report, on_bytes)
            else:
                builder = TraceBuilder(path, scopes[path], meta, report)
                feed = builder.feed
                for lineno, rec in scan_contract(fh, path, report, on_bytes):
                    finished = feed(lineno, rec)
                    if finished:
                        yield from finished
                yield from builder.finish()


def _relabel(t: Trace, meta: TraceMeta) -> Trace:
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
    bar = None
    on_bytes = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=_input_bytes(paths), unit="B", unit_scale=True, desc="parse", file=sys.stderr, leave=False)
        on_bytes = bar.update
    try:
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
    finally:
        if bar is not None:
            bar.close()
    if require_transitions and not any(any(True for _ in t.transitions()) for t in traces):
        detail = f" ({report.total_issues} malformed record(s), first: {report.issues[0]})" if report.issues else ""
        raise NoTransitionsError(
            f"no state transitions found in {', '.join(paths)}{detail}; "
            "are these logs from an instrumented server (lines with 'QUICSM v=1 ...', see docs/log-format.md) or qlogs?"
        )
    return ParseResult(traces, report)
