"""External values drawn over a model: the diff diagram of a comparison.

A comparison (``quicsm.compare``) knows, per state and per transition, how much two trace sets differ
and whether that is significant; it passes those numbers here as an :class:`Overlay` and gets a
diagram where colour shows the direction, colour strength and pen width the size, and grey, thin,
dashed marks what is not significant. Keys are node ids or state names, so values computed on state
names apply to any engine's model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from quicsm.diagrams.style import fmt_num, mix

__all__ = ["Delta", "Overlay", "NodeKey", "EdgeKey"]

NodeKey = int | str
"""A node id (``int``) or a state name (``str``, applies to every node of that state)."""
EdgeKey = tuple[NodeKey, NodeKey]
"""``(src, dst)`` as node ids or state names."""


@dataclass(frozen=True, slots=True)
class Delta:
    """One value to draw on a node or an edge."""

    value: float
    """Signed size of the change (e.g. share in B minus share in A); > 0 uses ``Overlay.increase``."""
    significant: bool = True
    """False draws the element muted (grey, thin, dashed) whatever the value."""
    text: str | None = None
    """Extra label line (``+51.7 pp``, ``p<0.001``); default: the value with a sign and 2 decimals."""


@dataclass(frozen=True, slots=True)
class Overlay:
    """Values for nodes and edges and how to colour them.

    ``Overlay(nodes={"ApplicationLimited": Delta(0.517, text="+51.7 pp")},
    edges={("SlowStart", "ApplicationLimited"): Delta(0.2, significant=False)},
    caption="mobile - desktop")``. An edge keyed by state names that the model lacks is drawn anyway,
    dashed, between the first nodes of those states (an edge only the other set has).
    """

    nodes: Mapping[NodeKey, Delta] = field(default_factory=dict)
    edges: Mapping[EdgeKey, Delta] = field(default_factory=dict)
    scale: float | None = None
    """The |value| drawn at full strength; default: the largest |value| among the nodes, and among the
    edges for edges (shares and probabilities are different quantities)."""
    increase: str = "#c0392b"
    decrease: str = "#1f5fa8"
    muted: str = "#a0a0a0"
    caption: str | None = None
    """What the values mean, for the legend (e.g. ``share: mobile - desktop``)."""

    def node_delta(self, node_id: int, state: str) -> Delta | None:
        return self.nodes.get(node_id, self.nodes.get(state))

    def edge_delta(self, src: tuple[int, str], dst: tuple[int, str]) -> Delta | None:
        hit = self.edges.get((src[0], dst[0]))
        return hit if hit is not None else self.edges.get((src[1], dst[1]))

    def full_scale(self, edge: bool = False) -> float:
        """The |value| drawn at full strength: ``scale``, else the largest |value| among nodes (or edges)."""
        if self.scale is not None and self.scale > 0:
            return self.scale
        values = self.edges.values() if edge else self.nodes.values()
        return max((abs(d.value) for d in values), default=0.0) or 1.0

    def strength(self, delta: Delta, edge: bool = False) -> float:
        """0 (no change) .. 1 (full scale or more)."""
        return min(abs(delta.value) / self.full_scale(edge), 1.0)

    def color(self, delta: Delta, edge: bool = False) -> str:
        """Edge/border colour: direction by hue, size by how far from pale it is."""
        if not delta.significant or delta.value == 0:
            return self.muted
        base = self.increase if delta.value > 0 else self.decrease
        return mix("#e6e6e6", base, 0.45 + 0.55 * self.strength(delta, edge))

    def fill(self, delta: Delta) -> str:
        """Node fill: a light tint of the direction's colour, so the red share stays readable."""
        if not delta.significant or delta.value == 0:
            return "#ffffff"
        base = self.increase if delta.value > 0 else self.decrease
        return mix("#ffffff", base, 0.08 + 0.27 * self.strength(delta))

    def text(self, delta: Delta) -> str:
        return delta.text if delta.text is not None else ("+" if delta.value > 0 else "") + fmt_num(delta.value, 2)
