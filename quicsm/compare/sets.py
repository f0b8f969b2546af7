"""Trace sets to compare: one per file/glob/directory argument, or selected from one dataset by labels.

``quicsm compare A B`` makes one set per argument; ``--where client=desktop --vs client=mobile``
selects sets from one dataset; ``--by client`` makes one set per value of a label.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from quicsm.compare.stays import Connection, connection, connections
from quicsm.errors import InputError
from quicsm.traces import parse_inputs
from quicsm.traces.events import StateView, Trace
from quicsm.traces.report import ParseReport
from quicsm.traces.select import Selector, label_value, parse_selector, selector_text, trace_matches

__all__ = [
    "Pool",
    "Selector",
    "TraceSet",
    "expand_inputs",
    "load_pool",
    "label_value",
    "parse_selector",
    "selector_text",
    "sets_by_label",
    "sets_from_inputs",
    "sets_from_selectors",
    "trace_matches",
]


def expand_inputs(arg: str) -> list[str]:
    """One set argument -> its files: local paths as every verb expands them
    (:func:`quicsm.traces.inputs.expand_input`), URL globs (``s3://bucket/a/*``) through fsspec."""
    from quicsm.fleet.sources import expand_sources

    return expand_sources([arg])


Fetch = Callable[[Sequence[Connection]], list[Trace]]
"""Reads the events of some connections back (their rows came without them)."""


@dataclass(frozen=True, slots=True)
class Pool:
    """Connections read once for ``view``, one :class:`~quicsm.compare.stays.Connection` row each (in the
    order the object path gives their traces), and how to read chosen connections' events back."""

    rows: tuple[Connection, ...]
    view: StateView
    fetch: Fetch | None = None
    report: ParseReport | None = None
    """What reading the inputs met (problem records skipped, files skipped), for the CLI to show."""

    @property
    def traces(self) -> list[Trace]:
        """Each connection's trace: its metadata, and its events only where it was read as an object."""
        return [r.trace for r in self.rows]

    def subset(self, rows: Iterable[Connection]) -> Pool:
        return Pool(tuple(rows), self.view, self.fetch, self.report)


@dataclass(frozen=True, slots=True)
class TraceSet:
    """A named group of connections; ``origin`` says how it was chosen (shown in reports).

    With ``pool`` (sets read by :func:`load_pool`), ``traces`` are the pool rows' traces: metadata,
    without events where the rows were read from columns; the analysis reads the rows."""

    name: str
    traces: tuple[Trace, ...]
    origin: str = ""
    sources: tuple[str, ...] = field(default=())
    pool: Pool | None = None

    def __len__(self) -> int:
        return len(self.traces)

    def controllers(self) -> list[str]:
        return sorted({t.cc for t in self.traces if t.cc})

    def connections(self, view: StateView) -> Sequence[Connection]:
        """One row per connection for ``view``: the pool's, or computed from the traces."""
        if self.pool is None:
            return connections(self.traces, view)
        if self.pool.view != view:
            raise InputError(f"set {self.name} was read for another state view ({self.pool.view})")
        return self.pool.rows

    def with_events(self, rows: Sequence[Connection]) -> list[Trace]:
        """The traces of ``rows`` with their events (read back for rows that came without them)."""
        missing = [r for r in rows if r.events and not r.trace.events]
        if missing and (self.pool is None or self.pool.fetch is None):
            raise InputError(f"set {self.name}: the events of {missing[0].id} were not kept")
        got = {t.id: t for t in self.pool.fetch(missing)} if missing and self.pool and self.pool.fetch else {}
        return [got.get(r.id, r.trace) for r in rows]


def _pool_set(name: str, pool: Pool, rows: Iterable[Connection], origin: str, sources: tuple[str, ...]) -> TraceSet:
    sub = pool.subset(rows)
    return TraceSet(name, tuple(sub.traces), origin, sources, sub)


def _default_name(pattern: str, taken: set[str]) -> str:
    base = pattern.rstrip("/")
    name = os.path.basename(base) or base
    for suffix in (".gz", ".jsonl", ".parquet", ".sqlog", ".qlog", ".log"):
        name = name.removesuffix(suffix)
    if glob.has_magic(name) or not name:
        name = base
    cand, i = name, 2
    while cand in taken:
        cand, i = f"{name}#{i}", i + 1
    return cand


Loader = Callable[[list[str]], "list[Trace] | Pool"]


def _load(paths: list[str], labels: Selector | None = None) -> list[Trace]:
    return parse_inputs(paths, labels=labels or None).traces


def load_pool(
    paths: Sequence[str], view: StateView, *, metrics: bool = False, dask: str | None = None, strict: bool = False
) -> Pool:
    """The connections of ``paths`` as rows for ``view``: text logs and Parquet stores from columns (no
    object per event), other inputs as trace objects, in the order :func:`parse_inputs` gives them;
    the same error when no input has a transition. ``metrics``: read a store's metrics too (to know which
    connections have cwnd samples). ``dask``: one task per file, the workers return rows, not traces.
    ``strict``: the first problem record is an error (``file:line: reason``), as for the other verbs."""
    from quicsm.fleet.sources import is_url
    from quicsm.traces.inputs import expand_inputs as expand_all
    from quicsm.traces.inputs import trace_scopes
    from quicsm.traces.parse import iter_trace_batches, no_transitions

    if dask or any(is_url(p) for p in paths):  # URLs are read file by file as workers read them
        from quicsm.fleet.run import connections_files
        from quicsm.fleet.sources import expand_sources

        files = expand_sources(list(paths)) if paths else []
        rows, report = connections_files(list(paths), dask=dask, view=view, metrics=metrics, strict=strict)
    else:
        from quicsm.compare.stays import column_connections

        files = expand_all(list(paths)) if paths else []
        report = ParseReport(strict=strict)
        rows = []
        for item in iter_trace_batches(list(paths), stores=True, metrics=metrics, report=report):
            if isinstance(item, Trace):
                if item.events:
                    rows.append(connection(item, view))
            else:
                rows.extend(column_connections(item, view))
    if not any(r.has_transition for r in rows):
        raise no_transitions(list(paths), report)
    scopes = trace_scopes(files)
    return Pool(tuple(rows), view, lambda chosen: _read_back(chosen, files, scopes), report)


def _read_back(chosen: Sequence[Connection], files: Sequence[str], scopes: dict[str, str]) -> list[Trace]:
    """The traces of ``chosen`` with their events, read again from the files that hold them."""
    from quicsm.fleet.run import FileTask, file_traces

    want = {r.id for r in chosen}
    out: list[Trace] = []
    for path in files:
        if len(out) == len(want):
            break
        out.extend(file_traces(FileTask(path, scopes[path]), want))
    return out


def _select(pool: Iterable[Trace] | Pool, keep: Callable[[Trace], bool]) -> tuple[Trace, ...] | list[Connection]:
    if isinstance(pool, Pool):
        return [r for r in pool.rows if keep(r.trace)]
    return tuple(t for t in pool if keep(t))


def _make_set(
    name: str,
    pool: Iterable[Trace] | Pool,
    chosen: Sequence[Trace] | Sequence[Connection],
    origin: str,
    sources: tuple[str, ...] | None = None,
) -> TraceSet:
    traces = [c.trace if isinstance(c, Connection) else c for c in chosen]
    if sources is None:
        sources = tuple(sorted({s for t in traces for s in t.sources}))
    if isinstance(pool, Pool):
        return _pool_set(name, pool, chosen, origin, sources)  # type: ignore[arg-type]
    return TraceSet(name, tuple(traces), origin, sources)


def sets_from_inputs(
    patterns: Sequence[str],
    *,
    names: Sequence[str] | None = None,
    where: Selector | None = None,
    load: Loader | None = None,
) -> list[TraceSet]:
    """One set per argument (file, glob or directory); ``where`` filters every set. ``load`` reads one
    argument's files: trace objects (the default) or a :class:`Pool` (:func:`load_pool`)."""
    load = load or _load
    out: list[TraceSet] = []
    taken: set[str] = set()
    for i, pat in enumerate(patterns):
        name = names[i] if names and i < len(names) else _default_name(pat, taken)
        taken.add(name)
        paths = expand_inputs(pat)
        pool = load(paths)
        origin = pat + (f" where {selector_text(where)}" if where else "")
        chosen = _select(pool, lambda t: not where or trace_matches(t, where))
        out.append(_make_set(name, pool, chosen, origin, tuple(paths)))
    return out


def sets_from_selectors(
    traces: Iterable[Trace] | Pool, selectors: Sequence[Selector], *, names: Sequence[str] | None = None
) -> list[TraceSet]:
    """One set per selector over a single dataset (traces, or a :class:`Pool`); a trace may fall in several sets."""
    pool = traces if isinstance(traces, Pool) else list(traces)
    out = []
    for i, sel in enumerate(selectors):
        name = names[i] if names and i < len(names) else selector_text(sel)
        chosen = _select(pool, lambda t, sel=sel: trace_matches(t, sel))  # type: ignore[misc]
        out.append(_make_set(name, pool, chosen, f"where {selector_text(sel)}"))
    return out


def sets_by_label(traces: Iterable[Trace] | Pool, key: str, *, order: Sequence[str] | None = None) -> list[TraceSet]:
    """One set per value of label ``key`` (sorted, or in ``order``); traces without it are dropped."""
    groups: dict[str, list[Trace | Connection]] = {}
    items: Iterable[Trace | Connection] = traces.rows if isinstance(traces, Pool) else traces
    for t in items:
        v = label_value(t.trace if isinstance(t, Connection) else t, key)
        if v is not None:
            groups.setdefault(v, []).append(t)
    if not groups:
        raise InputError(
            f"no trace has label {key!r}; labels come from --label at parse time or the testbed's meta.json"
        )
    values = [v for v in (order or []) if v in groups] + sorted(v for v in groups if v not in (order or []))
    return [_make_set(f"{key}={v}", traces, groups[v], f"by {key}") for v in values]  # type: ignore[arg-type]
