"""The bottleneck rate a testbed run's emulator set (a Fig. 11 rate schedule), drawn above the sender's
state timeline, so a report shows whether ProbeBw.Up and Down follow the rate changes.

The schedule comes from the run's sidecar ``meta.json`` (``emulator.rate_log``: seconds since the transfer
started, rate in bit/s), found beside the trace's source file. The schedule starts when the client is
launched, so its zero is aligned with the connection's first event; they differ by the handshake (one RTT
and the client's start-up), small against schedule periods of a second or more.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from pathlib import Path

from quicsm.compare.svg import nice_ticks, state_colour
from quicsm.traces.events import StateView, Trace

__all__ = ["rate_log_for", "rate_timeline_svg"]


def rate_log_for(trace: Trace) -> list[tuple[float, float]] | None:
    """``[(seconds, bit/s), ...]`` of the run the trace came from, or None without a rate schedule."""
    for src in trace.sources:
        meta = Path(src).parent / "meta.json"
        try:
            data = json.loads(meta.read_text())
        except (OSError, ValueError):
            continue
        log = (data.get("emulator") or {}).get("rate_log") if isinstance(data, dict) else None
        if isinstance(log, list) and log:
            try:
                return [(float(t), float(r)) for t, r in log]
            except (TypeError, ValueError):
                return None
    return None


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
        f'<svg xmlns="http://www.w3.org/2000/svg" class="rate-timeline" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<text x="{left}" y="16" font-weight="bold">{escape(title or trace.id)}</text>',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{plot_h}" fill="none" stroke="#444"/>',
    ]
    for yv in nice_ticks(0, ymax, 4):
        out.append(
            f'<line x1="{left - 4}" y1="{y(yv):.1f}" x2="{left}" y2="{y(yv):.1f}" stroke="#444"/>'
            f'<text x="{left - 6}" y="{y(yv) + 4:.1f}" text-anchor="end">{yv:g}</text>'
        )
    out.append(
        f'<text x="14" y="{top + plot_h / 2}" transform="rotate(-90 14 {top + plot_h / 2})" '
        'text-anchor="middle">Mbit/s</text>'
    )
    path = [f"M{x(rate_log[0][0]):.1f},{y(rate_log[0][1] / 1e6):.1f}"]
    for t, r in rate_log[1:]:
        path.append(f"H{x(t):.1f}V{y(r / 1e6):.1f}")
    path.append(f"H{x(end_s):.1f}")
    out.append(f'<path d="{"".join(path)}" fill="none" stroke="#08306b" stroke-width="1.6"/>')
    for t, p in pacing:
        out.append(f'<circle cx="{x(t):.1f}" cy="{y(p):.1f}" r="1.6" fill="#d94801"/>')
    strip_y = top + plot_h + gap
    seen: dict[str, str] = {}
    for v in trace.visits(view):
        if v.duration_us <= 0:
            continue
        colour = state_colour(v.state)
        seen.setdefault(v.state, colour)
        x0, x1 = x((v.start_us - t0) / 1e6), x((v.end_us - t0) / 1e6)
        out.append(
            f'<rect x="{x0:.1f}" y="{strip_y}" width="{max(x1 - x0, 0.3):.1f}" height="{strip_h}" '
            f'fill="{colour}" fill-opacity="{_opacity(v.state)}"><title>{escape(v.state)} '
            f"{(v.start_us - t0) / 1e6:.3f}-{(v.end_us - t0) / 1e6:.3f} s</title></rect>"
        )
    out.append(f'<rect x="{left}" y="{strip_y}" width="{pw}" height="{strip_h}" fill="none" stroke="#444"/>')
    axis_y = strip_y + strip_h
    for tv in nice_ticks(0, end_s):
        out.append(
            f'<line x1="{x(tv):.1f}" y1="{axis_y}" x2="{x(tv):.1f}" y2="{axis_y + 4}" stroke="#444"/>'
            f'<text x="{x(tv):.1f}" y="{axis_y + 16}" text-anchor="middle">{tv:g}</text>'
        )
    out.append(
        f'<text x="{left + pw / 2}" y="{height - 4}" text-anchor="middle">time since the connection started (s)</text>'
    )
    lx, ly = left + pw + 12, top + 6
    out.append(
        f'<line x1="{lx}" y1="{ly}" x2="{lx + 18}" y2="{ly}" stroke="#08306b" stroke-width="1.6"/>'
        f'<text x="{lx + 22}" y="{ly + 4}">bottleneck rate</text>'
    )
    if pacing:
        ly += 15
        out.append(
            f'<circle cx="{lx + 9}" cy="{ly}" r="2" fill="#d94801"/><text x="{lx + 22}" y="{ly + 4}">pacing rate</text>'
        )
    for state, colour in sorted(seen.items()):
        ly += 15
        out.append(
            f'<rect x="{lx}" y="{ly - 6}" width="18" height="10" fill="{colour}" '
            f'fill-opacity="{_opacity(state)}"/><text x="{lx + 22}" y="{ly + 3}">{escape(state)}</text>'
        )
    out.append("</svg>")
    return "".join(out)


_PHASE_OPACITY = {"Up": "0.95", "Down": "0.15", "Refill": "0.6", "Cruise": "0.35"}


def _opacity(state: str) -> str:
    """ProbeBw's phases share a family colour; their shade tells them apart (Up darkest, Down lightest)."""
    return _PHASE_OPACITY.get(state.partition(".")[2], "0.5")
