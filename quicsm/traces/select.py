"""Trace selectors (``--where client=desktop,cc=cubic``): which traces a verb keeps or a set holds.

They live with the traces, not with ``compare``, so ``parse``/``infer``/``diagram`` can filter without
importing the statistics stack (scipy).
"""

from __future__ import annotations

from quicsm.errors import InputError
from quicsm.traces.events import Trace

__all__ = ["Selector", "label_value", "parse_selector", "selector_text", "trace_matches"]

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
