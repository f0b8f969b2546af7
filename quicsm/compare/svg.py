"""Hand-written SVG for reports: cwnd/bytes-in-flight timelines with state shading (IMC'17 Fig. 5/9), the
N-way occupancy heatmap, and a testbed run's bottleneck rate above the state strip. Pure strings, no plotting
library, so the HTML stays self-contained.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from quicsm.diagrams.style import family_style
from quicsm.textsafe import html as escape
from quicsm.traces.events import StateView, Trace
from quicsm.traces.states import state_family

__all__ = [
    "downsample",
    "svg_open",
    "x_ticks",
    "y_ticks",
    "heatmap_svg",
    "legend_line",
    "nice_ticks",
    "rate_logs_for",
    "rate_timeline_svg",
    "state_colour",
    "state_legend",
    "step_path",
    "timeline_svg",
    "y_title",
]


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


def svg_open(cls: str, width: int, height: int) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="{cls}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">'
    )


_PHASE_OPACITY = {"Up": "0.95", "Down": "0.15", "Refill": "0.6", "Cruise": "0.35"}


def _opacity(state: str, in_ms: bool) -> str:
    """Timelines shade lightly behind their curves; a state strip (``in_ms=False``) shades ProbeBw's phases,
    which share a family colour, by phase (Up darkest, Down lightest)."""
    return "0.22" if in_ms else _PHASE_OPACITY.get(state.partition(".")[2], "0.5")


def _state_rects(
    trace: Trace, view: StateView, x: Callable[[float], float], *, y: float, height: float, in_ms: bool
) -> tuple[list[str], dict[str, str]]:
    """One shaded rectangle per state visit on the time axis ``x`` (ms, or seconds unless ``in_ms``),
    and the states seen with their colours, for :func:`_state_legend`."""
    t0, scale, digits, unit = trace.start_us, (1000 if in_ms else 1e6), (1 if in_ms else 3), ("ms" if in_ms else "s")
    out: list[str] = []
    seen: dict[str, str] = {}
    for v in trace.visits(view):
        if v.duration_us <= 0:
            continue
        colour = state_colour(v.state)
        seen.setdefault(v.state, colour)
        a, b = (v.start_us - t0) / scale, (v.end_us - t0) / scale
        x0, x1 = x(a), x(b)
        out.append(
            f'<rect x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 0.3):.1f}" height="{height}" fill="{colour}" '
            f'fill-opacity="{_opacity(v.state, in_ms)}"><title>{escape(v.state)} {a:.{digits}f}-{b:.{digits}f} '
            f"{unit}</title></rect>"
        )
    return out, seen


def state_legend(seen: dict[str, str], lx: float, ly: float, opacity: Callable[[str], str]) -> list[str]:
    """A legend swatch per state (its colour at ``opacity(state)``), below the legend line at ``ly``."""
    out = []
    for state, colour in sorted(seen.items()):
        ly += 15
        out.append(
            f'<rect x="{lx}" y="{ly - 6}" width="18" height="10" fill="{colour}" '
            f'fill-opacity="{opacity(state)}"/><text x="{lx + 22}" y="{ly + 3}">{escape(state)}</text>'
        )
    return out


def legend_line(lx: float, ly: float, label: str, stroke: str) -> str:
    """A legend entry for a curve: a short line drawn with ``stroke`` (its SVG attributes), then the label."""
    return (
        f'<line x1="{lx}" y1="{ly}" x2="{lx + 18}" y2="{ly}" {stroke}/><text x="{lx + 22}" y="{ly + 4}">{label}</text>'
    )


def y_title(label: str, y: float) -> str:
    """The y axis's title, written upwards along the left edge."""
    return f'<text x="14" y="{y}" transform="rotate(-90 14 {y})" text-anchor="middle">{label}</text>'


def x_ticks(end: float, x: Callable[[float], float], axis_y: float) -> list[str]:
    return [
        f'<line x1="{x(tv):.1f}" y1="{axis_y}" x2="{x(tv):.1f}" y2="{axis_y + 4}" stroke="#444"/>'
        f'<text x="{x(tv):.1f}" y="{axis_y + 16}" text-anchor="middle">{tv:g}</text>'
        for tv in nice_ticks(0, end)
    ]


def y_ticks(ymax: float, y: Callable[[float], float], left: float, label: Callable[[float], str]) -> list[str]:
    return [
        f'<line x1="{left - 4}" y1="{y(yv):.1f}" x2="{left}" y2="{y(yv):.1f}" stroke="#444"/>'
        f'<text x="{left - 6}" y="{y(yv) + 4:.1f}" text-anchor="end">{label(yv)}</text>'
        for yv in nice_ticks(0, ymax, 4)
    ]


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
        svg_open("timeline", width, height),
        f'<text x="{left}" y="16" font-weight="bold">{escape(title or trace.id)}</text>',
    ]
    rects, seen = _state_rects(trace, view, x, y=top, height=ph, in_ms=True)
    out += rects
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>')
    out += x_ticks(end_ms, x, top + ph)
    out.append(f'<text x="{left + pw / 2}" y="{height - 4}" text-anchor="middle">time since first event (ms)</text>')
    out += y_ticks(ymax, y, left, _bytes)
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
    out.append(legend_line(lx, ly, "cwnd", 'stroke="#08306b" stroke-width="1.4"'))
    ly += 15
    out.append(legend_line(lx, ly, "bytes in flight", 'stroke="#d94801" stroke-dasharray="3,2"'))
    out += state_legend(seen, lx, ly, lambda state: _opacity(state, True))
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
    out = [svg_open("heatmap", width, height), f'<text x="8" y="14" font-weight="bold">{escape(title)}</text>']
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


def rate_logs_for(traces: Iterable[Trace]) -> dict[str, list[tuple[float, float]]]:
    """Trace id -> ``[(seconds, bit/s), ...]``: the bottleneck rate schedule (Fig. 11) the emulator of each trace's
    testbed run followed (``emulator.rate_log`` of the sidecar ``meta.json``, each read once), for the traces
    that have one. The schedule starts when the client is launched, so it is aligned with the connection's first
    event, one handshake off: small against periods of a second or more."""
    from quicsm.errors import InputError
    from quicsm.traces.runmeta import RunMeta, read_meta

    logs: dict[Path, list[tuple[float, float]]] = {}
    out: dict[str, list[tuple[float, float]]] = {}
    for trace in traces:
        for src in trace.sources:
            path = Path(src).parent / "meta.json"
            if path not in logs:
                try:
                    meta: RunMeta = read_meta(str(path), RunMeta)
                    logs[path] = meta.emulator.rate_log if meta.emulator is not None else []
                except InputError:  # none, or not a testbed run's
                    logs[path] = []
            if logs[path]:
                out[trace.id] = logs[path]
                break
    return out


def rate_timeline_svg(
    trace: Trace,
    rate_log: Sequence[tuple[float, float]],
    view: StateView = StateView(),
    *,
    width: int = 760,
    title: str | None = None,
) -> str:
    """Bottleneck rate (step curve) and the sender's pacing rate (dots, when logged) in Mbit/s over time,
    with the state strip below on the same time axis (seconds since the connection's first event)."""
    left, right, top = 64, 150, 26
    plot_h, strip_h, gap, bottom = 150, 22, 8, 34
    height = top + plot_h + gap + strip_h + bottom
    pw = width - left - right
    t0 = trace.start_us
    end_s = max(trace.duration_us / 1e6, rate_log[-1][0] if rate_log else 0.0, 1e-3)
    pacing = [((e.t_us - t0) / 1e6, e.pacing_bps / 1e6) for e in trace.events if e.pacing_bps]
    ymax = max([r / 1e6 for _, r in rate_log] + [p for _, p in pacing] + [1.0]) * 1.08

    def x(t: float) -> float:
        return left + pw * min(max(t, 0.0), end_s) / end_s

    def y(v: float) -> float:
        return top + plot_h * (1 - v / ymax)

    out = [
        svg_open("rate-timeline", width, height),
        f'<text x="{left}" y="16" font-weight="bold">{escape(title or trace.id)}</text>',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{plot_h}" fill="none" stroke="#444"/>',
        *y_ticks(ymax, y, left, lambda v: f"{v:g}"),
    ]
    out.append(y_title("Mbit/s", top + plot_h / 2))
    rate = step_path([(t, r / 1e6) for t, r in rate_log], x, y, end_s)
    out.append(f'<path d="{rate}" fill="none" stroke="#08306b" stroke-width="1.6"/>')
    for t, p in pacing:
        out.append(f'<circle cx="{x(t):.1f}" cy="{y(p):.1f}" r="1.6" fill="#d94801"/>')
    strip_y = top + plot_h + gap
    rects, seen = _state_rects(trace, view, x, y=strip_y, height=strip_h, in_ms=False)
    out += rects
    out.append(f'<rect x="{left}" y="{strip_y}" width="{pw}" height="{strip_h}" fill="none" stroke="#444"/>')
    out += x_ticks(end_s, x, strip_y + strip_h)
    out.append(
        f'<text x="{left + pw / 2}" y="{height - 4}" text-anchor="middle">time since the connection started (s)</text>'
    )
    lx, ly = left + pw + 12, top + 6
    out.append(legend_line(lx, ly, "bottleneck rate", 'stroke="#08306b" stroke-width="1.6"'))
    if pacing:
        ly += 15
        out.append(
            f'<circle cx="{lx + 9}" cy="{ly}" r="2" fill="#d94801"/><text x="{lx + 22}" y="{ly + 4}">pacing rate</text>'
        )
    out += state_legend(seen, lx, ly, lambda state: _opacity(state, False))
    out.append("</svg>")
    return "".join(out)
