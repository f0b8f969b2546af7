"""A grid run's connections as traces, and IMC'17 Fig. 9: the congestion window of the compared arms over
time on one axis, each arm's states as a strip beneath (what the window did, and which state it was in).

A run's connections are read from its ``server.log`` (contract lines). The warm-up connections of a 0-RTT
run (the client's first connection, which only fetched a session ticket; ``warmup`` in the client's
result) are the first ones the server's log holds and are left out. For the cwnd curve a run's qlog is
preferred when the server wrote one (``qlog = true``: a sample on every ACK), else the contract lines'
cwnd values (one per state change for patched QUIC senders, on every change for the kernel's TCP).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from quicsm.compare.svg import (
    downsample,
    legend_line,
    state_colour,
    state_legend,
    step_path,
    svg_open,
    x_ticks,
    y_ticks,
    y_title,
)
from quicsm.textsafe import html as escape
from quicsm.traces import StateView, Trace, parse_inputs
from quicsm.traces.runmeta import RunMeta

__all__ = ["ARM_COLOURS", "cwnd_timeline_svg", "cwnd_trace", "run_traces", "warmup_count"]

ARM_COLOURS = ("#08306b", "#d94801", "#238b45", "#6a51a3", "#a50f15")


def warmup_count(meta: RunMeta) -> int:
    """Connections the client made before the measured page load (0-RTT's ticket connection)."""
    n = meta.result.client.get("warmup", 0) if meta.result else 0
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 0


def run_traces(run_dir: Path, meta: RunMeta) -> list[Trace]:
    """The measured connections of one run (warm-ups left out), in the order they started."""
    log = Path(run_dir) / "server.log"
    if not log.is_file():
        return []
    traces = parse_inputs([str(log)], require_transitions=False).traces
    traces = sorted((t for t in traces if t.events), key=lambda t: t.start_us)
    return traces[warmup_count(meta) :]


def cwnd_trace(run_dir: Path, meta: RunMeta) -> tuple[Trace | None, str]:
    """The run's page-load connection for a cwnd timeline: (trace, ``qlog`` or ``log``)."""
    qlogs = sorted(str(p) for p in (Path(run_dir) / "qlog").glob("*") if p.is_file())
    if qlogs:
        cc = meta.cc or None
        traces = parse_inputs(qlogs, cc=cc, require_transitions=False).traces
        if traces:  # the page load has the most events (a 0-RTT warm-up connection lives as long, idle)
            return max(traces, key=lambda t: len(t.events)), "qlog"
    traces = run_traces(Path(run_dir), meta)
    return (max(traces, key=lambda t: len(t.events)), "log") if traces else (None, "")


def _unit(end_ms: float) -> tuple[float, str]:
    return (1000.0, "s") if end_ms > 5000 else (1.0, "ms")


def cwnd_timeline_svg(
    series: Sequence[tuple[str, Trace]],
    view: StateView = StateView(),
    *,
    title: str = "",
    width: int = 860,
    height: int = 260,
    max_points: int = 2000,
) -> str:
    """cwnd of every (label, trace) over time since its first event, one colour each, with one state strip
    per trace beneath the plot (IMC'17 Fig. 9 with the paper's method added: the states)."""
    left, right, top = 70, 170, 28
    strip_h, strip_gap = 14, 6
    plot_h = height - top - 40
    strips_h = len(series) * (strip_h + strip_gap)
    n_states = len({v.state for _, t in series for v in t.visits(view)})
    total_h = max(top + plot_h + 40 + strips_h + 8, top + 16 * len(series) + 15 * n_states + 24)
    pw = width - left - right
    curves = []
    end_ms = 1.0
    ymax = 1.0
    for _, t in series:
        t0 = t.start_us
        pts = [((e.t_us - t0) / 1000, float(e.cwnd)) for e in t.events if e.cwnd is not None]
        curves.append(downsample(pts, max_points))
        end_ms = max(end_ms, t.duration_us / 1000)
        ymax = max([ymax] + [v for _, v in pts])
    ymax *= 1.05
    scale, unit = _unit(end_ms)
    end = end_ms / scale

    def x(tv: float) -> float:
        return left + pw * tv / end

    def y(v: float) -> float:
        return top + plot_h * (1 - v / ymax)

    out = [
        svg_open("timeline", width, total_h),
        f'<text x="{left}" y="16" font-weight="bold">{escape(title)}</text>',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{plot_h}" fill="none" stroke="#444"/>',
    ]
    axis_y = top + plot_h
    out += x_ticks(end, x, axis_y)
    out.append(
        f'<text x="{left + pw / 2}" y="{axis_y + 32}" text-anchor="middle">time since the connection\'s first event ({unit})</text>'
    )
    out += y_ticks(ymax, y, left, lambda v: f"{v / 1e3:g} kB" if v < 1e6 else f"{v / 1e6:g} MB")
    out.append(y_title("cwnd", top + plot_h / 2))
    seen: dict[str, str] = {}
    lx = left + pw + 14
    for k, ((label, t), pts) in enumerate(zip(series, curves)):
        colour = ARM_COLOURS[k % len(ARM_COLOURS)]
        scaled = [(tv / scale, v) for tv, v in pts]
        if scaled:
            out.append(
                f'<path d="{step_path(scaled, x, y, t.duration_us / 1000 / scale)}" fill="none" stroke="{colour}" '
                f'stroke-width="1.3"><title>{escape(label)}</title></path>'
            )
        ly = top + 8 + 16 * k
        out.append(legend_line(lx, ly, escape(label), f'stroke="{colour}" stroke-width="2"'))
        sy = axis_y + 40 + k * (strip_h + strip_gap)
        short = label.split(" (")[0]
        out.append(
            f'<text x="{left - 6}" y="{sy + strip_h - 3}" text-anchor="end" fill="{colour}">{escape(short)}</text>'
        )
        t0 = t.start_us
        for v in t.visits(view):
            if v.duration_us <= 0:
                continue
            fill = state_colour(v.state)
            seen.setdefault(v.state, fill)
            a, b = (v.start_us - t0) / 1000 / scale, (v.end_us - t0) / 1000 / scale
            out.append(
                f'<rect x="{x(a):.1f}" y="{sy}" width="{max(x(b) - x(a), 0.4):.1f}" height="{strip_h}" fill="{fill}" '
                f'fill-opacity="0.8"><title>{escape(label)}: {escape(v.state)} {a:.3g}-{b:.3g} {unit}</title></rect>'
            )
    out += state_legend(seen, lx, top + 1 + 16 * len(series), lambda state: "0.8")
    out.append("</svg>")
    return "".join(out)
