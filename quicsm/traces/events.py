"""Trace events and traces: the normalized form every input becomes.

A :class:`TraceEvent` is one record of one connection (a state transition, an attribute update, a
metrics sample, or the close). A :class:`Trace` is one connection's events in time order with the
metadata a comparison needs (where it came from, which stack and version, free labels).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from quicsm.traces.states import INIT, split_state

__all__ = [
    "SSTHRESH_INF",
    "EVENT_KINDS",
    "TraceEvent",
    "Trace",
    "StateView",
    "Visit",
    "METRIC_FIELDS",
    "TraceMeta",
]

SSTHRESH_INF = (1 << 63) - 1
"""Stored value of an infinite slow-start threshold (``ssthresh=inf`` in the log contract)."""

EVENT_KINDS = ("transition", "update", "metrics", "close")

METRIC_FIELDS = ("cwnd", "inflight", "ssthresh", "pacing_bps", "bw_bps", "min_rtt_us", "srtt_us")


class TraceEvent(NamedTuple):
    """One event of one connection (a named tuple: cheap to build by the million, immutable)."""

    t_us: int
    """Microseconds on the connection's clock (only differences within a trace matter)."""
    state: str
    """Canonical state the connection is in after the event (``State`` or ``State.Phase``)."""
    kind: str = "transition"
    """``transition``, ``update`` (attributes only), ``metrics`` (a sample) or ``close``."""
    prev: str | None = None
    """State left, when the emitter knew it."""
    cwnd: int | None = None
    inflight: int | None = None
    ssthresh: int | None = None
    """Bytes; :data:`SSTHRESH_INF` for infinite."""
    pacing_bps: int | None = None
    bw_bps: int | None = None
    min_rtt_us: int | None = None
    srtt_us: int | None = None
    recovery: str | None = None
    """BBR v1 recovery sub-state (NotInRecovery, Conservation, Growth)."""
    trigger: str | None = None
    extra: tuple[tuple[str, str], ...] = ()
    """Fields the contract does not name, kept in order."""


@dataclass(frozen=True, slots=True)
class TraceMeta:
    """What every trace of one input gets: stack, version, labels (command line and sidecar meta.json)."""

    implementation: str | None = None
    version: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    cc: str | None = None
    """Override for the congestion controller (for qlogs that don't name it)."""
    states: str = "auto"
    """Where a qlog's states come from: ``auto`` (its state events; inferred from its metrics when it has
    none), ``logged`` (state events only) or ``metrics`` (always inferred, state events ignored)."""

    def apply(self, t: Trace) -> Trace:
        """``t`` with this metadata over its own (a trace file's traces read with a sidecar or labels)."""
        if not (self.labels or self.implementation or self.version or self.cc):
            return t
        return replace(
            t,
            labels={**t.labels, **self.labels},
            implementation=self.implementation or t.implementation,
            version=self.version or t.version,
            cc=self.cc or t.cc,
        )


@dataclass(frozen=True, slots=True)
class StateView:
    """How events become states: with or without PROBE_BW phases, with or without BBR recovery.

    Attributes
    ----------
    phases : bool
        Keep BBR's PROBE_BW phases as states of their own (``ProbeBw.Up``), or fold them (``ProbeBw``).
    recovery : bool
        Make BBR v1's recovery sub-state part of the state (``ProbeBw/Conservation``).

    Examples
    --------
    >>> from quicsm import StateView
    >>> from quicsm.traces.events import TraceEvent
    >>> e = TraceEvent(0, "ProbeBw.Up", recovery="Conservation")
    >>> StateView().label(e), StateView(phases=False).label(e), StateView(recovery=True).label(e)
    ('ProbeBw.Up', 'ProbeBw', 'ProbeBw.Up/Conservation')
    """

    phases: bool = True
    recovery: bool = False

    def label(self, event: TraceEvent) -> str:
        state, phase = split_state(event.state)
        name = f"{state}.{phase}" if (phase and self.phases) else state
        if self.recovery and event.recovery and event.recovery != "NotInRecovery":
            name = f"{name}/{event.recovery}"
        return name


@dataclass(frozen=True, slots=True)
class Visit:
    """A stay in one state: entered at ``start_us``, left at ``end_us``."""

    state: str
    start_us: int
    end_us: int

    @property
    def duration_us(self) -> int:
        return self.end_us - self.start_us


@dataclass(slots=True)
class Trace:
    """One connection's events in time order, and where they came from.

    Attributes
    ----------
    id : str
        Unique over a run: the file's scope and the connection key (``desktop-00/server.log.gz:0x22920a166480``).
    cc : str
        The congestion controller.
    events : list of TraceEvent
        Transitions, updates, metric samples and the close, in time order.
    key : str
        The connection key as logged.
    implementation, version : str or None
        The stack and its version.
    sources : tuple of str
        The files the trace came from.
    labels : dict of str to str
        Free labels (``--label``, the testbed's ``meta.json``).

    Examples
    --------
    >>> import quicsm
    >>> t = quicsm.parse([TRACES / "fig13/desktop"]).traces[0]
    >>> t.cc, t.implementation, t.events[0].state, t.events[0].prev
    ('reno', 'quic-go', 'SlowStart', 'Init')
    >>> t.states()[:3]
    ['SlowStart', 'ApplicationLimited', 'SlowStart']
    """

    id: str
    cc: str
    events: list[TraceEvent]
    key: str = ""
    implementation: str | None = None
    version: str | None = None
    sources: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def start_us(self) -> int:
        return self.events[0].t_us if self.events else 0

    @property
    def end_us(self) -> int:
        """The close time if the connection logged one, else its last event of any kind."""
        return max((e.t_us for e in self.events), default=0)

    @property
    def duration_us(self) -> int:
        return self.end_us - self.start_us

    def transitions(self) -> Iterator[TraceEvent]:
        return (e for e in self.events if e.kind == "transition")

    def visits(self, view: StateView = StateView()) -> list[Visit]:
        """The states the connection went through, repeats folded, each with its stay.

        The first state is the ``from`` of the first transition when the emitter gave one other than
        ``Init`` (a changes-only logger's first ``old``), else the first state entered: ``Init`` is the
        contract's start marker (a patched sender's ``from=Init`` first line, the qlog readers' first
        ``from``), which the model's INITIAL node stands for, and the ``from`` of a ``to=Init`` reset
        belongs to the connection before. The last stay lasts until :attr:`end_us`.
        """
        import numpy as np

        from quicsm.traces.visits import stays

        made = [e for e in self.events if e.kind in ("transition", "update")]
        labels: dict[str, int] = {}
        names: dict[str | None, int] = {None: -1, "": -1, INIT: -2}  # "" names no state
        label = np.fromiter((labels.setdefault(view.label(e), len(labels)) for e in made), np.int64, len(made))

        def from_labels(where: np.ndarray) -> np.ndarray:
            firsts = (made[i] for i in where.tolist())
            got = [
                labels.setdefault(view.label(TraceEvent(e.t_us, e.prev or "", recovery=e.recovery)), len(labels))
                for e in firsts
            ]
            return np.asarray(got, np.int64)

        st = stays(
            np.zeros(len(made), np.int64),
            np.fromiter((e.t_us for e in made), np.int64, len(made)),
            label,
            np.fromiter((e.kind == "transition" for e in made), bool, len(made)),
            np.fromiter((names.setdefault(e.prev, len(names)) for e in made), np.int64, len(made)),
            np.fromiter((names.setdefault(e.state, len(names)) for e in made), np.int64, len(made)),
            -2,
            np.asarray([self.end_us], np.int64),
            from_labels,
        )
        text = list(labels)
        return [Visit(text[c], a, b) for c, a, b in zip(st.label.tolist(), st.start_us.tolist(), st.stop_us.tolist())]

    def states(self, view: StateView = StateView()) -> list[str]:
        """The state sequence the inference engines learn from."""
        return [v.state for v in self.visits(view)]

    def metadata(self) -> dict[str, object]:
        """Everything but the events, as plain JSON-able values."""
        return {
            "id": self.id,
            "key": self.key,
            "cc": self.cc,
            "implementation": self.implementation,
            "version": self.version,
            "sources": list(self.sources),
            "labels": dict(self.labels),
        }
