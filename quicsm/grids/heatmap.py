"""The IMC'17 heatmaps (Fig. 6, 7, 8, 12, 14, 15): one cell per grid cell, coloured by the percent difference
between two arms, red where the compared arm did better, blue where the baseline did, white where the
difference is not significant (the corrected p of Welch's test is not below alpha), grey where no test
was possible (fewer than two good runs in an arm).

The picture is Graphviz's HTML-like table (DOT text), drawn by :func:`quicsm.diagrams.render.write_picture`
as SVG, PNG or PDF like every other quicsm picture: one drawing, every format. In the SVG each cell links
to the cell's section of the grid report (``#cell-<dir>``) and carries its numbers as a tooltip.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from quicsm.grids.results import CellResult, GridComparison
from quicsm.grids.spec import Axis, Grid, value_text
from quicsm.textsafe import html as escape

__all__ = [
    "NOT_SIGNIFICANT",
    "NO_TEST",
    "Layout",
    "cell_colour",
    "heatmap_dot",
    "layout",
    "nice_scale",
    "write_heatmap",
]

NOT_SIGNIFICANT = "#ffffff"
NO_TEST = "#d9d9d9"
_RED = ((0xFD, 0xDB, 0xC7), (0xB2, 0x18, 0x2B))
_BLUE = ((0xD1, 0xE5, 0xF0), (0x21, 0x66, 0xAC))
"""(palest, darkest) of each side: a significant cell is never white, however small its difference."""


def nice_scale(results: Sequence[CellResult], floor: float = 10.0) -> float:
    """The colour scale's end (percent): the largest significant |difference| rounded up to 1, 1.5, 2, 2.5, 3,
    4, 5, 6, 7.5 or 8 x 10^k (so the largest cell is drawn at least two-thirds dark)."""
    peak = max([abs(r.diff_pct) for r in results if r.significant and r.diff_pct is not None] or [floor])
    peak = max(peak, floor)
    mag = 10 ** math.floor(math.log10(peak))
    return next(m * mag for m in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 7.5, 8, 10) if m * mag >= peak - 1e-9)


def cell_colour(r: CellResult, scale: float) -> tuple[str, str]:
    """(fill, text colour) of a cell: white unless significant; red (better) or blue (worse) by |difference|."""
    if not r.testable or r.diff_pct is None:
        return NO_TEST, "#555555"
    if not r.significant:
        return NOT_SIGNIFICANT, "#777777"
    t = min(1.0, abs(r.diff_pct) / scale) if scale > 0 else 1.0
    lo, hi = _RED if r.diff_pct > 0 else _BLUE
    rgb = tuple(round(a + (b - a) * t) for a, b in zip(lo, hi))
    return "#{:02x}{:02x}{:02x}".format(*rgb), ("#ffffff" if t > 0.55 else "#111111")


@dataclass(frozen=True, slots=True)
class Layout:
    rows: Axis | None
    columns: Axis | None
    facets: tuple[Axis, ...]


def layout(grid: Grid, rows: str | None = None, columns: str | None = None) -> Layout:
    """Which axis runs down, which across, and which make one panel per value (the others)."""
    r = grid.axis(rows) if rows else (grid.axis(grid.report.rows) if isinstance(grid.report.rows, str) else None)
    c = (
        grid.axis(columns)
        if columns
        else (grid.axis(grid.report.columns) if isinstance(grid.report.columns, str) else None)
    )
    rest = [a for a in grid.axes if a not in (r, c)]
    if r is None and rest:
        r = rest.pop(0)
    if c is None and rest:
        c = rest.pop(0)
    if r is not None and c is not None and r.name == c.name:
        from quicsm.errors import InputError

        raise InputError(f"rows and columns are both {r.name}: give two different axes")
    return Layout(r, c, tuple(rest))


def _fmt_pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.0f}%" if abs(x) >= 9.5 else f"{x:+.1f}%"


def _tooltip(r: CellResult, comp: GridComparison) -> str:
    m = comp.metric

    def side(name: str, mean: float | None, sd: float | None, n: int) -> str:
        return f"{name} {m.fmt(mean)}" + (f" ± {m.fmt(sd)}" if sd is not None else "") + f" (n={n})"

    p = r.test.p_value
    q = r.p_adjusted
    test = (
        f"Welch p={p:.2g}, {comp.correction} p={q:.2g}"
        if p is not None and q is not None
        else (r.test.note or "no test")
    )
    return (
        f"{r.cell.id}: {side(r.baseline, r.mean_a, r.sd_a, len(r.a))}; {side(r.versus, r.mean_b, r.sd_b, len(r.b))}; "
        f"{_fmt_pct(r.diff_pct)}; {test}"
    )


def _cell_td(r: CellResult | None, comp: GridComparison, scale: float, link: bool) -> str:
    if r is None:
        return '<TD BGCOLOR="#f0f0f0" WIDTH="66" HEIGHT="34"> </TD>'
    fill, ink = cell_colour(r, scale)
    text = escape(_fmt_pct(r.diff_pct)) if r.testable else "n/a"
    bold = ("<B>", "</B>") if r.significant else ("", "")
    href = f' HREF="#cell-{escape(r.cell.slug)}" TARGET="_top"' if link else ""
    return (
        f'<TD BGCOLOR="{fill}" WIDTH="66" HEIGHT="34" TOOLTIP="{escape(_tooltip(r, comp))}"{href}>'
        f'<FONT COLOR="{ink}">{bold[0]}{text}{bold[1]}</FONT></TD>'
    )


def _panel(
    grid: Grid, comp: GridComparison, versus: str, lay: Layout, fixed: dict[str, str], scale: float, link: bool
) -> str:
    by_cell = {r.cell.id: r for r in comp.of(versus)}
    cells = {
        tuple((a, value_text(v)) for a, v in c.values): c.id
        for c in grid.cells()
        if all(value_text(c.get(a)) == v for a, v in fixed.items())
    }
    row_vals = [value_text(v) for v in lay.rows.values] if lay.rows else [""]
    col_vals = [value_text(v) for v in lay.columns.values] if lay.columns else [""]
    order = [a.name for a in grid.axes]

    def cell_id(rv: str, cv: str) -> str | None:
        want = dict(fixed)
        if lay.rows:
            want[lay.rows.name] = rv
        if lay.columns:
            want[lay.columns.name] = cv
        return cells.get(tuple((a, want[a]) for a in order))

    corner = escape(
        f"{lay.rows.name} \\ {lay.columns.name}" if lay.rows and lay.columns else (lay.rows.name if lay.rows else " ")
    )
    out = ['<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="5" COLOR="#bbbbbb">']
    caption = ", ".join(f"{a} = {v}" for a, v in fixed.items())
    if caption:
        out.append(f'<TR><TD BORDER="0" COLSPAN="{len(col_vals) + 1}"><B>{escape(caption)}</B></TD></TR>')
    out.append(f'<TR><TD BORDER="0"><FONT POINT-SIZE="10" COLOR="#555555">{corner}</FONT></TD>')
    out += [f'<TD BORDER="0"><B>{escape(cv or versus)}</B></TD>' for cv in col_vals]
    out.append("</TR>")
    for rv in row_vals:
        out.append(f'<TR><TD BORDER="0" ALIGN="RIGHT"><B>{escape(rv or comp.metric.label)}</B></TD>')
        for cv in col_vals:
            cid = cell_id(rv, cv)
            out.append(_cell_td(by_cell.get(cid) if cid else None, comp, scale, link))
        out.append("</TR>")
    out.append("</TABLE>")
    return "".join(out)


def _legend(comp: GridComparison, scale: float) -> str:
    def swatch(fill: str, label: str) -> str:
        return (
            f'<TD BGCOLOR="{fill}" WIDTH="26" HEIGHT="16" BORDER="1"> </TD>'
            f'<TD BORDER="0" ALIGN="LEFT"><FONT POINT-SIZE="10">{escape(label)}</FONT></TD>'
        )

    steps = [-1.0, -0.5, -0.1, 0.1, 0.5, 1.0]
    cells = []
    for f in steps:
        lo, hi = _RED if f > 0 else _BLUE
        t = abs(f)
        rgb = tuple(round(a + (b - a) * t) for a, b in zip(lo, hi))
        cells.append(swatch("#{:02x}{:02x}{:02x}".format(*rgb), f"{f * scale:+.0f}%"))
    cells.append(swatch(NOT_SIGNIFICANT, f"not significant ({comp.correction} p ≥ {comp.alpha:g})"))
    cells.append(swatch(NO_TEST, "no test (< 2 good runs)"))
    return '<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="2" COLOR="#888888"><TR>' + "".join(cells) + "</TR></TABLE>"


def heatmap_dot(
    grid: Grid,
    comp: GridComparison,
    versus: str,
    *,
    rows: str | None = None,
    columns: str | None = None,
    title: str | None = None,
    scale: float | None = None,
    link: bool = True,
) -> str:
    """DOT text of the heatmap of ``versus`` against the comparison's baseline (one panel per value of every
    axis that is neither rows nor columns)."""
    lay = layout(grid, rows, columns)
    scale = scale or nice_scale(comp.cells)
    m = comp.metric
    head = title or f"{versus} vs {comp.baseline}: {m.label}, % better"
    sub = (
        f"{grid.name}: (mean {comp.baseline} - mean {versus}) / mean {comp.baseline}"
        if not m.higher_is_better
        else f"{grid.name}: (mean {versus} - mean {comp.baseline}) / mean {comp.baseline}"
    )
    sub += f"; red: {versus} better; Welch's t-test, {comp.correction}, alpha {comp.alpha:g}"
    facet_values = [[(a.name, value_text(v)) for v in a.values] for a in lay.facets]
    panels = [
        _panel(grid, comp, versus, lay, dict(combo), scale, link) for combo in itertools.product(*facet_values)
    ] or [_panel(grid, comp, versus, lay, {}, scale, link)]
    per_row = 3
    rows_html = []
    for i in range(0, len(panels), per_row):
        rows_html.append("<TR>" + "".join(f"<TD>{p}</TD>" for p in panels[i : i + per_row]) + "</TR>")
    span = min(per_row, len(panels))
    label = (
        f'<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="8">'
        f'<TR><TD COLSPAN="{span}" ALIGN="LEFT"><FONT POINT-SIZE="15"><B>{escape(head)}</B></FONT></TD></TR>'
        f'<TR><TD COLSPAN="{span}" ALIGN="LEFT"><FONT POINT-SIZE="10" COLOR="#555555">{escape(sub)}</FONT></TD></TR>'
        + "".join(rows_html)
        + f'<TR><TD COLSPAN="{span}" ALIGN="LEFT">{_legend(comp, scale)}</TD></TR></TABLE>'
    )
    return (
        "digraph heatmap {\n"
        '  graph [margin="0.1", bgcolor="white", fontname="Helvetica"];\n'
        '  node [shape=plaintext, fontname="Helvetica", fontsize=12];\n'
        f"  heatmap [label=<{label}>];\n"
        "}\n"
    )


def write_heatmap(dot: str, path: str) -> str:
    """Draw the heatmap to ``path`` (.svg, .png, .pdf or .dot); returns the format."""
    from quicsm.diagrams.render import write_picture

    return write_picture(dot, path)
