"""Fairness of flows that shared one bottleneck (``quicsm.testbed.flows`` runs): each flow's share of
the throughput, Jain's index, and throughput, cwnd and state timelines of all flows on one time axis
(IMC'17 Table 4 and Fig. 5).

A run directory holds ``meta.json`` (``"kind": "flows"``: the bottleneck's per-flow byte series and
each flow's clock offset) and one ``flow-<name>/`` per flow with its contract log (and, for quic-go,
its qlog, whose per-ACK metrics give the cwnd timeline). Every trace is put on the run's axis:
seconds since the relay's first bin.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from quicsm.compare.report import CompareFile
from quicsm.errors import InputError, QuicsmError
from quicsm.textsafe import csv_cell, md_name
from quicsm.textsafe import html as escape
from quicsm.traces.events import StateView, Trace
from quicsm.traces.runmeta import FlowEntry, FlowsRunMeta, read_meta

if TYPE_CHECKING:
    from quicsm.compare.comparison import CompareOptions, Comparison
    from quicsm.compare.sets import TraceSet

__all__ = [
    "Flow",
    "FlowRun",
    "FlowSummary",
    "jain_index",
    "is_flow_run",
    "load_flow_run",
    "summarise_flows",
    "flow_state_metrics",
    "fairness_markdown",
    "fairness_json",
    "flows_timeline_svg",
    "fairness_html",
    "fairness_section",
    "Fairness",
    "FairnessFile",
    "FlowComparison",
    "RunRecord",
    "fairness",
    "compare_flow_runs",
    "flows_report_html",
    "fairness_output",
]

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")


@dataclass
class Flow:
    """One flow of a run: where its bytes and its sender's states went, on the run's time axis."""

    name: str
    stack: str
    cc: str
    start_s: float
    throughput_mbps: float
    """Mean rate at the bottleneck over the run's measurement window."""
    series_mbps: list[float]
    trace: Trace | None
    offset_s: float | None
    """Add to ``t_us / 1e6`` to get seconds on the run's axis (None: the flow's clock is unknown)."""

    def t(self, t_us: int) -> float:
        return t_us / 1e6 + (self.offset_s or 0.0)


@dataclass
class FlowRun:
    path: Path
    scenario: str
    flows: list[Flow]
    bin_s: float
    window_s: tuple[float, float]
    """Measurement window on the run's axis (seconds since the relay's first bin)."""
    link_mbps: float
    origin_s: float = 0.0
    """When the first client started, on the run's axis (timelines start here)."""
    meta: FlowsRunMeta | None = field(repr=False, default=None)

    @property
    def jain(self) -> float:
        return jain_index([f.throughput_mbps for f in self.flows])


def jain_index(xs: Sequence[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when equal, 1/n when one flow takes all."""
    xs = [float(x) for x in xs]
    sq = sum(x * x for x in xs)
    if not xs or sq == 0:
        return math.nan
    return sum(xs) ** 2 / (len(xs) * sq)


def is_flow_run(path: Path | str) -> bool:
    """Whether ``path`` is a multi-flow run directory (its ``meta.json`` says ``"kind": "flows"``)."""
    try:
        return read_meta(str(Path(path) / "meta.json"), _Kind).kind == "flows"
    except InputError:
        return False


class _Kind(msgspec.Struct):
    kind: str | None = None


LogTraces = Callable[[Path, str], list[Trace]]
"""A flow's contract log and its cc -> the log's traces (read now, or taken from a read made already)."""


def _read_log(log: Path, cc: str) -> list[Trace]:
    from quicsm.traces import parse_inputs

    return parse_inputs([str(log)], cc=cc, require_transitions=False).traces


def _trace_of(flow_dir: Path, cc: str, log_traces: LogTraces) -> tuple[Trace | None, str]:
    """The flow's longest connection: from its qlog when it has one (per-ACK cwnd), else its log."""
    from quicsm.traces import parse_inputs

    qlogs = sorted(str(p) for p in (flow_dir / "qlog").glob("*") if p.is_file())
    if qlogs and (traces := parse_inputs(qlogs, cc=cc, require_transitions=False).traces):
        return max(traces, key=lambda t: t.duration_us), "qlog"
    log = _server_log(flow_dir)
    if log.exists() and (traces := log_traces(log, cc)):
        return max(traces, key=lambda t: t.duration_us), "log"
    return None, ""


def _server_log(flow_dir: Path) -> Path:
    """The flow's contract log: ``server.log``, or ``server.log.gz`` as traces/ ships it."""
    plain = flow_dir / "server.log"
    return plain if plain.exists() or not (flow_dir / "server.log.gz").exists() else flow_dir / "server.log.gz"


def load_flow_run(path: Path | str, log_traces: LogTraces = _read_log) -> FlowRun:
    """Read one multi-flow run directory (see the module docstring); ``log_traces`` gives a flow log's
    traces (default: read it)."""
    path = Path(path)
    if not is_flow_run(path):
        raise QuicsmError(f'{path}/meta.json: not a multi-flow run (no "kind": "flows")')
    meta: FlowsRunMeta = read_meta(str(path / "meta.json"), FlowsRunMeta)
    series = meta.series
    t0_us = series.t0_unix_ns // 1000
    flows = []
    for fm in meta.flows:
        fdir = path / f"flow-{fm.name}"
        trace, kind = _trace_of(fdir, fm.cc, log_traces)
        offset = None
        if trace is not None:
            if kind == "log" and fm.t_us_to_unix_us is not None:
                offset = (fm.t_us_to_unix_us - t0_us) / 1e6
            else:  # qlog times start at the connection: place its start where the log's first event is
                offset = _qlog_offset(fdir, fm, trace, t0_us, log_traces)
        mbps = [b * 8 / series.bin_s / 1e6 for b in series.bytes.get(fm.name, [])]
        flows.append(Flow(fm.name, fm.stack, fm.cc, fm.start_s, fm.throughput_mbps, mbps, trace, offset))
    sc = meta.scenario
    lo, hi = meta.window_s
    origin = meta.clients_start_s
    if origin is None:  # runs made before the window was kept on the relay's clock
        origin = min((fm.start_unix_ns // 1000 - t0_us) / 1e6 - fm.start_s for fm in meta.flows)
        lo, hi = lo + origin, hi + origin
    return FlowRun(path, str(sc["name"]), flows, series.bin_s, (lo, hi), float(sc["rate_mbps"]), origin, meta)


def _qlog_offset(fdir: Path, fm: FlowEntry, qtrace: Trace, t0_us: int, log_traces: LogTraces) -> float | None:
    """Align a qlog trace by the patched log of the same connection: both start at its first state."""
    log = _server_log(fdir)
    if fm.t_us_to_unix_us is None or not log.exists():
        return None
    traces = log_traces(log, fm.cc)
    if not traces:
        return None
    lt = max(traces, key=lambda t: t.duration_us)
    first_log = (lt.events[0].t_us + fm.t_us_to_unix_us - t0_us) / 1e6
    return first_log - qtrace.events[0].t_us / 1e6


class FlowSummary(msgspec.Struct, frozen=True):
    """One flow role (by name) across runs of one scenario (a row of the fairness JSON's ``flows``)."""

    name: str
    stack: str
    cc: str
    runs: int
    mean_mbps: float
    sd_mbps: float
    share: float | None
    """Mean share of the bottleneck's delivered bytes in the window (None: nothing was delivered)."""
    recovery_share: float | None
    """Share of the flow's time in the window spent in Recovery or Loss (None: no trace there)."""
    recovery_per_s: float | None
    ca_growth_kb_s: float | None
    """Median cwnd growth within CongestionAvoidance stays (kB/s), where cwnd was sampled in them."""


def flow_state_metrics(flow: Flow, window: tuple[float, float]) -> dict[str, float | None]:
    """Time share in Recovery (and Loss), Recovery entries per second, and cwnd growth in
    CongestionAvoidance, over the part of the flow's trace inside ``window`` (run seconds)."""
    out: dict[str, float | None] = {"recovery_share": math.nan, "recovery_per_s": math.nan, "ca_growth_kb_s": None}
    tr = flow.trace
    if tr is None or flow.offset_s is None:
        return out
    lo, hi = window
    rec = total = 0.0
    entries = 0
    for v in tr.visits(StateView()):
        a, b = max(lo, flow.t(v.start_us)), min(hi, flow.t(v.end_us))
        if b <= a:
            continue
        total += b - a
        if v.state.split(".")[0] in ("Recovery", "Loss"):
            rec += b - a
            if flow.t(v.start_us) >= lo:
                entries += 1
    if total > 0:
        out["recovery_share"] = rec / total
        out["recovery_per_s"] = entries / total
    slopes = []
    stay: list[tuple[float, int]] = []
    for ev in tr.events:
        t = flow.t(ev.t_us)
        if ev.state == "CongestionAvoidance" and ev.cwnd is not None and lo <= t <= hi:
            if ev.kind == "transition":
                stay = []
            stay.append((t, ev.cwnd))
        elif ev.kind == "transition" and stay:
            if len(stay) >= 2 and stay[-1][0] - stay[0][0] >= 0.05:
                slopes.append((stay[-1][1] - stay[0][1]) / (stay[-1][0] - stay[0][0]) / 1000)
            stay = []
    if slopes:
        slopes.sort()
        out["ca_growth_kb_s"] = slopes[len(slopes) // 2]
    return out


def summarise_flows(runs: Sequence[FlowRun]) -> list[FlowSummary]:
    """Per flow name: mean and sd of its throughput over the runs, its share, state metrics."""
    import statistics

    names: list[str] = []
    for r in runs:
        for f in r.flows:
            if f.name not in names:
                names.append(f.name)
    out = []
    for n in names:
        fl = [(r, f) for r in runs for f in r.flows if f.name == n]
        thr = [f.throughput_mbps for _, f in fl]
        shares = [f.throughput_mbps / s for r, f in fl if (s := sum(g.throughput_mbps for g in r.flows)) > 0]
        mets = [flow_state_metrics(f, r.window_s) for r, f in fl]
        rs = [
            m["recovery_share"] for m in mets if m["recovery_share"] is not None and not math.isnan(m["recovery_share"])
        ]
        rp = [
            m["recovery_per_s"] for m in mets if m["recovery_per_s"] is not None and not math.isnan(m["recovery_per_s"])
        ]
        ca = [m["ca_growth_kb_s"] for m in mets if m["ca_growth_kb_s"] is not None]
        out.append(
            FlowSummary(
                n,
                fl[0][1].stack,
                fl[0][1].cc,
                len(fl),
                statistics.fmean(thr),
                statistics.stdev(thr) if len(thr) > 1 else 0.0,
                statistics.fmean(shares) if shares else None,
                statistics.fmean(rs) if rs else None,
                statistics.fmean(rp) if rp else None,
                statistics.median(ca) if ca else None,
            )
        )
    return out


class RunRecord(msgspec.Struct):
    """One run of the fairness JSON: its directory, scenario, Jain's index and each flow's throughput."""

    run: str
    scenario: str
    jain: float | None
    """None when no flow delivered a byte."""
    throughput_mbps: dict[str, float]


class FairnessFile(msgspec.Struct, omit_defaults=True):
    """``quicsm compare RUN... --format json`` of multi-flow runs (schema: quicsm/schemas/fairness.schema.json)."""

    runs: list[RunRecord]
    flows: list[FlowSummary]
    comparison: CompareFile | None = None
    """The usual compare JSON of the flows' traces (one set per flow name), with two flow names or more."""


@dataclass
class Fairness:
    """Multi-flow runs with their flow metrics, computed once (:func:`summarise_flows`); the writers
    below only write it."""

    runs: list[FlowRun]
    flows: list[FlowSummary]


def fairness(runs: Sequence[FlowRun]) -> Fairness:
    """The runs and their per-flow metrics."""
    return Fairness(list(runs), summarise_flows(runs))


def fairness_json(f: Fairness, comparison: Comparison | None = None) -> dict[str, Any]:
    """The fairness JSON (:class:`FairnessFile`) as built-in values; a NaN index is null."""
    from quicsm.compare.report import to_json

    runs = [
        RunRecord(
            str(r.path),
            r.scenario,
            None if math.isnan(r.jain) else r.jain,
            {x.name: x.throughput_mbps for x in r.flows},
        )
        for r in f.runs
    ]
    out: dict[str, Any] = msgspec.to_builtins(FairnessFile(runs, f.flows))
    if comparison is not None:
        out["comparison"] = to_json(comparison)
    return out


def _fmt(x: float | None, spec: str) -> str:
    return "n/a" if x is None else format(x, spec)


def fairness_markdown(f: Fairness) -> str:
    """Table: per flow, throughput mean (sd) over runs, share, time in Recovery, CA growth; Jain."""
    import statistics

    runs = f.runs
    if not runs:
        return "(no flow runs)\n"
    rows = [
        "| flow | stack | cc | runs | throughput Mbit/s mean (sd) | share | time in Recovery/Loss | Recovery entries/s | cwnd growth in CA kB/s |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s in f.flows:
        ca = _fmt(s.ca_growth_kb_s, ".1f")
        name, stack, cc = (md_name(x, in_table=True) for x in (s.name, s.stack, s.cc))
        rows.append(
            f"| {name} | {stack} | {cc} | {s.runs} | {s.mean_mbps:.2f} ({s.sd_mbps:.2f}) | {_fmt(s.share, '.1%')} | "
            f"{_fmt(s.recovery_share, '.1%')} | {_fmt(s.recovery_per_s, '.2f')} | {ca} |"
        )
    jains = [r.jain for r in runs if not math.isnan(r.jain)]
    sd = statistics.stdev(jains) if len(jains) > 1 else 0.0
    rows.append("")
    rows.append(f"Jain's index over the flows of a run: {statistics.fmean(jains):.3f} (sd {sd:.3f}, {len(jains)} runs)")
    return "\n".join(rows) + "\n"


def flows_timeline_svg(run: FlowRun, *, width: int = 860, title: str | None = None, max_points: int = 2000) -> str:
    """Three panels on one time axis: every flow's throughput at the bottleneck, its cwnd, and a
    band per flow coloured by the state its sender was in (Fig. 5 style)."""
    from quicsm.compare.svg import downsample, nice_ticks, state_colour, step_path

    t_lo = max(0.0, run.origin_s - 0.5)
    end = max((len(f.series_mbps) * run.bin_s for f in run.flows), default=1.0) - t_lo
    end = end if end > 0 else 1.0
    left, right, top = 96, 230, 40
    pw = width - left - right
    h_thr, h_cwnd, band = 150, 170, 16
    gap = 34
    y_cwnd0 = top + h_thr + gap
    y_band0 = y_cwnd0 + h_cwnd + gap
    height = max(y_band0 + band * len(run.flows) + 40, y_band0 + 14 * 14 + 10)

    def x(t: float) -> float:
        return left + max(0.0, min(t - t_lo, end)) / end * pw

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">'
    ]
    out.append(f'<rect width="{width}" height="{height}" fill="white"/>')
    out.append(
        f'<text x="{left}" y="16" font-size="13">{escape(title or f"{run.scenario}: {run.path.name}")} '
        f"(Jain {run.jain:.3f})</text>"
    )
    ymax_thr = max([v for f in run.flows for v in f.series_mbps] + [run.link_mbps]) * 1.05
    cw = [
        [(f.t(e.t_us), float(e.cwnd)) for e in f.trace.events if e.cwnd is not None]
        if f.trace and f.offset_s is not None
        else []
        for f in run.flows
    ]
    ymax_cw = max([v for pts in cw for _, v in pts] + [1.0]) * 1.05
    for y0, h, ymax, label, fmt in (
        (top, h_thr, ymax_thr, "Mbit/s at bottleneck", lambda v: f"{v:g}"),
        (y_cwnd0, h_cwnd, ymax_cw, "cwnd (kB)", lambda v: f"{v / 1000:g}"),
    ):
        out.append(f'<rect x="{left}" y="{y0}" width="{pw}" height="{h}" fill="none" stroke="#999"/>')
        out.append(f'<text x="{left}" y="{y0 - 6}">{label}</text>')
        for v in nice_ticks(0, ymax, 4):
            yy = y0 + h - v / ymax * h
            out.append(f'<line x1="{left - 4}" x2="{left + pw}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#eee"/>')
            out.append(f'<text x="{left - 6}" y="{yy + 4:.1f}" text-anchor="end">{fmt(v)}</text>')
    lo, hi = run.window_s
    out.append(
        f'<rect x="{x(lo):.1f}" y="{top}" width="{x(hi) - x(lo):.1f}" height="{h_thr}" fill="#f4f4f4" opacity="0.6"/>'
    )
    for i, f in enumerate(run.flows):
        col = PALETTE[i % len(PALETTE)]
        pts = [(k * run.bin_s, v) for k, v in enumerate(f.series_mbps)]
        if pts:
            out.append(
                f'<path d="{step_path(pts, x, lambda v: top + h_thr - v / ymax_thr * h_thr, t_lo + end)}" fill="none" '
                f'stroke="{col}" stroke-width="1.3"/>'
            )
        cpts = downsample(sorted(cw[i]), max_points)
        if cpts:
            out.append(
                f'<path d="{step_path(cpts, x, lambda v: y_cwnd0 + h_cwnd - v / ymax_cw * h_cwnd, cpts[-1][0])}" '
                f'fill="none" stroke="{col}" stroke-width="1.2"/>'
            )
        yl = top + 14 + 16 * i
        out.append(f'<rect x="{left + pw + 10}" y="{yl - 9}" width="12" height="10" fill="{col}"/>')
        out.append(
            f'<text x="{left + pw + 26}" y="{yl}">{escape(f.name)} ({escape(f.stack)} {escape(f.cc)}) {f.throughput_mbps:.2f}</text>'
        )
        yb = y_band0 + band * i
        out.append(f'<text x="{left - 6}" y="{yb + 11}" text-anchor="end">{escape(f.name)}</text>')
        if f.trace is not None and f.offset_s is not None:
            for vis in f.trace.visits(StateView()):
                a, b = x(f.t(vis.start_us)), x(f.t(vis.end_us))
                if b - a < 0.2:
                    continue
                out.append(
                    f'<rect x="{a:.1f}" y="{yb}" width="{b - a:.1f}" height="{band - 3}" fill="{state_colour(vis.state)}">'
                    f"<title>{escape(vis.state)}</title></rect>"
                )
    seen: list[str] = []
    for f in run.flows:
        if f.trace is not None:
            for vis in f.trace.visits(StateView()):
                if vis.state not in seen:
                    seen.append(vis.state)
    ly = y_band0
    for k, st in enumerate(seen[:14]):
        out.append(f'<rect x="{left + pw + 10}" y="{ly + 14 * k}" width="10" height="10" fill="{state_colour(st)}"/>')
        out.append(f'<text x="{left + pw + 24}" y="{ly + 14 * k + 9}">{escape(st)}</text>')
    axis_y = y_band0 + band * len(run.flows) + 6
    for t in nice_ticks(0, end - (run.origin_s - t_lo), 8):
        xt = x(t + run.origin_s)
        out.append(f'<line x1="{xt:.1f}" x2="{xt:.1f}" y1="{top}" y2="{axis_y}" stroke="#f0f0f0"/>')
        out.append(f'<text x="{xt:.1f}" y="{axis_y + 12}" text-anchor="middle">{t:g}</text>')
    out.append(
        f'<text x="{left + pw / 2:.0f}" y="{axis_y + 28}" text-anchor="middle">seconds since the first flow started</text>'
    )
    out.append("</svg>")
    return "\n".join(out)


def _fairness_body(f: Fairness, *, timelines: int = 3) -> str:
    """The fairness table, Jain's index per run and the Fig. 5-style timelines of the first
    ``timelines`` runs, as an HTML fragment (the fairness page's body and the report's section)."""
    import re

    runs = f.runs
    md = fairness_markdown(f)
    rows: list[str] = []
    for line in md.splitlines():
        if line.startswith("|") and not re.fullmatch(r"\|[-:|]+\|", line):
            cells = [escape(c.strip()) for c in line.strip("|").split("|")]
            tag = "th" if not rows else "td"
            rows.append("<tr>" + "".join(f"<{tag}>{c}</{tag}>" for c in cells) + "</tr>")
    jain = "".join(
        f"<tr><td>{escape(str(r.path))}</td><td>{escape(r.scenario)}</td><td>{r.jain:.3f}</td>"
        + "".join(f"<td>{escape(x.name)} {x.throughput_mbps:.2f}</td>" for x in r.flows)
        + "</tr>"
        for r in runs
    )
    figs = "".join(f'<div class="figure">{flows_timeline_svg(r)}</div>' for r in runs[:timelines])
    tail = next((ln for ln in md.splitlines() if ln.startswith("Jain")), "")
    width = max((len(r.flows) for r in runs), default=1)
    return (
        f'<table class="fairness">{"".join(rows)}</table>'
        f"<p>{escape(tail)}</p><h3>Runs</h3><table><tr><th>run</th><th>scenario</th><th>Jain</th>"
        f'<th colspan="{width}">Mbit/s per flow</th></tr>{jain}</table>'
        f"<h3>Timelines (one time axis per run)</h3>{figs}"
    )


def fairness_section(f: Fairness, *, timelines: int = 3) -> tuple[str, str]:
    """The fairness view as a (title, HTML) section of the compare report (``to_html(sections=...)``)."""
    n = len(f.runs)
    return (
        f"Fairness of flows on one bottleneck ({n} run{'s' if n != 1 else ''})",
        _fairness_body(f, timelines=timelines),
    )


def _figures_head() -> str:
    """The reports' shared figure layout (natural size, zoom, pan): compare/templates/_figures.html."""
    from importlib.resources import files

    return files("quicsm.compare").joinpath("templates/_figures.html").read_text(encoding="utf-8")


def fairness_html(f: Fairness, *, timelines: int = 3) -> str:
    """A self-contained page of the fairness view alone (multi-flow runs with a single flow name)."""
    title, body = fairness_section(f, timelines=timelines)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Fairness</title><style>'
        "body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1200px;padding:0 1em}"
        "table{border-collapse:collapse;font-size:.9em;margin:.5em 0 1em}th,td{border:1px solid #ddd;padding:3px 8px}"
        "th{background:#f3f3f3}</style>" + _figures_head() + "</head><body>"
        f"<h1>{escape(title)}</h1>{body}</body></html>\n"
    )


def _flow_logs(runs: Sequence[tuple[Path, Sequence[str]]]) -> dict[str, list[str]]:
    """Per flow name (in the order flows first appear), the contract logs of that flow in every run
    (``runs``: each run's directory and flow names)."""
    out: dict[str, list[str]] = {}
    for path, names in runs:
        for name in names:
            log = _server_log(path / f"flow-{name}")
            paths = out.setdefault(name, [])
            if log.exists():
                paths.append(str(log))
    return out


def _flow_sets(logs: dict[str, list[str]], view: StateView, metrics: bool, strict: bool) -> list[TraceSet]:
    from quicsm.compare.sets import load_rows

    sets = []
    for name, paths in logs.items():
        if not paths:
            raise QuicsmError(f"flow {name!r}: no server log in any run")
        origin = f"flow-{name} of {len(paths)} run{'s' if len(paths) != 1 else ''}"
        sets.append(load_rows(paths, view, name=name, origin=origin, metrics=metrics, strict=strict))
    return sets


@dataclass
class FlowComparison(Fairness):
    """Multi-flow runs, their flow metrics, and the comparison of their flows' traces (None with a
    single flow name): what ``quicsm compare RUN...`` writes."""

    comparison: Comparison | None = None
    sets: list[TraceSet] = field(default_factory=list)


def compare_flow_runs(
    paths: Sequence[str | Path], options: CompareOptions | None = None, *, strict: bool = False
) -> FlowComparison:
    """What ``quicsm compare RUN...`` does with multi-flow run directories: read the runs (throughput,
    Jain, timelines), measure each flow (:func:`summarise_flows`) and compare the flows' traces, one set
    per flow name, with ``options``. Each flow log is read once, with its metrics: the fairness view's
    traces come from the sets' read."""
    from quicsm.compare.comparison import CompareOptions, compare

    options = options or CompareOptions()
    dirs = [Path(p) for p in paths]
    names = [
        [fm.name for fm in read_meta(str(d / "meta.json"), FlowsRunMeta).flows] if is_flow_run(d) else [] for d in dirs
    ]
    logs = _flow_logs(list(zip(dirs, names)))
    # each log read once: the sets keep their events, which the fairness view's traces come from
    sets = _flow_sets(logs, options.view, True, strict) if len(logs) >= 2 else []

    def from_sets(log: Path, cc: str) -> list[Trace]:
        for ts in sets:
            rows = [r for r in ts.rows if r.trace.sources == (str(log),)]
            if rows:
                return ts.with_events(rows)
        return _read_log(log, cc)

    f = fairness([load_flow_run(d, from_sets) for d in dirs])
    if not sets:
        return FlowComparison(f.runs, f.flows)
    return FlowComparison(f.runs, f.flows, compare(sets, options), sets)


def flows_report_html(fc: FlowComparison, *, timelines: int = 3, diagrams: bool = True) -> str:
    """The compare HTML report of the flows' traces with the fairness view as its first section
    (``timelines``: Fig. 5 timelines of that many runs)."""
    if fc.comparison is None:
        return fairness_html(fc, timelines=timelines)
    from quicsm.compare.html import to_html

    return to_html(fc.comparison, diagrams=diagrams, sections=[fairness_section(fc, timelines=timelines)])


def fairness_output(fc: FlowComparison, fmt: str) -> str:
    """``quicsm compare RUN... --format fmt``: the fairness table (Markdown for text and markdown),
    then the flows' comparison in the same format; JSON holds both (:class:`FairnessFile`); CSV is the
    per-flow fairness table only."""
    import csv
    import io

    from quicsm.compare.report import WRITERS

    if fmt == "json":
        return json.dumps(fairness_json(fc, fc.comparison), indent=2, default=str) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        rows: list[dict[str, Any]] = [
            {k: csv_cell(v) if isinstance(v, str) else v for k, v in msgspec.structs.asdict(s).items()}
            for s in fc.flows
        ]
        w = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["name"])
        w.writeheader()
        w.writerows(rows)
        return buf.getvalue()
    text = fairness_markdown(fc)
    if fc.comparison is not None:
        text += "\n" + WRITERS[fmt](fc.comparison)
    return text
