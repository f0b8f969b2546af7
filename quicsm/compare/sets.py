"""Trace sets to compare: one per file/glob/directory argument, or selected from one dataset by labels.

``build_sets(["A", "B"])`` makes one set per argument; ``where=[{"client": "desktop"}], vs=[{"client":
"mobile"}]`` selects sets from one dataset; ``by="client"`` makes one set per value of a label. Every
set is a tuple of :class:`~quicsm.compare.stays.Connection` rows (one row per connection: metadata,
stays and a few facts about its events), read once for the comparison's state view.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING

from quicsm.compare.stays import Connection, connections, rows_of
from quicsm.errors import InputError
from quicsm.traces.events import StateView, Trace
from quicsm.traces.report import ParseReport
from quicsm.traces.select import Selector, label_value, parse_selector, selector_text, trace_matches

if TYPE_CHECKING:
    from quicsm.traces.columnar import TraceColumns
    from quicsm.traces.inputs import FileBatch

__all__ = [
    "Selector",
    "TraceSet",
    "build_sets",
    "expand_set",
    "group_by_label",
    "load_rows",
    "rows_task",
    "label_value",
    "parse_selector",
    "selector_text",
    "sets_by_label",
    "spread",
    "sets_from_inputs",
    "sets_from_selectors",
    "trace_matches",
]

Fetch = Callable[[Sequence[Connection]], list[Trace]]
"""Reads the events of some connections back (rows hold none)."""


@dataclass(frozen=True, slots=True)
class TraceSet:
    """A named group of connections, one :class:`~quicsm.compare.stays.Connection` row each.

    Attributes
    ----------
    name : str
        Shown in every table and report.
    rows : tuple of Connection
        Per connection: its metadata, folded states with the stay in each, events, length.
    origin : str
        How the set was chosen (an input, a selector), shown in reports.
    sources : tuple of str
        The files read.
    view : StateView
        The state view the rows were read for.
    fetch : callable, optional
        Reads chosen connections' events back (the HTML report's timelines).
    report : ParseReport, optional
        What reading the inputs met.

    Examples
    --------
    >>> import quicsm
    >>> desktop, mobile = quicsm.build_sets([TRACES / "fig13/desktop", TRACES / "fig13/mobile"])
    >>> row = desktop.rows[0]
    >>> row.states[:3], row.trace.labels["profile"], desktop.controllers()
    (('SlowStart', 'ApplicationLimited', 'SlowStart'), 'desktop', ['reno'])
    """

    name: str
    rows: tuple[Connection, ...]
    origin: str = ""
    sources: tuple[str, ...] = field(default=())
    view: StateView = StateView()
    fetch: Fetch | None = None
    report: ParseReport | None = None

    @classmethod
    def from_traces(
        cls, name: str, traces: Iterable[Trace], origin: str = "", view: StateView = StateView()
    ) -> TraceSet:
        """A set of trace objects (their rows for ``view``; the objects stay at hand for ``fetch``)."""
        kept = [t for t in traces if t.events]
        by_id = {t.id: t for t in kept}
        sources = tuple(sorted({s for t in kept for s in t.sources}))
        rows = tuple(connections(kept, view))
        return cls(name, rows, origin, sources, view, lambda chosen: [by_id[r.id] for r in chosen])

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def traces(self) -> list[Trace]:
        """Each connection's metadata as a trace without events."""
        return [r.trace for r in self.rows]

    def controllers(self) -> list[str]:
        return sorted({r.trace.cc for r in self.rows if r.trace.cc})

    def subset(
        self, name: str, rows: Iterable[Connection], origin: str, sources: tuple[str, ...] | None = None
    ) -> TraceSet:
        """Some of this set's rows as a set of their own (reading back and report shared)."""
        chosen = tuple(rows)
        if sources is None:
            sources = tuple(sorted({s for r in chosen for s in r.trace.sources}))
        return replace(self, name=name, rows=chosen, origin=origin, sources=sources)

    def timeline_traces(self, count: int) -> list[Trace]:
        """``count`` connections with cwnd samples, spread over the range of durations (median first),
        with their events (kept from the read when the set was read for them, else read back)."""
        rows = self.rows
        picked = spread([(r.duration_us, r.id) for r in rows], [r.has_cwnd for r in rows], count)
        return self.with_events([rows[i] for i in picked])

    def with_events(self, rows: Sequence[Connection]) -> list[Trace]:
        """The traces of ``rows`` with their events."""
        if not rows:
            return []
        if self.fetch is None:
            raise InputError(f"set {self.name}: the events of {rows[0].id} cannot be read back")
        got = {t.id: t for t in self.fetch(rows)}
        return [got.get(r.id, r.trace) for r in rows]


def spread(keys: Sequence[tuple[int, str]], usable: Sequence[bool], count: int) -> list[int]:
    """Indices of ``count`` usable items spread over the order of ``keys`` (median first)."""
    order = sorted((i for i, ok in enumerate(usable) if ok), key=lambda i: keys[i])
    if count <= 0 or not order:
        return []
    if len(order) <= count:
        return order
    quantiles = [0.5] + [i / (count - 1) for i in range(count)] if count > 1 else [0.5]
    picked: list[int] = []
    for q in quantiles:
        i = order[min(len(order) - 1, round(q * (len(order) - 1)))]
        if i not in picked:
            picked.append(i)
        if len(picked) == count:
            break
    return picked


def expand_set(arg: str, storage_options: dict[str, str] | None = None) -> list[str]:
    """One set argument -> its files, as every verb expands them (:func:`quicsm.traces.inputs.expand_inputs`)."""
    from quicsm.traces.inputs import expand_inputs

    return expand_inputs([arg], storage_options)


def rows_task(
    batch: FileBatch, *, view: StateView, metrics: bool, strict: bool
) -> tuple[list[Connection], ParseReport]:
    """One Dask task of ``compare``: a batch of files as connection rows (never whole traces) and its report."""
    from quicsm.traces.parse import Overrides, read_batch

    report = ParseReport(strict=strict)
    return rows_of(read_batch(batch, Overrides(), report, metrics=metrics), view), report


def load_rows(
    paths: Sequence[str],
    view: StateView = StateView(),
    *,
    name: str = "",
    origin: str = "",
    metrics: bool = False,
    dask: str | None = None,
    strict: bool = False,
    progress: bool = False,
    storage_options: dict[str, str] | None = None,
    listed: bool = False,
) -> TraceSet:
    """The connections of ``paths`` as rows for ``view``, in the order :func:`quicsm.traces.parse_inputs`
    gives their traces, from columns (no object per event); the same error when no input has a
    transition. ``metrics``: read a store's metrics too (to know which connections have cwnd samples)
    and keep the events of the one read (up to :data:`KEEP_EVENTS`) for the connections a report draws
    (:meth:`TraceSet.timeline_traces`). ``dask``: batches of files as tasks,
    the workers return rows. ``strict``: the first problem record is an error (``file:line: reason``).
    ``listed``: ``paths`` are files already listed (:func:`expand_set`), not listed again."""
    from quicsm.fleet.run import map_tasks
    from quicsm.traces.inputs import expand_inputs, file_batches, show_batches, trace_scopes, workers
    from quicsm.traces.parse import TASK_IMPORTS, no_transitions, progress_bar, read_inputs

    files = list(paths) if listed else expand_inputs(list(paths), storage_options) if paths else []
    scopes = trace_scopes(files)
    report = ParseReport(strict=strict)
    rows: list[Connection] = []
    with workers(dask, files) as run_on:
        kept: list[TraceColumns] | None = [] if metrics and not run_on else None
        if run_on:
            task = partial(rows_task, view=view, metrics=metrics, strict=strict)
            batches = file_batches(files, dask=run_on, storage_options=storage_options)
            shown = show_batches("dask: read", batches) if progress else None
            for got, part in map_tasks(task, batches, dask=run_on, progress=shown, imports=TASK_IMPORTS):
                rows.extend(got)
                report.merge(part)
        elif files:
            with progress_bar(files, progress) as on_bytes:
                items = read_inputs(
                    files,
                    report=report,
                    on_bytes=on_bytes,
                    metrics=metrics,
                    scopes=scopes,
                    storage_options=storage_options,
                )
                rows = rows_of(_keeping(items, kept), view)
    if not any(r.has_transition for r in rows):
        raise no_transitions(list(paths), report)
    if kept:  # all of it (emptied when the set outgrew KEEP_EVENTS)
        fetch: Fetch = partial(_from_batches, kept)
    else:
        fetch = partial(_read_back, files=files, scopes=scopes, storage_options=storage_options)
    return TraceSet(name, tuple(rows), origin, tuple(files), view, fetch, report)


KEEP_EVENTS = 1_000_000
"""A set read for its events (``metrics``) keeps up to this many events from its one read, so the
report's timelines need no second read (about 100 MB); a larger set reads the chosen connections back."""


def _keeping(items: Iterable[TraceColumns], kept: list[TraceColumns] | None) -> Iterator[TraceColumns]:
    """``items``, each also kept in ``kept`` until more than :data:`KEEP_EVENTS` events were seen."""
    seen = 0
    for tc in items:
        seen += len(tc.order)
        if kept is not None and seen <= KEEP_EVENTS:
            kept.append(tc)
        elif kept:
            kept.clear()  # too many: the chosen connections are read back
        yield tc


def _from_batches(batches: Sequence[TraceColumns], chosen: Sequence[Connection]) -> list[Trace]:
    """The traces of ``chosen`` with their events, from the batches kept when the set was read."""
    want = {r.id for r in chosen}
    out: list[Trace] = []
    for tc in batches:
        keep = [i in want for i in tc.ids]
        if any(keep):
            out.extend(tc.select(keep).traces())
    return out


def _read_back(
    chosen: Sequence[Connection],
    files: Sequence[str],
    scopes: Mapping[str, str],
    storage_options: dict[str, str] | None,
) -> list[Trace]:
    """The traces of ``chosen`` with their events, read again from the files that hold them."""
    from quicsm.traces.parse import read_inputs

    want = {r.id for r in chosen}
    holding = {s for r in chosen for s in r.trace.sources}  # (a store's traces name the logs it was made of)
    out: list[Trace] = []
    for path in [p for p in files if p in holding] + [p for p in files if p not in holding]:
        if len(out) == len(want):
            break
        for item in read_inputs([path], scopes={path: scopes[path]}, storage_options=storage_options):
            keep = [i in want for i in item.ids]
            if any(keep):
                out.extend(item.select(keep).traces())
    return out


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


Loader = Callable[[list[str]], TraceSet]
"""Reads one argument's files into a set (its name and origin given later)."""


def sets_from_inputs(
    patterns: Sequence[str],
    *,
    names: Sequence[str] | None = None,
    where: Selector | None = None,
    load: Loader | None = None,
    storage_options: dict[str, str] | None = None,
) -> list[TraceSet]:
    """One set per argument (file, glob or directory); ``where`` filters every set. ``load`` reads one
    argument's files (default: :func:`load_rows` for the default view)."""
    read = load or load_rows
    out: list[TraceSet] = []
    taken: set[str] = set()
    for i, pat in enumerate(map(os.fspath, patterns)):
        name = names[i] if names and i < len(names) else _default_name(pat, taken)
        taken.add(name)
        paths = expand_set(pat, storage_options)
        data = read(paths)
        origin = pat + (f" where {selector_text(where)}" if where else "")
        chosen = [r for r in data.rows if not where or trace_matches(r.trace, where)]
        out.append(data.subset(name, chosen, origin, tuple(paths)))
    return out


def sets_from_selectors(
    data: TraceSet, selectors: Sequence[Selector], *, names: Sequence[str] | None = None
) -> list[TraceSet]:
    """One set per selector over a single dataset; a connection may fall in several sets."""
    out = []
    for i, sel in enumerate(selectors):
        name = names[i] if names and i < len(names) else selector_text(sel)
        out.append(
            data.subset(name, [r for r in data.rows if trace_matches(r.trace, sel)], f"where {selector_text(sel)}")
        )
    return out


def group_by_label(rows: Sequence[Connection], key: str) -> dict[str, list[Connection]]:
    """The connections per value of label ``key`` (``compare --by``, ``baseline save --by``); those
    without it are dropped."""
    groups: dict[str, list[Connection]] = {}
    for r in rows:
        if (v := label_value(r.trace, key)) is not None:
            groups.setdefault(v, []).append(r)
    return groups


def sets_by_label(data: TraceSet, key: str, *, order: Sequence[str] | None = None) -> list[TraceSet]:
    """One set per value of label ``key`` (sorted, or in ``order``); connections without it are dropped."""
    groups = group_by_label(data.rows, key)
    if not groups:
        raise InputError(
            f"no trace has label {key!r}; labels come from --label at parse time or the testbed's meta.json"
        )
    values = [v for v in (order or []) if v in groups] + sorted(v for v in groups if v not in (order or []))
    return [data.subset(f"{key}={v}", groups[v], f"by {key}") for v in values]


def build_sets(
    inputs: Sequence[str],
    *,
    names: Sequence[str] = (),
    where: Sequence[Selector] = (),
    vs: Sequence[Selector] = (),
    by: str | None = None,
    order: Sequence[str] | None = None,
    view: StateView = StateView(),
    metrics: bool = False,
    dask: str | None = None,
    strict: bool = False,
    progress: bool = False,
    storage_options: dict[str, str] | None = None,
) -> list[TraceSet]:
    """Read the trace sets ``quicsm compare`` compares: one connection row each, every input read once.

    Parameters
    ----------
    inputs : sequence of str or path-like
        One set each (a file, quoted glob or directory); or, with ``vs`` or ``by``, one dataset to split.
    names : sequence of str
        The sets' names, in order (default: each input's last path part).
    where : sequence of dict of str to str
        Without ``vs``: keep only matching connections in every set. With ``vs``: selects the first set.
    vs : sequence of dict of str to str
        One more set per selector, selected from the dataset.
    by : str, optional
        One set per value of this label (or ``cc``, ``implementation``, ``version``).
    order : sequence of str, optional
        The ``by`` values first in this order (the first is the baseline), the others sorted after.
    view : StateView
        How events become states; :func:`compare_sets` needs the same view in its options.
    metrics : bool
        Also read a Parquet store's metric columns (which connections have cwnd samples).
    dask, strict, progress, storage_options
        As :func:`quicsm.parse`.

    Returns
    -------
    list of TraceSet
        The sets, in order.

    Raises
    ------
    quicsm.errors.InputError
        Fewer than two sets, ``vs`` without ``where``, ``vs`` with ``by``, an unknown label, or an input
        without transitions.

    See Also
    --------
    compare_sets : the statistics of the sets.

    Examples
    --------
    >>> import quicsm
    >>> sets = quicsm.build_sets([TRACES / "fig13/desktop", TRACES / "fig13/mobile"])
    >>> [(s.name, len(s)) for s in sets]
    [('desktop', 11), ('mobile', 11)]
    >>> [s.name for s in quicsm.build_sets([TRACES / "fig13"], by="profile")]
    ['profile=desktop', 'profile=mobile']
    """

    def load(paths: list[str]) -> TraceSet:
        return load_rows(  # every caller below lists its paths first (expand_set)
            paths,
            view,
            metrics=metrics,
            dask=dask,
            strict=strict,
            progress=progress,
            storage_options=storage_options,
            listed=True,
        )

    combined = {k: v for sel in where for k, v in sel.items()}
    if vs and by:
        raise InputError("use either --vs (sets by selectors) or --by (one set per label value), not both")
    if vs or by:
        data = load([p for pat in inputs for p in expand_set(pat, storage_options)])
        if by:
            if combined:
                data = data.subset(data.name, [r for r in data.rows if trace_matches(r.trace, combined)], data.origin)
            return sets_by_label(data, by, order=order)
        if not combined:
            raise InputError("--vs needs --where for the first set (e.g. --where client=desktop --vs client=mobile)")
        return sets_from_selectors(data, [combined, *vs], names=list(names) or None)
    if len(inputs) < 2:
        raise InputError(
            "give two or more sets (files, quoted globs or directories), or one dataset with --where/--vs or --by"
        )
    return sets_from_inputs(
        inputs, names=list(names) or None, where=combined or None, load=load, storage_options=storage_options
    )
