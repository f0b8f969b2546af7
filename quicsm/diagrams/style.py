"""The look of the diagrams: colours per state family, number formats, label wrapping, pen widths.

Every number that reaches a DOT file goes through a formatter here, so the text is the same on every
run and machine (fixed decimals, no locale, no float ``repr``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from quicsm.traces.states import FAMILIES

__all__ = [
    "FamilyStyle",
    "FAMILY_STYLES",
    "family_style",
    "legend_states",
    "SHARE_COLOR",
    "EDGE_COLOR",
    "fmt_share",
    "fmt_prob",
    "fmt_num",
    "fmt_duration",
    "edge_penwidth",
    "mix",
    "shorten_state",
    "tooltip_state",
    "wrap_state",
    "MAX_SHOWN_NAME",
    "MAX_TOOLTIP_NAME",
    "MAX_LEGEND_STATES",
]

MAX_SHOWN_NAME = 48
"""Characters of a state name drawn in a node or the legend; a longer name (legal by the log contract, up
to its line length) shows its first and last 23 around an ellipsis. The tooltip and the model JSON keep
more (Graphviz refuses an HTML label over 16,384 characters)."""
MAX_TOOLTIP_NAME = 1000
"""Characters of a state name in a tooltip; the model JSON holds it whole."""
MAX_LEGEND_STATES = 12
"""States a legend row lists for one family before "and N more"."""

SHARE_COLOR = "#d40000"
"""The paper's red: time share of a state."""
EDGE_COLOR = "#1a1a1a"
"""The paper's black: edges and their probabilities."""


@dataclass(frozen=True, slots=True)
class FamilyStyle:
    """Fill and border of the nodes of one state family, and the legend's words for it."""

    fill: str
    border: str
    legend: str


FAMILY_STYLES: dict[str, FamilyStyle] = {
    "init": FamilyStyle("#eeeeee", "#777777", "initial"),
    "startup": FamilyStyle("#d6e9fb", "#2f6fad", "start-up"),
    "steady": FamilyStyle("#d9f2d0", "#3d8b2f", "steady"),
    "drain": FamilyStyle("#d4f1f1", "#2a8a8a", "drain"),
    "limited": FamilyStyle("#fff1c2", "#b38600", "application-limited"),
    "recovery": FamilyStyle("#fbdada", "#b03a3a", "recovery"),
    "timeout": FamilyStyle("#ead9f5", "#7b3fa6", "timeouts"),
    "probe_rtt": FamilyStyle("#f9e0c7", "#b86a1e", "RTT probe"),
    "terminal": FamilyStyle("#333333", "#333333", "start / end of a connection"),
    "other": FamilyStyle("#ffffff", "#555555", "other states"),
}
"""State family (``quicsm.traces.states.state_family``) -> style. Pastel fills keep red text readable. The
legend names each family by this word followed by the diagram's own states in it (:func:`legend_states`), so
a BBR2 diagram says ``start-up: Startup`` and a Cubic one ``start-up: SlowStart``."""

assert set(FAMILIES.values()) <= set(FAMILY_STYLES), "every state family needs a style"


def family_style(family: str) -> FamilyStyle:
    return FAMILY_STYLES.get(family, FAMILY_STYLES["other"])


def shorten_state(name: str) -> str:
    """``name`` as drawn: at most :data:`MAX_SHOWN_NAME` characters (head ... tail)."""
    if len(name) <= MAX_SHOWN_NAME:
        return name
    half = (MAX_SHOWN_NAME - 2) // 2
    return f"{name[:half]}\u2026{name[-half:]}"


def tooltip_state(name: str) -> str:
    """``name`` for a tooltip: whole up to :data:`MAX_TOOLTIP_NAME` characters, else cut with its length."""
    if len(name) <= MAX_TOOLTIP_NAME:
        return name
    return f"{name[:MAX_TOOLTIP_NAME]}\u2026 ({len(name):,} characters; whole in the model JSON)"


def legend_states(states: set[str] | frozenset[str]) -> str:
    """The states of one family as the legend lists them: phases of one state folded together, sorted
    (``{"ProbeBw.Up", "ProbeBw.Cruise", "ProbeBw"}`` -> ``ProbeBw, ProbeBw.Cruise/Up``), long names
    shortened, at most :data:`MAX_LEGEND_STATES` of them."""
    phases: dict[str, set[str]] = {}
    for s in states:
        base, dot, phase = s.partition(".")
        phases.setdefault(base, set())
        if dot:
            phases[base].add(phase)
    out = []
    for base in sorted(phases):
        whole = base in states
        if whole or not phases[base]:
            out.append(base)
        if phases[base]:
            out.append(f"{base}." + "/".join(sorted(phases[base])))
    more = len(out) - MAX_LEGEND_STATES
    shown = [shorten_state(x) for x in out[:MAX_LEGEND_STATES]]
    return ", ".join(shown) + (f", and {more:,} more" if more > 0 else "")


def fmt_num(x: float, decimals: int) -> str:
    """Fixed-point text of ``x``, never ``-0.00``."""
    text = f"{x:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def fmt_share(fraction: float) -> str:
    """Time share as the paper prints it: ``58.8%``; a share too small to show is ``<0.1%``, not 0."""
    if 0 < fraction < 0.0005:
        return "<0.1%"
    return fmt_num(100 * fraction, 1) + "%"


def fmt_prob(p: float, decimals: int = 2) -> str:
    """Edge probability: ``0.27``; a taken edge never reads 0 (the paper's rounded-down zeros): ``<0.01``."""
    smallest = 10.0**-decimals
    if 0 < p < smallest / 2:
        return "<" + fmt_num(smallest, decimals)
    return fmt_num(p, decimals)


def fmt_duration(us: int) -> str:
    """``12.345 s``, ``3.21 ms`` or ``17 us``: total time in states for the legend."""
    if us >= 1_000_000:
        return f"{us / 1e6:.3f} s"
    if us >= 1000:
        return f"{us / 1e3:.2f} ms"
    return f"{us} us"


def edge_penwidth(p: float, thin: float = 0.8, thick: float = 4.0) -> str:
    """Pen width grows with probability, so the likely paths stand out."""
    return fmt_num(thin + (thick - thin) * min(max(p, 0.0), 1.0), 2)


def mix(color: str, other: str, t: float) -> str:
    """``color`` moved a fraction ``t`` towards ``other`` (both ``#rrggbb``)."""
    t = min(max(t, 0.0), 1.0)
    a = [int(color[i : i + 2], 16) for i in (1, 3, 5)]
    b = [int(other[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(a, b))


_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z0-9]+|[A-Z]+|[^A-Za-z0-9]+")


def wrap_state(name: str, width: int = 14) -> list[str]:
    """Lines of a state name: long CamelCase names break between words, phases and sub-states go below.

    ``CongestionAvoidanceMaxed`` -> ``Congestion`` / ``AvoidanceMaxed``; ``ProbeBw.Refill/Growth`` ->
    ``ProbeBw`` / ``.Refill`` / ``/Growth``; names up to ``width`` characters stay on one line.
    """
    name = shorten_state(name)
    if len(name) <= width:
        return [name]
    lines: list[str] = []
    for i, part in enumerate(re.split(r"(?=[./])", name)):
        if not part:
            continue
        if len(part) <= width or i > 0:
            lines.append(part)
            continue
        line = ""
        for word in _CAMEL.findall(part):
            if line and len(line) + len(word) > width:
                lines.append(line)
                line = ""
            line += word
        lines.append(line)
    return lines or [name]
