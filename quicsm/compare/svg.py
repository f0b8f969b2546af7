"""Hand-written SVG for reports: cwnd/bytes-in-flight timelines with state shading (IMC'17 Fig. 5/9)
and the N-way occupancy heatmap. Pure strings, no plotting library, so the HTML stays self-contained.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from html import escape

from quicsm.diagrams.style import family_style
from quicsm.traces.events import StateView, Trace
from quicsm.traces.states import state_family

__all__ = ["downsample", "heatmap_svg", "nice_ticks", "state_colour", "step_path", "timeline_svg"]


def state_colour(state: str) -> str:
    """The diagrams' border colour of the state's family, so timelines and diagrams agree."""
    return family_style(state_family(state)).border


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (1, 2, 5 times a power of ten)."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, count)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    out, v = [], first
    while v <= hi + step * 1e-9:
        out.append(round(v, 10))
        v += step
    return out


def _bytes(v: float) -> str:
    for unit, scale in (("MB", 1e6), ("kB", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:g} {unit}"
    return f"{v:g} B"


def downsample(points: list[tuple[float, float]], limit: int) -> list[tuple[float, float]]:
    if len(points) <= limit:
        return points
    stride = len(points) / limit
    return [points[int(i * stride)] for i in range(limit)] + [points[-1]]


def step_path(
    points: list[tuple[float, float]], x: Callable[[float], float], y: Callable[[float], float], end: float
) -> str:
    if not points:
        return ""
    parts = [f"M{x(points[0][0]):.1f},{y(points[0][1]):.1f}"]
    for t1, v1 in points[1:]:
        parts.append(f"H{x(t1):.1f}V{y(v1):.1f}")
    parts.append(f"H{x(end):.1f}")
    return "".join(parts)


def timeline_svg(
    trace: Trace,
    view: StateView = StateView(),
    *,
    width: int = 760,
    height: int = 240,
    title: str | None = None,
    max_points: int = 1500,
) -> str:
    """cwnd and bytes in flight over time (ms), background shaded by the state the sender was in."""
    left, right, top, bottom = 64, 150, 26, 34
    pw, ph = width - left - right, height - top - bottom
    t0 = trace.start_us
    span = max(trace.duration_us, 1)
    cwnd = [((e.t_us - t0) / 1000, float(e.cwnd)) for e in trace.events if e.cwnd is not None]
    infl = [((e.t_us - t0) / 1000, float(e.inflight)) for e in trace.events if e.inflight is not None]
    cwnd, infl = downsample(cwnd, max_points), downsample(infl, max_points)
    ymax = max([v for _, v in cwnd + infl] or [1.0]) * 1.05
    end_ms = span / 1000

    def x(t):
        return left + pw * t / end_ms

    def y(v):
        return top + ph * (1 - v / ymax)

    out = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">'
        )
    ]
    out.append(f'<text x="{left}" y="16" font-weight="bold">{escape(title or trace.id)}</text>')
    seen: dict[str, str] = {}
    for v in trace.visits(view):
        if v.duration_us <= 0:
            continue
        colour = state_colour(v.state)
        seen.setdefault(v.state, colour)
        x0, x1 = x((v.start_us - t0) / 1000), x((v.end_us - t0) / 1000)
        out.append(
            f'<rect x="{x0:.1f}" y="{top}" width="{max(x1 - x0, 0.3):.1f}" height="{ph}" fill="{colour}" '
            f'fill-opacity="0.22"><title>{escape(v.state)} {(v.start_us - t0) / 1000:.1f}-'
            f"{(v.end_us - t0) / 1000:.1f} ms</title></rect>"
        )
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>')
    for tv in nice_ticks(0, end_ms):
        out.append(
            f'<line x1="{x(tv):.1f}" y1="{top + ph}" x2="{x(tv):.1f}" y2="{top + ph + 4}" stroke="#444"/>'
            f'<text x="{x(tv):.1f}" y="{top + ph + 16}" text-anchor="middle">{tv:g}</text>'
        )
    out.append(f'<text x="{left + pw / 2}" y="{height - 4}" text-anchor="middle">time since first event (ms)</text>')
    for yv in nice_ticks(0, ymax, 4):
        out.append(
            f'<line x1="{left - 4}" y1="{y(yv):.1f}" x2="{left}" y2="{y(yv):.1f}" stroke="#444"/>'
            f'<text x="{left - 6}" y="{y(yv) + 4:.1f}" text-anchor="end">{_bytes(yv)}</text>'
        )
    if cwnd:
        out.append(f'<path d="{step_path(cwnd, x, y, end_ms)}" fill="none" stroke="#08306b" stroke-width="1.4"/>')
    if infl:
        out.append(
            f'<path d="{step_path(infl, x, y, end_ms)}" fill="none" stroke="#d94801" stroke-width="1" '
            f'stroke-dasharray="3,2"/>'
        )
    if not cwnd and not infl:
        out.append(
            f'<text x="{left + pw / 2}" y="{top + ph / 2}" text-anchor="middle" fill="#666">'
            "no cwnd / bytes-in-flight samples in this trace</text>"
        )
    ly = top + 6
    lx = left + pw + 12
    out.append(
        f'<line x1="{lx}" y1="{ly}" x2="{lx + 18}" y2="{ly}" stroke="#08306b" stroke-width="1.4"/>'
        f'<text x="{lx + 22}" y="{ly + 4}">cwnd</text>'
    )
    ly += 15
    out.append(
        f'<line x1="{lx}" y1="{ly}" x2="{lx + 18}" y2="{ly}" stroke="#d94801" stroke-dasharray="3,2"/>'
        f'<text x="{lx + 22}" y="{ly + 4}">bytes in flight</text>'
    )
    for state, colour in sorted(seen.items()):
        ly += 15
        out.append(
            f'<rect x="{lx}" y="{ly - 6}" width="18" height="10" fill="{colour}" fill-opacity="0.22"/>'
            f'<text x="{lx + 22}" y="{ly + 3}">{escape(state)}</text>'
        )
    out.append("</svg>")
    return "".join(out)


def _heat(v: float) -> str:
    """White (0) to dark red (1)."""
    v = min(1.0, max(0.0, v))
    r = 255 - int(v * (255 - 165))
    g = 255 - int(v * (255 - 15))
    b = 255 - int(v * (255 - 21))
    return f"#{r:02x}{g:02x}{b:02x}"


def heatmap_svg(
    states: Sequence[str],
    sets: Sequence[str],
    means: Sequence[Sequence[float]],
    marks: Sequence[Sequence[str]] | None = None,
    *,
    title: str = "mean share of connection time",
) -> str:
    """Rows = states, columns = sets; ``means[i][j]`` of state i in set j; ``marks`` e.g. ``*`` per cell."""
    cell_w, cell_h = 96, 24
    left = 12 + 7 * max([len(s) for s in states] or [5])
    top = 44
    width = left + cell_w * len(sets) + 16
    height = top + cell_h * len(states) + 30
    out = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="heatmap" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">'
        ),
        f'<text x="8" y="14" font-weight="bold">{escape(title)}</text>',
    ]
    for j, name in enumerate(sets):
        label = name if len(name) <= 15 else name[:14] + "…"
        out.append(
            f'<text x="{left + cell_w * j + cell_w / 2}" y="{top - 8}" text-anchor="middle">'
            f"<title>{escape(name)}</title>{escape(label)}</text>"
        )
    for i, st in enumerate(states):
        yy = top + cell_h * i
        out.append(f'<text x="{left - 6}" y="{yy + cell_h / 2 + 4}" text-anchor="end">{escape(st)}</text>')
        for j in range(len(sets)):
            v = means[i][j]
            mark = marks[i][j] if marks else ""
            fg = "#fff" if v > 0.55 else "#000"
            out.append(
                f'<rect x="{left + cell_w * j}" y="{yy}" width="{cell_w}" height="{cell_h}" fill="{_heat(v)}" '
                f'stroke="#fff"><title>{escape(st)} in {escape(sets[j])}: {100 * v:.1f}%</title></rect>'
                f'<text x="{left + cell_w * j + cell_w / 2}" y="{yy + cell_h / 2 + 4}" text-anchor="middle" '
                f'fill="{fg}">{100 * v:.1f}%{escape(mark)}</text>'
            )
    out.append(f'<text x="8" y="{height - 8}" fill="#555">* significant difference from the first set</text>')
    out.append("</svg>")
    return "".join(out)
