"""Trace selectors (``--where client=desktop,cc=cubic``): which traces a verb keeps or a set holds.

They live with the traces, not with ``compare``, so ``parse``/``infer``/``diagram`` can filter without
importing the statistics stack (scipy).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from quicsm.errors import InputError
from quicsm.traces.events import Trace

if TYPE_CHECKING:
    from quicsm.traces.columnar import TraceColumns
    from quicsm.traces.parquet import GroupAhead

__all__ = ["Kept", "Selector", "keep_traces", "label_value", "parse_selector", "selector_text", "trace_matches"]

Selector = dict[str, str]
"""``{"client": "desktop"}``: every key must match (labels, or ``cc``/``implementation``/``version``)."""

_ATTRS = ("cc", "implementation", "version")


def parse_selector(text: str) -> Selector:
    """``"client=desktop,cc=cubic"`` -> ``{"client": "desktop", "cc": "cubic"}``."""
    out: Selector = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise InputError(f"selector {text!r}: {part!r} is not KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def selector_text(sel: Selector) -> str:
    return ",".join(f"{k}={v}" for k, v in sel.items())


def label_value(trace: Trace, key: str) -> str | None:
    """A label's value, or the trace attribute ``cc``/``implementation``/``version``."""
    if key in _ATTRS:
        v = getattr(trace, key)
        return None if v is None else str(v)
    return trace.labels.get(key)


def trace_matches(trace: Trace, sel: Selector) -> bool:
    return all(label_value(trace, k) == v for k, v in sel.items())


@dataclass(slots=True)
class Kept:
    """What :func:`keep_traces` let through: whether any input trace had a transition (looked for
    before ``--where``, as every verb does), how many traces were kept, and their controllers."""

    transitions: bool = False
    kept: int = 0
    ccs: set[str] = field(default_factory=set)

    def merge(self, other: Kept) -> None:
        self.transitions = self.transitions or other.transitions
        self.kept += other.kept
        self.ccs |= other.ccs


def keep_traces(
    items: Iterable[TraceColumns | GroupAhead], where: Selector | None, tally: Kept
) -> Iterator[TraceColumns | GroupAhead]:
    """The traces of each batch that match ``where``, counted in ``tally`` (row groups sent ahead of their
    batch, :class:`~quicsm.traces.parquet.GroupAhead`, pass: their traces are counted with it)."""
    from quicsm.traces.columnar import TraceColumns  # (imported already by whoever made the batches)

    for item in items:
        if not isinstance(item, TraceColumns):
            tally.transitions = tally.transitions or item.transitions
            yield item
            continue
        tally.transitions = tally.transitions or bool((item.events.kind == 0).any())
        if where:
            item = item.select([trace_matches(item.shell(i), where) for i in range(len(item))])
        tally.ccs.update(item.ccs)
        tally.kept += len(item)
        yield item
        del item  # not held while the next batch is read
