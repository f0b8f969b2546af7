"""A trace set reduced to what inference and annotation need: distinct state sequences with counts.

Engines (Synoptic, k-Tails, DFG) depend only on the set of distinct sequences, and identical sequences
always take the same path through a model, so counts and per-position stay times are enough for the
time shares and edge probabilities of the annotated model.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from quicsm.traces.events import StateView, Trace
from quicsm.traces.report import ParseReport

__all__ = ["SequenceStats", "Summary", "summarize_traces", "merge_reports"]


@dataclass(slots=True)
class SequenceStats:
    """How often one distinct state sequence occurred, and the time spent at each of its positions."""

    count: int = 0
    durations_us: list[int] = field(default_factory=list)
    """Sum over the occurrences of the stay at position i."""
    events: int = 0

    def add(self, durations: list[int], events: int) -> None:
        """Count one more occurrence; a first ``durations`` list is kept, not copied."""
        if not self.durations_us:
            self.durations_us = durations
        else:
            self.durations_us = [a + b for a, b in zip(self.durations_us, durations)]
        self.count += 1
        self.events += events

    def merge(self, other: SequenceStats) -> None:
        if not self.durations_us:
            self.durations_us = list(other.durations_us)
        else:
            self.durations_us = [a + b for a, b in zip(self.durations_us, other.durations_us)]
        self.count += other.count
        self.events += other.events


@dataclass(slots=True)
class Summary:
    """Mergeable reduction of traces; sequence order is first appearance, so merging in input order is stable."""

    view: StateView = field(default_factory=StateView)
    sequences: dict[tuple[str, ...], SequenceStats] = field(default_factory=dict)
    traces: int = 0
    transitions: bool = False
    sources: list[str] = field(default_factory=list)
    values: dict[str, set[str]] = field(
        default_factory=lambda: {"cc": set(), "implementation": set(), "version": set()}
    )
    common_labels: dict[str, str] | None = None
    """Labels shared by every trace (None before the first trace)."""
    ccs: set[str] = field(default_factory=set)
    report: ParseReport = field(default_factory=ParseReport)
    _last_meta: tuple[object, ...] | None = field(default=None, repr=False, compare=False)

    def add(self, trace: Trace) -> None:
        stays = trace.visits(self.view)
        has_transition = any(True for _ in trace.transitions())
        self.add_sequence(
            trace, tuple(v.state for v in stays), [v.duration_us for v in stays], len(trace.events), has_transition
        )

    def add_sequence(
        self, trace: Trace, key: tuple[str, ...], durations: list[int], events: int, has_transition: bool
    ) -> None:
        """Add one trace already reduced to its stays; ``trace`` gives the metadata (its events are not read)."""
        self.count_sequence(key, durations, events, has_transition)
        self.note_metadata(trace)

    def count_sequence(self, key: tuple[str, ...], durations: list[int], events: int, has_transition: bool) -> None:
        """The sequence half of :meth:`add_sequence`: callers that know a batch's traces share metadata
        note it once (:meth:`note_metadata`) instead of building a trace shell per trace."""
        stats = self.sequences.get(key)
        if stats is None:
            stats = self.sequences[key] = SequenceStats()
        stats.add(durations, events)
        self.traces += 1
        if has_transition:
            self.transitions = True

    def note_metadata(self, trace: Trace) -> None:
        """Sources, cc, implementation, version and common labels of a trace counted in this summary."""
        seen = (trace.sources, trace.cc, trace.implementation, trace.version, tuple(trace.labels.items()))
        if seen == self._last_meta:  # traces of one file mostly share their metadata
            return
        self._last_meta = seen
        for src in trace.sources:
            if src not in self.sources:
                self.sources.append(src)
        for k, vals in self.values.items():
            value = getattr(trace, k)
            if value:
                vals.add(str(value))
        self.ccs.add(trace.cc)
        self._labels(dict(trace.labels))

    def _labels(self, labels: dict[str, str] | None) -> None:
        if labels is None:
            return
        if self.common_labels is None:
            self.common_labels = dict(labels)
        else:
            self.common_labels = {k: v for k, v in self.common_labels.items() if labels.get(k) == v}

    @property
    def events(self) -> int:
        return sum(s.events for s in self.sequences.values())

    def merge(self, other: Summary) -> None:
        """Add ``other`` (a later input) to this summary."""
        for key, stats in other.sequences.items():
            mine = self.sequences.get(key)
            if mine is None:
                self.sequences[key] = SequenceStats(stats.count, list(stats.durations_us), stats.events)
            else:
                mine.merge(stats)
        self.traces += other.traces
        self.transitions = self.transitions or other.transitions
        for src in other.sources:
            if src not in self.sources:
                self.sources.append(src)
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
