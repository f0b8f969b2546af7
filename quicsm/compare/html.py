"""The self-contained HTML report of a comparison: tables, diagrams and timelines as inline SVG.

One file, no external assets, so it can be mailed or attached to an issue. A diagram that cannot be
drawn (no Graphviz) leaves a visible note in its place instead of failing the whole report.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import jinja2
from markupsafe import Markup

from quicsm.compare.comparison import Comparison
from quicsm.compare.figures import diff_dot, side_by_side_dot, try_svg
from quicsm.compare.report import (
    EdgeRecord,
    StateRecord,
    by_corrected_p,
    edge_record,
    fmt_p,
    fmt_pct,
    fmt_pp,
    model_lines,
    state_record,
)
from quicsm.compare.report import to_json as comparison_json
from quicsm.compare.stats import EDGE_TESTS
from quicsm.compare.svg import heatmap_svg, rate_timeline_svg, timeline_svg
from quicsm.diagrams.dot import DotOptions, to_dot
from quicsm.textsafe import html_env
from quicsm.version import __version__

__all__ = ["heatmap", "to_html"]


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    env = html_env("quicsm.compare")
    env.filters.update(pct=fmt_pct, p=fmt_p, pp=fmt_pp)
    env.globals["direction"] = _dir
    return env


def _dir(r: StateRecord | EdgeRecord) -> str:
    """The CSS class of a record's difference: up or down when significant."""
    x = r.difference
    if not r.significant or not x:
        return "muted"
    return "up" if x > 0 else "down"


def heatmap(c: Comparison) -> str:
    """N-way occupancy heatmap; ``*`` marks a significant difference from the first set."""
    names = [s.name for s in c.sets]
    means = [[c.summaries[n][i].mean for n in names] for i in range(len(c.states))]
    marks = [["" for _ in names] for _ in c.states]
    for p in c.pairs:
        if p.a != names[0]:
            continue
        j = names.index(p.b)
        for i, r in enumerate(p.states):
            marks[i][j] = "*" if r.significant else ""
    return heatmap_svg(list(c.states), names, means, marks)


def to_html(c: Comparison, *, diagrams: bool = True, sections: Sequence[tuple[str, str]] = ()) -> str:
    """The report of a finished comparison: its tables, its models and union models drawn by Graphviz,
    and the timelines of the connections it kept (:attr:`CompareOptions.timelines`). ``sections``:
    extra (title, pre-rendered HTML) parts shown above the state tables, e.g. the fairness view of
    multi-flow runs (quicsm.compare.fairness); their HTML is trusted as given."""
    o = c.options
    names = [s.name for s in c.sets]
    occupancy = []
    for i, st in enumerate(c.states):
        cells = []
        for n in names:
            s = c.summaries[n][i]
            ci = "n/a" if s.ci_low is None or s.ci_high is None else f"{100 * s.ci_low:.1f}–{100 * s.ci_high:.1f}"
            cells.append({"mean": fmt_pct(s.mean), "median": fmt_pct(s.median), "ci": ci, "pooled": fmt_pct(s.pooled)})
        occupancy.append({"state": st, "cells": cells})
    pairs = []
    for p in c.pairs:
        diff_svg, diff_error = try_svg(lambda p=p: diff_dot(c, p)) if diagrams and c.unions else (None, None)
        mlines = model_lines(p.models.to_json(), lambda t: t)[1:] if p.models else []
        pairs.append(
            {
                "a": p.a,
                "b": p.b,
                "states": by_corrected_p(p.states, state_record),
                "edges": by_corrected_p(p.edges, edge_record),
                "model_lines": mlines,
                "diff_svg": diff_svg,
                "diff_error": diff_error,
            }
        )
    side, side_error = try_svg(lambda: side_by_side_dot(c)) if diagrams and c.models else (None, None)
    models = []  # one diagram per set, each readable at its own size (the report stacks or rows them)
    for name, am in c.models.items() if diagrams and side else ():
        svg, _ = try_svg(lambda am=am, name=name: to_dot(am, DotOptions(min_prob=0.0, legend=False)))
        if svg:
            models.append({"name": name, "svg": svg})
    lines = []
    for name in names:
        svgs = []
        for t in c.timelines.get(name, ()):
            svgs.append(Markup(timeline_svg(t, o.view, title=f"{name}: {t.id}")))
            rate_log = c.rate_logs.get(t.id)  # a testbed run under a rate schedule: its states under the rate curve
            if rate_log:
                svgs.append(Markup(rate_timeline_svg(t, rate_log, o.view, title=f"{name}: {t.id}, rate schedule")))
        lines.append({"set": name, "svgs": svgs})
    options = {
        "test_label": {"welch": "Welch's t-test", "mwu": "Mann-Whitney U"}[o.test],
        "correction": o.correction,
        "alpha": o.alpha,
        "family": "all states of all pairs",
        "edge_test_label": EDGE_TESTS[o.edge_test],
        "confidence": round(o.confidence * 100),
        "resamples": o.resamples,
        "seed": o.seed,
        "engine": o.engine,
    }
    data = comparison_json(c)
    return (
        _env()
        .get_template("report.html.j2")
        .render(
            title="quicsm compare: " + " vs ".join(names),
            options=options,
            sets=data["sets"],
            warnings=c.warnings,
            set_names=names,
            occupancy=occupancy,
            heatmap=Markup(heatmap(c)),
            side_by_side=side,
            models=models,
            side_by_side_error=side_error,
            pairs=pairs,
            timelines=lines,
            sections=[{"title": t, "html": Markup(h)} for t, h in sections],
            version=__version__,
        )
    )
