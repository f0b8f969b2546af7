"""IMC'17 Fig. 9 in numbers: for one cell of a finished grid (default: imc17_fig8_loss at 100 Mbit/s, 1 % loss,
10 MB), each arm's congestion window over its page load and its loss episodes, over every good run.

    python3 experiments/fig9_cwnd.py [--grid imc17_fig8_loss] [--cell loss=1%,rate=100,size=10MB]

Per arm (median over runs, with the runs' range): the time-weighted mean cwnd, the time spent in loss
recovery (Recovery, and TCP's Loss after a timeout), loss episodes per second, the backoff of an episode
(the cwnd on leaving it over the cwnd just before entering it) and timeouts per second. Window and episodes
come from the trace the grid's timeline draws: the server's qlog (a sample per ACK, with its logged states)
when the run kept one, else the contract lines (the kernel's TCP: a line on every cwnd change); timeouts
from the contract lines (the qlog has no PTO state).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import table

HERE = Path(__file__).resolve().parent
LOSS_STATES = ("Recovery", "Loss")
TIMEOUT_STATES = ("Loss", "ProbeTimeout")
"""TCP's Loss (after a retransmission timeout) and quic-go's ProbeTimeout (a PTO; QUIC keeps its window)."""


def _mean_cwnd(trace) -> float | None:  # type: ignore[no-untyped-def]
    """Time-weighted mean of the cwnd step curve from its first sample to the trace's end (bytes)."""
    pts = [(e.t_us, e.cwnd) for e in trace.events if e.cwnd is not None]
    if len(pts) < 2:
        return None
    end = max(trace.events[-1].t_us, pts[-1][0])
    area = sum(c * (t1 - t0) for (t0, c), (t1, _) in zip(pts, [*pts[1:], (end, 0)]))
    return area / (end - pts[0][0]) if end > pts[0][0] else None


def _episodes(trace) -> tuple[int, float, list[float]]:  # type: ignore[no-untyped-def]
    """(loss episodes, share of the connection's time in them, backoffs: cwnd leaving / cwnd before entering)."""
    evs = trace.events
    visits = trace.visits()
    dur = max(trace.duration_us, 1)
    n, inside, backoffs = 0, 0, []
    for v in visits:
        if v.state not in LOSS_STATES:
            continue
        n += 1
        inside += v.end_us - v.start_us
        before = [e.cwnd for e in evs if e.t_us < v.start_us and e.cwnd is not None]
        after = [e.cwnd for e in evs if e.t_us >= v.end_us and e.cwnd is not None]
        if before and after and before[-1]:
            backoffs.append(after[0] / before[-1])
    return n, inside / dur, backoffs


def _fmt(xs: list[float], f: str) -> str:
    if not xs:
        return "n/a"
    return f"{format(statistics.median(xs), f)} [{format(min(xs), f)}, {format(max(xs), f)}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grid", default="imc17_fig8_loss")
    ap.add_argument("--cell", default="loss=1%,rate=100,size=10MB")
    args = ap.parse_args()
    from quicsm.grids.results import load_grid_runs
    from quicsm.grids.timeline import cwnd_trace, run_traces

    spec = tomllib.loads((HERE / f"{args.grid}.toml").read_text())
    runs = load_grid_runs(Path(spec["out"]))
    rows = []
    for arm in spec["arms"]:
        recs = [r for r in runs.records if r.good and r.arm == arm and r.cell == args.cell]
        mean_kb, share, per_s, backoff, plt, timeouts = [], [], [], [], [], []
        for r in recs:
            curve, _ = cwnd_trace(r.run_dir, r.meta)
            traces = run_traces(r.run_dir, r.meta)
            if curve is None or not traces:
                continue
            states = max(traces, key=lambda t: len(t.events))
            m = _mean_cwnd(curve)
            if m is not None:
                mean_kb.append(m / 1000)
            n, sh, bo = _episodes(curve)
            share.append(100 * sh)
            per_s.append(n / max(curve.duration_us / 1e6, 1e-6))
            rto = sum(1 for v in states.visits() if v.state in TIMEOUT_STATES)
            timeouts.append(rto / max(states.duration_us / 1e6, 1e-6))
            backoff += bo
            plt.append(float(r.meta.result.plt_ms if r.meta.result and r.meta.result.plt_ms else "nan") / 1000)
        rows.append(
            [
                arm,
                str(len(recs)),
                _fmt(plt, ".2f"),
                _fmt(mean_kb, ".0f"),
                _fmt(share, ".0f"),
                _fmt(per_s, ".1f"),
                _fmt(backoff, ".2f"),
                _fmt(timeouts, ".2f"),
            ]
        )
    print(f"{args.grid}, {args.cell}: median [min, max] over the good runs\n")
    print(
        table(
            [
                "arm",
                "runs",
                "page load (s)",
                "mean cwnd (kB)",
                "time in loss recovery (%)",
                "loss episodes / s",
                "backoff per episode",
                "timeouts / s",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
