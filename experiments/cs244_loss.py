"""CS244 '16 "QUIC loss recovery": throughput of QUIC and TCP (both Cubic) on one link as random
downlink loss grows (0, 0.1, 1, 2, 5, 10 %), with the time each spends in Recovery (and TCP's Loss).

    sudo python3 experiments/cs244_loss.py run [--runs 3]
    python3 experiments/cs244_loss.py analyse

One long flow per run (quicsm.testbed.flows): 10 Mbit/s, 20 ms RTT (10 ms each way), 1-BDP queue,
loss on the server-to-client direction only (as CS244's Mahimahi loss shell), 15 s; throughput is
the flow's bytes at the bottleneck's egress from 1.5 s to 15 s.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fmt_p, git_rev, welch_p, write_report
from _flows import load_series, run_series

from quicsm.compare.fairness import flow_state_metrics, load_flow_run
from quicsm.testbed.flows import FlowScenario, FlowSpec

HERE = Path(__file__).resolve().parent
OUT = Path("/tmp/qsm-exp/cs244")
LOSSES = (0.0, 0.001, 0.01, 0.02, 0.05, 0.10)
STACKS = {"quicgo": FlowSpec("quic-go", "cubic", name="flow"), "tcp": FlowSpec("tcp", "cubic", name="flow")}


def scenario(stack: str, loss: float) -> FlowScenario:
    return FlowScenario(
        flows=(STACKS[stack],),
        rate_mbps=10.0,
        rtt_ms=20.0,
        queue="1bdp",
        loss=loss,
        loss_up=0.0,
        duration_s=15.0,
        name=f"{stack}-loss{loss * 100:g}",
    )


def _svg(rows: dict[str, list[tuple[float, float, float]]]) -> str:
    """Throughput (mean +- sd) against loss, one line per stack; loss on a symmetric-log axis."""
    import math

    w, h, left, top, pw, ph = 640, 330, 60, 30, 440, 240
    xs = [0.0, *[math.log10(p * 100) + 2 for p in LOSSES[1:]]]  # 0 %, then log scale from 0.1 %
    xmax = max(xs)
    ymax = max(m + s for pts in rows.values() for _, m, s in pts) * 1.1 or 1.0
    colours = {"quicgo": "#1f77b4", "tcp": "#d62728"}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">']
    out.append(
        f'<rect width="{w}" height="{h}" fill="white"/><rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>'
    )
    out.append(
        f'<text x="{left}" y="18" font-size="13">Throughput vs downlink loss (10 Mbit/s, 20 ms RTT, Cubic)</text>'
    )

    def x(loss: float) -> float:
        v = 0.0 if loss == 0 else math.log10(loss * 100) + 2
        return left + v / xmax * pw

    def y(v: float) -> float:
        return top + ph - v / ymax * ph

    for loss in LOSSES:
        out.append(f'<text x="{x(loss):.0f}" y="{top + ph + 14}" text-anchor="middle">{loss * 100:g}%</text>')
    for v in range(0, int(ymax) + 1, 2):
        out.append(f'<text x="{left - 6}" y="{y(v) + 4:.0f}" text-anchor="end">{v}</text>')
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(v):.0f}" y2="{y(v):.0f}" stroke="#eee"/>')
    out.append(f'<text x="{left + pw / 2}" y="{h - 12}" text-anchor="middle">loss (server to client)</text>')
    out.append(
        f'<text x="14" y="{top + ph / 2}" transform="rotate(-90 14 {top + ph / 2})" text-anchor="middle">Mbit/s</text>'
    )
    for k, (stack, pts) in enumerate(rows.items()):
        col = colours.get(stack, "#333")
        d = "M" + " L".join(f"{x(p):.1f},{y(m):.1f}" for p, m, _ in pts)
        out.append(f'<path d="{d}" fill="none" stroke="{col}" stroke-width="1.6"/>')
        for p, m, s in pts:
            out.append(
                f'<line x1="{x(p):.1f}" x2="{x(p):.1f}" y1="{y(m - s):.1f}" y2="{y(m + s):.1f}" stroke="{col}"/>'
            )
            out.append(f'<circle cx="{x(p):.1f}" cy="{y(m):.1f}" r="2.5" fill="{col}"/>')
        out.append(f'<rect x="{left + pw + 14}" y="{top + 16 * k}" width="12" height="10" fill="{col}"/>')
        out.append(
            f'<text x="{left + pw + 30}" y="{top + 9 + 16 * k}">{"quic-go Cubic" if stack == "quicgo" else "Linux TCP Cubic"}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)


def analyse(out: Path) -> None:
    table = [
        "| loss | stack | runs | throughput Mbit/s mean (sd) | time in Recovery | time in Loss (RTO) | Recovery entries/s | p (QUIC vs TCP) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    svg_rows: dict[str, list[tuple[float, float, float]]] = {s: [] for s in STACKS}
    for loss in LOSSES:
        thr_by: dict[str, list[float]] = {}
        for stack in STACKS:
            sc = scenario(stack, loss)
            runs = [load_flow_run(p) for p in load_series(out, sc.name)]
            if not runs:
                continue
            thr = [r.flows[0].throughput_mbps for r in runs]
            thr_by[stack] = thr
            rec, los, ent = [], [], []
            for r in runs:
                f = r.flows[0]
                m = flow_state_metrics(f, r.window_s)
                share_loss = _state_share(f, r.window_s, "Loss")
                los.append(share_loss)
                rec.append((m["recovery_share"] or 0.0) - share_loss)
                ent.append(m["recovery_per_s"] or 0.0)
            mean, sd = statistics.fmean(thr), statistics.stdev(thr) if len(thr) > 1 else 0.0
            svg_rows[stack].append((loss, mean, sd))
            p = fmt_p(welch_p(thr_by["quicgo"], thr_by["tcp"])) if stack == "tcp" and "quicgo" in thr_by else ""
            table.append(
                f"| {loss * 100:g} % | {'quic-go' if stack == 'quicgo' else 'tcp'} | {len(runs)} | {mean:.2f} ({sd:.2f}) | "
                f"{statistics.fmean(rec):.1%} | {statistics.fmean(los):.1%} | {statistics.fmean(ent):.2f} | {p} |"
            )
    (HERE / "cs244_loss.svg").write_text(_svg(svg_rows))
    text = f"""# CS244 '16 reproduced: QUIC and TCP throughput as loss grows, with time in Recovery

quic-go v0.65.0 Cubic (instrumented) and the kernel's TCP Cubic (Linux, HTTP/2 + TLS 1.3 Go server,
traced with bpftrace) on one emulated link: 10 Mbit/s (tc tbf), 20 ms RTT (IP-layer relay), 1-BDP
drop-tail queue, Bernoulli loss on the server-to-client direction only, as CS244's Mahimahi setup.
One long download per run, 15 s; throughput = the flow's bytes leaving the bottleneck from 1.5 s to
15 s. Time in Recovery / Loss = share of that window the sender spent in the state (contract logs;
quic-go's from its qlog). p: Welch's t-test of the throughputs.

Generated {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC by `experiments/cs244_loss.py analyse` (repo {git_rev()}).

{chr(10).join(table)}

![throughput vs loss](cs244_loss.svg)
"""
    write_report(HERE / "cs244_loss.md", text, HERE / "cs244_loss.notes.md")


def _state_share(flow, window: tuple[float, float], state: str) -> float:  # type: ignore[no-untyped-def]
    from quicsm.traces.events import StateView

    if flow.trace is None or flow.offset_s is None:
        return 0.0
    lo, hi = window
    tot = part = 0.0
    for v in flow.trace.visits(StateView()):
        a, b = max(lo, flow.t(v.start_us)), min(hi, flow.t(v.end_us))
        if b > a:
            tot += b - a
            if v.state == state:
                part += b - a
    return part / tot if tot else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("run", "analyse"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    out = Path(args.out)
    if args.what == "run":
        for loss in LOSSES:
            for stack in STACKS:
                counts = run_series(scenario(stack, loss), out, args.runs, per_lock=3)
                print(f"{stack} {loss}: {counts}", file=sys.stderr)
        return
    analyse(out)


if __name__ == "__main__":
    main()
