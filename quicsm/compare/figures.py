"""Diagrams of a comparison, drawn by :mod:`quicsm.diagrams`: Fig. 13 side by side, and the diff diagram.

The diff diagram is the union (``dfg`` of all traces of both sets) with an
:class:`~quicsm.diagrams.overlay.Overlay`: per state the change in mean share, per edge the change in
probability; colour = direction, width = size, grey dashed = not significant after correction.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from markupsafe import Markup

from quicsm.compare.comparison import Comparison, PairComparison
from quicsm.diagrams.dot import DotOptions, render_side_by_side, to_dot
from quicsm.diagrams.overlay import Delta, EdgeKey, NodeKey, Overlay
from quicsm.diagrams.render import run_dot
from quicsm.errors import QuicsmError, RenderError

__all__ = ["diff_dot", "diff_overlay", "inline_svg", "side_by_side_dot", "svg_of", "try_svg"]


def side_by_side_dot(c: Comparison, options: DotOptions | None = None) -> str:
    """All sets' models in one picture, equal states on equal ranks (the paper's Fig. 13)."""
    if not c.models:
        raise RenderError("the comparison was run without models; nothing to draw")
    opts = options or DotOptions(min_prob=0.0, title=" vs ".join(s.name for s in c.sets))
    return render_side_by_side([(s.name, c.models[s.name]) for s in c.sets if s.name in c.models], opts)


def _short_p(p: float | None) -> str:
    if p is None:
        return "no test"
    return "p<0.001" if p < 1e-3 else f"p={p:.3f}"


def diff_overlay(pair: PairComparison) -> Overlay:
    """Values of one pair (b minus a) as an overlay keyed by state names."""
    nodes: dict[NodeKey, Delta] = {
        r.state: Delta(
            r.difference, r.significant, f"{100 * r.mean_a:.1f}%→{100 * r.mean_b:.1f}% ({_short_p(r.p_corrected)})"
        )
        for r in pair.states
    }
    edges: dict[EdgeKey, Delta] = {}
    for e in pair.edges:
        d = e.difference
        if d is None:
            d = (e.prob_b or 0.0) - (e.prob_a or 0.0)
        pa = "–" if e.prob_a is None else f"{e.prob_a:.2f}"
        pb = "–" if e.prob_b is None else f"{e.prob_b:.2f}"
        edges[(e.src, e.dst)] = Delta(d, e.significant, f"{pa}→{pb}")
    return Overlay(nodes=nodes, edges=edges, scale=None, caption=f"change {pair.a} → {pair.b}")


def diff_dot(c: Comparison, pair: PairComparison, options: DotOptions | None = None) -> str:
    """The merged diff diagram of one pair: its union model (:attr:`Comparison.unions`; red numbers:
    share over both sets together) with the pair's differences."""
    union = c.unions.get((pair.a, pair.b))
    if union is None:
        raise RenderError(f"the comparison has no union model of {pair.a} and {pair.b}; nothing to draw")
    opts = options or DotOptions(title=f"{pair.b} vs {pair.a} (red: share in both sets together)")
    return to_dot(union, opts, overlay=diff_overlay(pair))


_PROLOG = re.compile(r"^\s*(<\?xml[^>]*\?>\s*)?(<!DOCTYPE[^>]*>\s*)?(<!--.*?-->\s*)*", re.DOTALL)


def inline_svg(svg: bytes | str) -> str:
    """SVG markup ready to paste into HTML (no XML prolog, doctype or leading comments)."""
    text = svg.decode() if isinstance(svg, bytes) else svg
    return _PROLOG.sub("", text, count=1)


def svg_of(dot: str) -> str:
    """Graphviz's SVG of ``dot``, ready to inline in HTML."""
    return inline_svg(run_dot(dot, "svg"))


def try_svg(make_dot: Callable[..., str]) -> tuple[Markup | None, str | None]:
    """(SVG, None) of the DOT ``make_dot`` gives, or (None, why): a report shows the reason in its place."""
    try:
        return Markup(svg_of(make_dot())), None
    except QuicsmError as exc:
        return None, str(exc)
