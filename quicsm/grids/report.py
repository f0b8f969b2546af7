"""A grid's report: the heatmaps, every cell's numbers and the state machines that explain them.

``write_report(runs, out_dir)`` writes into ``out_dir``:

* ``heatmap-<arm>.svg`` / ``.png``: one heatmap per arm compared with the baseline (:mod:`quicsm.grids.heatmap`);
* ``cells.csv`` and ``grid-report.json``: per cell and arm the values' means, SDs and n, the percent
  difference, Welch's p and the corrected p, and the cell's significant state differences;
* ``timeline-<cell>.svg``: cwnd and state over time of each arm's median run in the cells ``[report]
  timelines`` names (Fig. 9);
* ``cells/<cell>/compare.html``: the whole ``quicsm compare`` report of the cell's arms (occupancy tests,
  transition tests, model differences and diagrams), so a red or blue cell is explained by its states;
* ``report.md`` (for experiment write-ups) and ``report.html`` (self-contained: SVG inline), which link
  the heatmaps' cells to their sections.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from quicsm.compare.comparison import CompareOptions, Comparison, compare
from quicsm.compare.sets import TraceSet
from quicsm.errors import QuicsmError
from quicsm.files import write_output
from quicsm.grids.heatmap import heatmap_dot, layout, write_heatmap
from quicsm.grids.metrics import Metric
from quicsm.grids.results import CellResult, GridComparison, GridRuns, RunRecord
from quicsm.grids.spec import Cell, value_text
from quicsm.grids.timeline import cwnd_timeline_svg, cwnd_trace, run_traces
from quicsm.textsafe import csv_cell, html_env, md_name, terminal
from quicsm.version import __version__

__all__ = ["CellStates", "GridReport", "cell_states", "median_run", "write_report"]


@dataclass(frozen=True, slots=True)
class StateDiff:
    state: str
    mean_a: float
    mean_b: float
    difference: float
    """Share of connection time, versus minus baseline."""
    p_corrected: float | None
    significant: bool

    def text(self, name: Callable[[str], str] = terminal) -> str:
        star = "*" if self.significant else ""
        return f"{name(self.state)} {100 * self.difference:+.1f} pp{star}"


@dataclass(slots=True)
class CellStates:
    """The state-machine comparison of one cell: ``versus`` against ``baseline``."""

    cell: Cell
    baseline: str
    versus: str
    connections: tuple[int, int]
    diffs: list[StateDiff]
    comparison: Comparison | None = field(default=None, repr=False)
    error: str | None = None

    def explanation(self, limit: int = 3, name: Callable[[str], str] = terminal) -> str:
        """The largest differences in time share, significant ones first: ``Recovery +12.3 pp*``; state
        names written by ``name`` (made safe for where the text goes)."""
        if self.error:
            return terminal(self.error)
        ranked = sorted(self.diffs, key=lambda d: (not d.significant, -abs(d.difference)))
        return (
            ", ".join(d.text(name) for d in ranked[:limit] if abs(d.difference) >= 0.005) or "no difference in states"
        )


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    return html_env("quicsm.grids", "quicsm.compare")  # compare's: the shared figure layout


def _arm_set(runs: GridRuns, cell: Cell, arm: str) -> TraceSet:
    traces = []
    for r in runs.runs(cell.id, arm):
        traces += run_traces(r.run_dir, r.meta)
    return TraceSet.from_traces(arm, traces, origin=f"cell {cell.id}, arm {arm}")


def cell_states(
    runs: GridRuns,
    cell: Cell,
    baseline: str,
    versus: str,
    *,
    options: CompareOptions = CompareOptions(models=False),
) -> CellStates:
    """``quicsm compare`` of the two arms' connections in ``cell`` (good runs, warm-ups left out)."""
    a, b = _arm_set(runs, cell, baseline), _arm_set(runs, cell, versus)
    if len(a) < 1 or len(b) < 1:
        return CellStates(cell, baseline, versus, (len(a), len(b)), [], None, "no traced connection in an arm")
    try:
        c = compare([a, b], options)
    except QuicsmError as exc:
        return CellStates(cell, baseline, versus, (len(a), len(b)), [], None, str(exc))
    pair = c.pair(baseline, versus)
    diffs = [StateDiff(r.state, r.mean_a, r.mean_b, r.difference, r.p_corrected, r.significant) for r in pair.states]
    return CellStates(cell, baseline, versus, (len(a), len(b)), diffs, c)


def median_run(runs: GridRuns, cell: str, arm: str, m: Metric) -> RunRecord | None:
    """The good run whose metric is the median of the arm's in the cell (the lower middle for an even n)."""
    scored = [(v, r) for r in runs.runs(cell, arm) if (v := m.value(r.meta)) is not None]
    if not scored:
        return None
    scored.sort(key=lambda x: (x[0], x[1].round))
    return scored[(len(scored) - 1) // 2][1]


@dataclass(slots=True)
class GridReport:
    """What :func:`write_report` wrote."""

    out_dir: Path
    comparison: GridComparison
    states: dict[tuple[str, str], CellStates]
    files: list[Path]


def _p(x: float | None) -> str:
    return "n/a" if x is None else (f"{x:.1e}" if x < 1e-3 else f"{x:.3f}")


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1f}%"


def _cell_row(r: CellResult, m: Metric, st: CellStates | None) -> dict[str, Any]:
    return {
        "cell": r.cell.id,
        "anchor": f"cell-{r.cell.slug}",
        "versus": r.versus,
        "baseline": r.baseline,
        "n_a": len(r.a),
        "n_b": len(r.b),
        "mean_a": r.mean_a,
        "mean_b": r.mean_b,
        "sd_a": r.sd_a,
        "sd_b": r.sd_b,
        "diff_pct": r.diff_pct,
        "p": r.test.p_value,
        "p_adjusted": r.p_adjusted,
        "significant": r.significant,
        "note": r.test.note,
        "states": st.explanation() if st else "",
        "states_md": st.explanation(name=lambda t: md_name(t, in_table=True)) if st else "",
        "a_text": f"{m.fmt(r.mean_a)}" + (f" ± {m.fmt(r.sd_a)}" if r.sd_a is not None else ""),
        "b_text": f"{m.fmt(r.mean_b)}" + (f" ± {m.fmt(r.sd_b)}" if r.sd_b is not None else ""),
        "diff_text": _pct(r.diff_pct),
        "p_text": _p(r.test.p_value),
        "q_text": _p(r.p_adjusted),
    }


def _csv(rows: Sequence[dict[str, Any]]) -> str:
    cols = "cell baseline versus n_a mean_a sd_a n_b mean_b sd_b diff_pct p p_adjusted significant states".split()
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for row in rows:
        w.writerow(["" if row[c] is None else (csv_cell(row[c]) if isinstance(row[c], str) else row[c]) for c in cols])
    return buf.getvalue()


def _markdown(runs: GridRuns, comp: GridComparison, rows: Sequence[dict[str, Any]], heatmaps: Sequence[str]) -> str:
    g, m = runs.grid, comp.metric
    good = sum(r.good for r in runs.records)
    lines = [
        f"# Grid {g.name}: {m.label}",
        "",
        g.description or "",
        "",
        f"{len(g.cells())} cell(s) x {len(g.arms)} arm(s) x {g.runs} run(s); {good} good run(s) of "
        f"{len(runs.records)} made ({runs.missing} planned run(s) not made). Percent difference of the mean "
        f"{m.label}, positive = the compared arm better; Welch's t-test per cell, {comp.correction} correction "
        f"over the {len(comp.cells)} test(s) of the grid, significant (*) when the corrected p < {comp.alpha:g}.",
        "",
    ]
    lines += [f"![{Path(path).stem}]({Path(path).name})" for path in heatmaps]
    lines.append("")
    lines.append(
        f"| cell | {comp.baseline} | arm | arm's {m.label} | difference | p | corrected p | states (arm - {comp.baseline}, share of time) |"
    )
    lines.append("|---|---|---|---|---|---|---|---|")
    for row in rows:
        star = " *" if row["significant"] else ""
        lines.append(
            f"| {md_name(row['cell'], in_table=True)} | {row['a_text']} (n={row['n_a']}) | {md_name(row['versus'], in_table=True)} "
            f"| {row['b_text']} (n={row['n_b']}) | {row['diff_text']}{star} | {row['p_text']} | {row['q_text']} | {row['states_md']} |"
        )
    lines += [
        "",
        "States: the largest differences in each connection's share of time per state (pp = percentage"
        " points), * = significant (Welch, Holm over the cell's states, 0.01); per cell in cells/*/compare.html.",
        "",
    ]
    return "\n".join(lines)


def write_report(
    runs: GridRuns,
    out_dir: Path,
    comp: GridComparison,
    *,
    rows: str | None = None,
    columns: str | None = None,
    states: bool | None = None,
    diagrams: bool = True,
    timelines: Sequence[Cell] | None = None,
    formats: Sequence[str] = ("svg", "png"),
    progress: Callable[[str], None] | None = None,
) -> GridReport:
    """Write every output of the module doc into ``out_dir``; returns what was written."""
    say = progress or (lambda _: None)
    g, m = runs.grid, comp.metric
    out_dir.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    layout(g, rows, columns)  # a bad axis name fails before anything is written
    do_states = g.report.states if states is None else states
    cell_states_by: dict[tuple[str, str], CellStates] = {}
    pages: dict[tuple[str, str], str] = {}
    if do_states:
        for i, cell in enumerate(g.cells(), 1):
            for v in comp.versus:
                say(f"states of cell {i}/{len(g.cells())} ({cell.id}), {v} vs {comp.baseline}")
                st = cell_states(
                    runs,
                    cell,
                    comp.baseline,
                    v,
                    options=CompareOptions(models=diagrams, alpha=0.01, correction="holm", engine="dfg", timelines=2),
                )
                cell_states_by[(cell.id, v)] = st
                if st.comparison is not None:
                    from quicsm.compare.html import to_html

                    name = f"compare-{v}.html" if len(comp.versus) > 1 else "compare.html"
                    pages[(cell.id, v)] = f"cells/{cell.slug}/{name}"
                    page = out_dir / pages[(cell.id, v)]
                    page.parent.mkdir(parents=True, exist_ok=True)
                    write_output(str(page), to_html(st.comparison, diagrams=diagrams))
                    files.append(page)
    heatmaps: list[str] = []
    heatmap_svgs: list[tuple[str, str]] = []
    for v in comp.versus:
        dot = heatmap_dot(g, comp, v, rows=rows, columns=columns)
        for fmt in formats:
            path = out_dir / f"heatmap-{v}.{fmt}"
            write_heatmap(dot, str(path))
            files.append(path)
        if "svg" in formats:
            heatmaps.append(str(out_dir / f"heatmap-{v}.svg"))
            heatmap_svgs.append((v, (out_dir / f"heatmap-{v}.svg").read_text()))
    say("heatmaps drawn")
    timeline_cells = list(timelines) if timelines is not None else g.timeline_cells()
    timeline_figs = []
    for cell in timeline_cells:
        series = []
        picked = []
        for arm in [comp.baseline, *comp.versus]:
            rec = median_run(runs, cell.id, arm, m)
            if rec is None:
                continue
            trace, kind = cwnd_trace(rec.run_dir, rec.meta)
            if trace is not None:
                series.append((f"{arm} ({rec.run_dir.name}, {m.fmt(m.value(rec.meta))})", trace))
                picked.append(f"{arm}: {rec.run_dir.relative_to(runs.out)} ({kind})")
        if not series:
            continue
        svg = cwnd_timeline_svg(series, title=f"{g.name}, {cell.id}: cwnd and state, median run of each arm")
        path = out_dir / f"timeline-{cell.slug}.svg"
        write_output(str(path), svg)
        files.append(path)
        timeline_figs.append({"cell": cell.id, "anchor": f"cell-{cell.slug}", "svg": Markup(svg), "picked": picked})
    rows_out = [_cell_row(r, m, cell_states_by.get((r.cell.id, r.versus))) for r in comp.cells]
    doc = {
        "format": "quicsm-grid-report",
        "version": 1,
        "grid": g.name,
        "metric": {"name": m.name, "label": m.label, "unit": m.unit, "higher_is_better": m.higher_is_better},
        "baseline": comp.baseline,
        "versus": list(comp.versus),
        "alpha": comp.alpha,
        "correction": comp.correction,
        "runs": {"planned": len(g.plan()), "made": len(runs.records), "good": sum(r.good for r in runs.records)},
        "cells": [
            {k: v for k, v in row.items() if not k.endswith("_text") and k not in ("anchor", "states_md")}
            | {"values_a": list(r.a), "values_b": list(r.b)}
            for row, r in zip(rows_out, comp.cells)
        ],
    }
    for name, text in (
        ("grid-report.json", json.dumps(doc, indent=2, sort_keys=True)),
        ("cells.csv", _csv(rows_out)),
        ("report.md", _markdown(runs, comp, rows_out, heatmaps)),
    ):
        write_output(str(out_dir / name), text)
        files.append(out_dir / name)
    cells_html = []
    for cell in g.cells():
        entries = []
        for v in comp.versus:
            r = comp.cell(cell.id, v)
            got = cell_states_by.get((cell.id, v))
            entries.append({"row": _cell_row(r, m, got), "states": got, "link": pages.get((cell.id, v))})
        cells_html.append({"cell": cell.id, "anchor": f"cell-{cell.slug}", "entries": entries})
    html = (
        _env()
        .get_template("report.html.j2")
        .render(
            title=f"quicsm grid {g.name}: {m.label}",
            grid=g,
            description=g.description,
            metric=m,
            comp=comp,
            counts=doc["runs"],
            missing=runs.missing,
            heatmaps=[
                {
                    "versus": v,
                    "svg": Markup(_strip_xml_head(s)),
                    "png": f"heatmap-{v}.png" if "png" in formats else None,
                }
                for v, s in heatmap_svgs
            ],
            rows=rows_out,
            cells=cells_html,
            timelines=timeline_figs,
            axes=[{"name": a.name, "vals": ", ".join(value_text(v) for v in a.values)} for a in g.axes],
            arms=[{"name": a.name, "desc": _describe_arm(g, a.name)} for a in g.arms],
            base=", ".join(f"{k} = {v}" for k, v in g.base.items()),
            version=__version__,
        )
    )
    write_output(str(out_dir / "report.html"), html)
    files.append(out_dir / "report.html")
    return GridReport(out_dir, comp, cell_states_by, files)


def _describe_arm(g: Any, arm: str) -> str:
    """``quic-go v0.65.0 cubic, h3, 0-RTT`` and the arm's own keys."""
    c = g.configs[(g.cells()[0].id, arm)]
    what = [f"{c.stack} {c.version} {c.cc}", c.http_version] + (["0-RTT"] if c.zero_rtt else [])
    what += [f"client {c.client}"] + ([f"max cwnd {c.max_cwnd}"] if c.max_cwnd else [])
    keys = dict(next(a for a in g.arms if a.name == arm).keys)
    return ", ".join(what) + (f" ({', '.join(f'{k} = {v}' for k, v in keys.items())})" if keys else "")


def _strip_xml_head(svg: str) -> str:
    """Graphviz's SVG without its XML declaration and DOCTYPE, to sit inside HTML."""
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg
