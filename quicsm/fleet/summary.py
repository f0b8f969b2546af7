"""A trace set reduced to what inference and annotation need: distinct state sequences with counts.

Engines (Synoptic, k-Tails, DFG) depend only on the set of distinct sequences, and identical sequences
always take the same path through a model, so counts and per-position stay times are enough for the
time shares and edge probabilities of the annotated model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from quicsm.traces.events import StateView, Trace
from quicsm.traces.report import ParseReport

if TYPE_CHECKING:  # imported (with NumPy) when sequences are first packed: ``parse --help`` stays light
    from quicsm.traces.distinct import PackedSequences

__all__ = ["SequenceStats", "Summary", "summarize_traces", "merge_reports"]


@dataclass(slots=True)
class SequenceStats:
    """How often one distinct state sequence occurred, and the time spent at each of its positions."""

    count: int = 0
    durations_us: list[int] = field(default_factory=list)
    """Sum over the occurrences of the stay at position i."""
    events: int = 0


@dataclass(slots=True)
class Summary:
    """Mergeable reduction of traces; sequence order is first appearance, so merging in input order is stable.

    Sequences live as arrays (:class:`~quicsm.traces.distinct.PackedSequences` over the label table
    :attr:`names`): batches from the columnar path are appended whole, single traces are buffered, and
    everything is folded into distinct sequences when read (:meth:`packed`), so neither a fleet's
    connections nor a Dask transfer cost a Python object per sequence.
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
    ccs: set[str] = field(default_factory=set)
    report: ParseReport = field(default_factory=ParseReport)
    names: list[str] = field(default_factory=list)
    """Label table of the sequences' codes."""
    _index: dict[str, int] = field(default_factory=dict, repr=False)
    _done: PackedSequences | None = field(default=None, repr=False)
    _parts: list[PackedSequences] = field(default_factory=list, repr=False)
    _buf: tuple[list[int], list[int], list[int], list[int]] = field(
        default_factory=lambda: ([], [], [], []), repr=False
    )
    """Single traces not yet packed: codes, lengths, stays, events."""
    _last_meta: tuple[object, ...] | None = field(default=None, repr=False, compare=False)

    def add(self, trace: Trace) -> None:
        stays = trace.visits(self.view)
        has_transition = any(True for _ in trace.transitions())
        self.count_sequence([v.state for v in stays], [v.duration_us for v in stays], len(trace.events), has_transition)
        self.note_metadata(trace)

    def count_sequence(self, key: Sequence[str], durations: list[int], events: int, has_transition: bool) -> None:
        """One trace already reduced to its stays (its metadata is noted apart: :meth:`note_metadata`)."""
        codes, lengths, stays, event_counts = self._buf
        codes.extend(self._code(s) for s in key)
        lengths.append(len(key))
        stays.extend(durations)
        event_counts.append(events)
        self.traces += 1
        if has_transition:
            self.transitions = True

    def add_packed(self, names: list[str], seqs: PackedSequences, has_transition: bool) -> None:
        """Add a batch of traces (one per sequence of ``seqs``, codes into ``names``) in one step."""
        if has_transition:
            self.transitions = True
        self.traces += int(seqs.counts.sum())
        self._append(names, seqs)

    def note_metadata(self, trace: Trace) -> None:
        """Sources, cc, implementation, version and common labels of a trace counted in this summary."""
        seen = (trace.sources, trace.cc, trace.implementation, trace.version, tuple(trace.labels.items()))
        if seen == self._last_meta:  # traces of one file mostly share their metadata
            return
        self._last_meta = seen
        for src in trace.sources:
            self.sources.setdefault(src)
        for k, vals in self.values.items():
            value = getattr(trace, k)
            if value:
                vals.add(str(value))
        self.ccs.add(trace.cc)
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

    def packed(self) -> PackedSequences:
        """The distinct sequences (first-appearance order), folding in whatever was added since."""
        import numpy as np

        from quicsm.traces.distinct import PackedSequences, distinct

        if self._done is None:
            self._done = PackedSequences.empty()
        codes, lengths, stays, events = self._buf
        if lengths:
            offsets = np.zeros(len(lengths) + 1, np.int64)
            np.cumsum(lengths, out=offsets[1:])
            n = len(lengths)
            self._parts.append(
                PackedSequences.build(
                    self.names,
                    np.asarray(codes, np.int64),
                    offsets,
                    np.ones(n, np.int64),
                    np.asarray(events, np.int64),
                    np.asarray(stays, np.int64),
                )
            )
            self._buf = ([], [], [], [])
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
        if other.traces:
            self._labels(other.common_labels)
        merge_reports(self.report, other.report)

    def describe(self) -> dict[str, object]:
        """The legend metadata of :func:`quicsm.pipeline.describe_traces`, from the summary."""
        meta: dict[str, object] = {}
        for k in ("cc", "implementation", "version"):
            if self.values[k]:
                meta[k] = ", ".join(sorted(self.values[k]))
        if self.traces and self.common_labels:
            meta["labels"] = dict(self.common_labels)
        return meta


def merge_reports(into: ParseReport, other: ParseReport) -> None:
    """Add ``other``'s totals and first issues to ``into`` (issues in input order, up to ``keep``)."""
    into.files += other.files
    into.bytes += other.bytes
    into.lines += other.lines
    into.records += other.records
    into.traces += other.traces
    into.issue_counts.update(other.issue_counts)
    room = into.keep - len(into.issues)
    if room > 0:
        into.issues.extend(other.issues[:room])


def summarize_traces(traces: Iterable[Trace], view: StateView = StateView()) -> Summary:
    """Reduce traces (skipping empty ones, as :func:`quicsm.traces.parse_inputs` does) to a summary."""
    s = Summary(view=view)
    for t in traces:
        if t.events:
            s.add(t)
    return s
