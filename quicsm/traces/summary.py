"""A trace set reduced to what inference and annotation need: distinct state sequences with counts.

:func:`summarize` is the fold every ``infer`` and ``diagram`` runs: inputs read here (files pooled
into shared batches) or as Dask tasks of many files each, whose summaries merge in a tree, in order.

Engines (Synoptic, k-Tails, DFG) depend only on the set of distinct sequences, and identical sequences
always take the same path through a model, so counts and per-position stay times are enough for the
time shares and edge probabilities of the annotated model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from quicsm.traces.events import StateView, Trace
from quicsm.traces.inputs import AUTO
from quicsm.traces.parse import (
    TASK_IMPORTS,
    Overrides,
    no_match,
    no_transitions,
    progress_bar,
    read_batch,
    read_inputs,
)
from quicsm.traces.report import ParseReport
from quicsm.traces.select import Selector, trace_matches

if TYPE_CHECKING:  # imported (with NumPy) when sequences are first packed: ``parse --help`` stays light
    from quicsm.traces.columnar import TraceColumns
    from quicsm.traces.distinct import PackedSequences
    from quicsm.traces.inputs import FileBatch

__all__ = ["SequenceStats", "Summary", "fold", "summarize", "summarize_traces"]


FOLD_EVERY = 1 << 16
"""Sequences added (one a trace) before they are folded into the distinct ones: memory holds the
distinct sequences and at most this many more, not one sequence a trace of the run (10^6 traces of
~1 KB files: about 120 MB, and twice that while folding at the end)."""


@dataclass(slots=True)
class SequenceStats:
    """How often one distinct state sequence occurred, and the time spent at each of its positions."""

    count: int = 0
    durations_us: list[int] = field(default_factory=list)
    """Sum over the occurrences of the stay at position i."""
    events: int = 0


@dataclass(slots=True)
class Summary:
    """Traces reduced to what inference and annotation need: distinct state sequences with counts.

    Mergeable: sequence order is first appearance, so merging in input order is stable. Sequences live as arrays (:class:`~quicsm.traces.distinct.PackedSequences` over the label table
    :attr:`names`): batches are appended whole, and
    everything is folded into distinct sequences when read (:meth:`packed`), so neither a fleet's
    connections nor a Dask transfer cost a Python object per sequence.

    Attributes
    ----------
    view : StateView
        How the traces' events became states.
    traces : int
        Traces folded.
    transitions : bool
        Whether any trace had a state transition.
    sources : dict of str to None
        The input files, in order.
    ccs : set of str
        The congestion controllers met.
    report : ParseReport
        What reading the inputs met.

    Examples
    --------
    >>> import quicsm
    >>> s = quicsm.summarize([TRACES / "fig13/mobile"])
    >>> seqs = s.sequences  # distinct sequence -> its count, summed stays and events
    >>> sum(st.count for st in seqs.values()) == s.traces == 11
    True
    >>> s.describe()["cc"], s.describe()["labels"]["profile"]
    ('reno', 'mobile')
    """

    view: StateView = field(default_factory=StateView)
    traces: int = 0
    transitions: bool = False
    sources: dict[str, None] = field(default_factory=dict)
    """The input files, in order (a dictionary: a fleet's 10^6 files are looked up, not searched)."""
    values: dict[str, set[str]] = field(
        default_factory=lambda: {"cc": set(), "implementation": set(), "version": set()}
    )
    common_labels: dict[str, str] | None = None
    """Labels shared by every trace (None before the first trace)."""
    state_origins: set[str] = field(default_factory=set)
    """Where the traces' states came from: ``logged``, and the ``states`` label of traces whose states were
    inferred (:mod:`quicsm.traces.metric_states`), so a model never hides that it was read from metrics."""
    ccs: set[str] = field(default_factory=set)
    report: ParseReport = field(default_factory=ParseReport)
    names: list[str] = field(default_factory=list)
    """Label table of the sequences' codes."""
    _index: dict[str, int] = field(default_factory=dict, repr=False)
    _done: PackedSequences | None = field(default=None, repr=False)
    _parts: list[PackedSequences] = field(default_factory=list, repr=False)
    _last_meta: tuple[object, ...] | None = field(default=None, repr=False, compare=False)

    def add_packed(self, names: list[str], seqs: PackedSequences, has_transition: bool) -> None:
        """Add a batch of traces (one per sequence of ``seqs``, codes into ``names``) in one step."""
        if has_transition:
            self.transitions = True
        self.traces += int(seqs.counts.sum())
        self._append(names, seqs)

    def note_metadata(self, trace: Trace) -> None:
        """Sources, cc, implementation, version and common labels of a trace counted in this summary."""
        for src in trace.sources:
            self.sources.setdefault(src)
        seen = (trace.cc, trace.implementation, trace.version, tuple(trace.labels.items()))
        if seen == self._last_meta:  # traces mostly share their metadata but the file (one a file: qlogs)
            return
        self._last_meta = seen
        for k, vals in self.values.items():
            value = getattr(trace, k)
            if value:
                vals.add(str(value))
        self.ccs.add(trace.cc)
        self.state_origins.add(trace.labels.get("states", "logged"))
        self._labels(dict(trace.labels))

    def _code(self, name: str) -> int:
        code = self._index.get(name)
        if code is None:
            code = self._index[name] = len(self.names)
            self.names.append(name)
        return code

    def _append(self, names: list[str], seqs: PackedSequences) -> None:
        """Queue ``seqs`` (codes into ``names``) for the next fold, recoded into this summary's table."""
        import numpy as np

        if len(seqs):
            self._parts.append(seqs.relabel(np.asarray([self._code(n) for n in names], np.int64)))
            if sum(len(p) for p in self._parts) >= FOLD_EVERY:  # a run of 10^6 traces holds its distinct few
                self.packed()

    def packed(self) -> PackedSequences:
        """The distinct sequences (first-appearance order), folding in whatever was added since."""

        from quicsm.traces.distinct import PackedSequences, distinct

        if self._done is None:
            self._done = PackedSequences.empty()
        if self._parts:
            parts = [self._done, *self._parts]  # the only references: concat frees each part once copied
            self._parts, self._done = [], None
            self._done = distinct(PackedSequences.concat(parts))
        assert self._done is not None
        return self._done

    @property
    def sequences(self) -> dict[tuple[str, ...], SequenceStats]:
        """The distinct sequences as a dictionary (a copy: for reading and tests, not the hot path)."""
        p = self.packed()
        bounds = p.offsets.tolist()
        codes, stays = p.codes.tolist(), p.durations_us.tolist()
        return {
            tuple(self.names[c] for c in codes[bounds[i] : bounds[i + 1]]): SequenceStats(
                count, stays[bounds[i] : bounds[i + 1]], events
            )
            for i, (count, events) in enumerate(zip(p.counts.tolist(), p.events.tolist()))
        }

    def _labels(self, labels: dict[str, str] | None) -> None:
        if labels is None:
            return
        if self.common_labels is None:
            self.common_labels = dict(labels)
        else:
            self.common_labels = {k: v for k, v in self.common_labels.items() if labels.get(k) == v}

    @property
    def events(self) -> int:
        return int(self.packed().events.sum())

    def merge(self, other: Summary) -> None:
        """Add ``other`` (a later input) to this summary."""
        self._append(other.names, other.packed())
        self.traces += other.traces
        self.transitions = self.transitions or other.transitions
        for src in other.sources:
            self.sources.setdefault(src)
        for k, vals in other.values.items():
            self.values[k] |= vals
        self.ccs |= other.ccs
        self.state_origins |= other.state_origins
        if other.traces:
            self._labels(other.common_labels)
        self.report.merge(other.report)

    def describe(self) -> dict[str, object]:
        """The legend metadata of :func:`quicsm.pipeline.describe_traces`, from the summary."""
        meta: dict[str, object] = {}
        for k in ("cc", "implementation", "version"):
            if self.values[k]:
                meta[k] = ", ".join(sorted(self.values[k]))
        if self.traces and self.common_labels:
            meta["labels"] = dict(self.common_labels)
        inferred = sorted(self.state_origins - {"logged"})
        if inferred:
            mixed = "logged" in self.state_origins
            meta["states"] = (
                ("logged and " if mixed else "") + ", ".join(inferred) + (" (mixed inputs)" if mixed else "")
            )
        return meta


def summarize_traces(traces: Iterable[Trace], view: StateView = StateView()) -> Summary:
    """Reduce trace objects (empty ones skipped, as :func:`quicsm.traces.parse_inputs` skips them) to a
    summary: :func:`fold` of their columns."""
    from quicsm.traces.columnar import columns_of

    return fold([columns_of(list(traces))], Summary(view=view))


def fold(items: Iterable[TraceColumns], s: Summary, where: Selector | None = None) -> Summary:
    """Batches of traces into ``s``; ``where`` keeps only matching ones (transitions are looked for
    before it, as every verb does). Python work per trace only for ``where``."""
    import numpy as np

    from quicsm.traces.columnar import stay_arrays

    def one(item: TraceColumns) -> None:
        stays = stay_arrays(item, s.view)
        if where:
            shells = [item.shell(i) for i in range(len(item))]
            keep = np.fromiter((trace_matches(t, where) for t in shells), bool, len(shells))
            s.add_packed(stays.names, stays.seqs.take(keep), bool(stays.has_transition.any()))
            for shell in (t for t, k in zip(shells, keep.tolist()) if k):
                s.note_metadata(shell)
            return
        s.add_packed(stays.names, stays.seqs, bool(stays.has_transition.any()))
        for shell in item.distinct_shells():
            s.note_metadata(shell)

    for _ in map(one, items):  # not ``for item in``: it would hold a batch while the next is read
        pass
    return s


def summary_task(
    batch: FileBatch, *, view: StateView, over: Overrides, strict: bool, where: Selector | None
) -> Summary:
    """One Dask task: a batch of files reduced to a summary."""
    report = ParseReport(strict=strict)
    return fold(read_batch(batch, over, report, metrics=False), Summary(view=view, report=report), where)


def _merged(a: Summary, b: Summary) -> Summary:
    a.merge(b)
    return a


def summarize(
    inputs: Sequence[str],
    *,
    view: StateView = StateView(),
    labels: dict[str, str] | None = None,
    implementation: str | None = None,
    version: str | None = None,
    cc: str | None = None,
    strict: bool = False,
    where: Selector | None = None,
    dask: str | None = AUTO,
    progress: bool = False,
    require_transitions: bool = True,
    storage_options: dict[str, str] | None = None,
    states: str = "auto",
) -> Summary:
    """Read inputs and fold them into one :class:`Summary`: what ``infer`` and ``diagram`` learn from.

    No trace object is made per connection: text logs and stores are folded from their columns.

    Parameters
    ----------
    inputs : sequence of str or path-like
        What :func:`quicsm.parse` reads: logs, qlogs, trace files, quoted globs, directories, URLs, ``-``.
    view : StateView
        How events become states (PROBE_BW phases kept or folded, BBR recovery sub-states).
    labels, implementation, version, cc, strict, where, storage_options
        As :func:`quicsm.parse`.
    dask : str or None, default "auto"
        ``local[:N]`` or a scheduler address: batches of files (about 64 MB or 4,096 files) are
        folded as tasks and their summaries merged in a tree; the same summary as without. ``"off"``
        or None: one process. ``"auto"`` (``quicsm infer``'s and ``diagram``'s default too):
        ``local:2`` for 1,000 local files or more, or 1 GiB in 16 files or more, when a second core
        is usable and idle and no other thread runs (workers are forked), else one process
        (:func:`quicsm.traces.inputs.workers_for`); the workers it starts are shut down before it returns.
    progress : bool
        A progress bar on stderr.
    require_transitions : bool
        Refuse inputs without a single state transition.

    Returns
    -------
    Summary
        The distinct state sequences with their counts and stays, the metadata the traces share, and
        the parse report.

    Raises
    ------
    quicsm.errors.QuicsmError
        As :func:`quicsm.parse`.

    See Also
    --------
    learn : the model of a summary.

    Examples
    --------
    >>> import quicsm
    >>> s = quicsm.summarize([TRACES / "fig13/desktop"])
    >>> s.traces, len(s.packed()), sorted(s.ccs)
    (11, 9, ['reno'])
    >>> quicsm.summarize([TRACES / "fig13"], where={"profile": "mobile"}).traces
    11
    >>> quicsm.summarize([TRACES / "fig13/desktop"], dask="off").sequences == s.sequences  # "auto": one process
    True
    """
    from quicsm.fleet.run import map_tasks, tree_merge
    from quicsm.traces.inputs import expand_inputs, file_batches, show_batches, trace_scopes, workers

    over = Overrides(dict(labels or {}), implementation, version, cc, states)
    files = expand_inputs(inputs, storage_options)  # once: the worker choice, the scopes and the reads share it
    with workers(dask, files) as run_on:
        if not run_on:
            total = Summary(view=view, report=ParseReport(strict=strict))
            with progress_bar(files, progress) as on_bytes:
                items = read_inputs(
                    files,
                    over,
                    report=total.report,
                    on_bytes=on_bytes,
                    metrics=False,
                    scopes=trace_scopes(files),
                    storage_options=storage_options,
                )
                fold(items, total, where)
        else:
            batches = file_batches(files, dask=run_on, storage_options=storage_options)
            task = partial(summary_task, view=view, over=over, strict=strict, where=where)
            shown = show_batches("dask: reduced", batches) if progress else None
            parts = list(map_tasks(task, batches, dask=run_on, progress=shown, imports=TASK_IMPORTS))
            total = tree_merge(parts, _merged) or Summary(view=view, report=ParseReport(strict=strict))
    if require_transitions and not total.transitions:
        raise no_transitions(inputs, total.report)
    if where and not total.traces:
        raise no_match(where)
    return total
