"""The HTML report of a check: the verdict, every failed check with its witness, and the diff diagram.

The diff diagram is the union model of baseline and new runs (``dfg``) with the gate's own verdicts
drawn on it: red = up, blue = down, strong = a failed check, grey dashed = within tolerance. One file,
no external assets; a diagram that cannot be drawn (no Graphviz) leaves a note in its place.
"""

from __future__ import annotations

from functools import lru_cache

import jinja2

from quicsm.check.gate import CheckResult, ScenarioResult
from quicsm.check.report import fmt_value, record, witness_text
from quicsm.compare.figures import try_svg
from quicsm.diagrams.dot import DotOptions, to_dot
from quicsm.diagrams.overlay import Delta, EdgeKey, NodeKey, Overlay
from quicsm.errors import RenderError
from quicsm.textsafe import html_env

__all__ = ["diff_overlay", "scenario_dot", "to_html"]


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    return html_env("quicsm.check", "quicsm.compare")  # compare's: the shared figure layout


def diff_overlay(sr: ScenarioResult) -> Overlay:
    """Occupancy changes on states, probability changes on edges; strong where the gate failed them."""
    nodes: dict[NodeKey, Delta] = {}
    edges: dict[EdgeKey, Delta] = {}
    for f in sr.findings:
        d = f.difference
        if d is None:
            continue
        if f.kind == "state" and f.check == "occupancy":
            failed = any(g.failed for g in sr.findings if g.kind == "state" and g.item == f.item)
            nodes[f.item] = Delta(d, failed, f"{100 * (f.baseline or 0):.1f}%→{100 * (f.new or 0):.1f}%")
        elif f.kind == "edge" and f.check == "probability":
            src, _, dst = f.item.partition(" -> ")
            failed = any(g.failed for g in sr.findings if g.kind == "edge" and g.item == f.item)
            edges[(src, dst)] = Delta(d, failed, f"{f.baseline or 0:.2f}→{f.new or 0:.2f}")
    return Overlay(nodes=nodes, edges=edges, caption=f"change baseline → new ({sr.name})")


def scenario_dot(sr: ScenarioResult) -> str:
    """DOT of the scenario's diff diagram: the comparison's union ``dfg`` model of both sets (learnt when
    the check ran with models) with the gate's verdicts."""
    model = next(iter(sr.comparison.unions.values()), None)
    if model is None:
        raise RenderError(f"{sr.name}: the check ran without models (models=False); no diff diagram")
    return to_dot(model, DotOptions(title=f"{sr.name}: new vs baseline"), overlay=diff_overlay(sr))


def to_html(r: CheckResult, *, diagrams: bool = True) -> str:
    rep = record(r)
    scenarios = []
    for sr, srec in zip(r.scenarios, rep.scenarios):
        svg, err = try_svg(lambda sr=sr: scenario_dot(sr)) if diagrams else (None, None)
        rows = [
            {
                "kind": f.kind,
                "item": f.item,
                "check": f.check,
                "baseline": "" if f.check == "controller" else fmt_value(f, f.baseline),
                "new": "" if f.check == "controller" else fmt_value(f, f.new),
                "p": "" if f.p_corrected is None else f"{f.p_corrected:.2g}",
                "effect": "" if f.effect_size is None else f"{f.effect_size:+.2f} {f.effect_measure}",
                "reason": f.reason,
                "witness": witness_text(f.witness) if f.witness else "",
                "failed": f.failed,
                "ignored": f.ignored,
                "note": f.note or "",
            }
            for f in rep.findings
            if f.scenario == sr.name
        ]
        rows.sort(key=lambda x: (not x["failed"], x["kind"], x["item"], x["check"]))
        scenarios.append({"rec": srec, "rows": rows, "svg": svg, "svg_error": err})
    return (
        _env()
        .get_template("check.html.j2")
        .render(rep=rep, scenarios=scenarios, title=f"quicsm check: {rep.verdict}", version=rep.tool)
    )
