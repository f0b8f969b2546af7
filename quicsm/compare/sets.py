"""Trace sets to compare: one per file/glob/directory argument, or selected from one dataset by labels.

``quicsm compare A B`` makes one set per argument; ``--where client=desktop --vs client=mobile``
selects sets from one dataset; ``--by client`` makes one set per value of a label.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from quicsm.errors import InputError
from quicsm.traces import parse_inputs
from quicsm.traces.events import Trace
from quicsm.traces.parse import expand_input
from quicsm.traces.select import Selector, label_value, parse_selector, selector_text, trace_matches

__all__ = [
    "Selector",
    "TraceSet",
    "expand_inputs",
    "label_value",
    "parse_selector",
    "selector_text",
    "sets_by_label",
    "sets_from_inputs",
    "sets_from_selectors",
    "trace_matches",
]

expand_inputs = expand_input
"""One set argument -> its files: the same expansion every verb uses (:func:`quicsm.traces.parse.expand_input`)."""


@dataclass(frozen=True, slots=True)
class TraceSet:
    """A named group of connections; ``origin`` says how it was chosen (shown in reports)."""

    name: str
    traces: tuple[Trace, ...]
    origin: str = ""
    sources: tuple[str, ...] = field(default=())

    def __len__(self) -> int:
        return len(self.traces)

    def controllers(self) -> list[str]:
        return sorted({t.cc for t in self.traces if t.cc})


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


Loader = Callable[[list[str]], list[Trace]]


def _load(paths: list[str], labels: Selector | None = None) -> list[Trace]:
    return parse_inputs(paths, labels=labels or None).traces


def sets_from_inputs(
    patterns: Sequence[str],
    *,
    names: Sequence[str] | None = None,
    where: Selector | None = None,
    load: Loader | None = None,
) -> list[TraceSet]:
    """One set per argument (file, glob or directory); ``where`` filters every set."""
    load = load or _load
    out: list[TraceSet] = []
    taken: set[str] = set()
    for i, pat in enumerate(patterns):
        name = names[i] if names and i < len(names) else _default_name(pat, taken)
        taken.add(name)
        paths = expand_inputs(pat)
        traces = load(paths)
        if where:
            traces = [t for t in traces if trace_matches(t, where)]
        origin = pat + (f" where {selector_text(where)}" if where else "")
        out.append(TraceSet(name, tuple(traces), origin, tuple(paths)))
    return out


def sets_from_selectors(
    traces: Iterable[Trace], selectors: Sequence[Selector], *, names: Sequence[str] | None = None
) -> list[TraceSet]:
    """One set per selector over a single dataset; a trace may fall in several sets."""
    pool = list(traces)
    out = []
    for i, sel in enumerate(selectors):
        name = names[i] if names and i < len(names) else selector_text(sel)
        chosen = tuple(t for t in pool if trace_matches(t, sel))
        out.append(
            TraceSet(name, chosen, f"where {selector_text(sel)}", tuple(sorted({s for t in chosen for s in t.sources})))
        )
    return out


def sets_by_label(traces: Iterable[Trace], key: str, *, order: Sequence[str] | None = None) -> list[TraceSet]:
    """One set per value of label ``key`` (sorted, or in ``order``); traces without it are dropped."""
    groups: dict[str, list[Trace]] = {}
    for t in traces:
        v = label_value(t, key)
        if v is not None:
            groups.setdefault(v, []).append(t)
    if not groups:
        raise InputError(
            f"no trace has label {key!r}; labels come from --label at parse time or the testbed's meta.json"
        )
    values = [v for v in (order or []) if v in groups] + sorted(v for v in groups if v not in (order or []))
    return [
        TraceSet(f"{key}={v}", tuple(groups[v]), f"by {key}", tuple(sorted({s for t in groups[v] for s in t.sources})))
        for v in values
    ]
