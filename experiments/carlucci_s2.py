"""Carlucci et al. S2: QUIC's share of a bottleneck shared with TCP Cubic at three buffer sizes, and both
flows' state machines (experiments/carlucci_s2.toml).

    sudo python3 experiments/carlucci_s2.py run       # long flows in locked stretches, resumable
    python3 experiments/carlucci_s2.py report         # experiments/carlucci_s2.md and carlucci_s2-*.svg

Each run is a quicsm.testbed.flows run (both flows through one tbf queue and the IP relay). The report
gives per buffer the two flows' throughput (measured at the bottleneck), QUIC/TCP with a 95 % interval (t
on the log ratio over runs), whether it differs from the paper's ratio, QUIC's share, and the flows'
states compared (occupancy tests, time in Recovery, cwnd growth in CongestionAvoidance), with the
median run's timeline and the two flows' state diagrams side by side.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tomllib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from _common import fmt_p, git_rev, table, write_report
from _flows import load_series, run_series

HERE = Path(__file__).resolve().parent
SPEC = HERE / "carlucci_s2.toml"


def _spec() -> dict[str, Any]:
    return tomllib.loads(SPEC.read_text())


def _scenario(spec: dict[str, Any], buffer: str) -> Any:
    from quicsm.testbed.flows import FlowScenario, parse_flow

    return FlowScenario(
        flows=tuple(parse_flow(f) for f in spec["flows"]),
        rate_mbps=float(spec["rate"]),
        rtt_ms=float(spec["rtt"]),
        queue=buffer,
        duration_s=float(spec["duration"]),
        name=f"q{buffer}",
    )


def run() -> None:
    spec = _spec()
    out = Path(spec["out"])
    for buffer in spec["buffers"]:
        counts = run_series(_scenario(spec, buffer), out, int(spec["runs"]), retries=4, per_lock=6)
        print(f"buffer {buffer}: {counts}", file=sys.stderr)


def _ratio_ci(ratios: list[float]) -> tuple[float, float, float]:
    """Geometric mean of QUIC/TCP over runs and its 95 % interval (t on the log ratio)."""
    from scipy import stats as sps

    logs = np.log(np.asarray(ratios))
    m = float(logs.mean())
    half = (
        float(sps.t.ppf(0.975, len(logs) - 1) * logs.std(ddof=1) / math.sqrt(len(logs))) if len(logs) > 1 else math.nan
    )
    return math.exp(m), math.exp(m - half), math.exp(m + half)


def _vs_paper(ratios: list[float], paper: float) -> float | None:
    """p of a one-sample t-test of log(QUIC/TCP) against log(the paper's ratio)."""
    from scipy import stats as sps

    if len(ratios) < 2:
        return None
    return float(sps.ttest_1samp(np.log(ratios), math.log(paper)).pvalue)


def report() -> None:
    from quicsm.compare.comparison import CompareOptions
    from quicsm.compare.fairness import compare_flow_runs, flows_timeline_svg
    from quicsm.compare.figures import side_by_side_dot
    from quicsm.compare.stats import welch
    from quicsm.diagrams.render import write_picture
    from quicsm.files import write_output

    spec = _spec()
    out = Path(spec["out"])
    for old in HERE.glob("carlucci_s2-*.svg"):
        old.unlink()
    rows, state_rows, flow_rows = [], [], []
    pictures = []
    for buffer in spec["buffers"]:
        name = f"q{buffer}"
        paths = load_series(out, name)
        if not paths:
            print(f"buffer {buffer}: no good runs in {out}", file=sys.stderr)
            continue
        fc = compare_flow_runs([str(p) for p in paths], CompareOptions(models=True))
        runs = fc.runs
        thr = {f: [next(x.throughput_mbps for x in r.flows if x.name == f) for r in runs] for f in ("quic", "tcp")}
        ratios = [q / t for q, t in zip(thr["quic"], thr["tcp"]) if t > 0]
        gm, lo, hi = _ratio_ci(ratios)
        paper = float(spec["paper_ratio"][buffer])
        w = welch(np.asarray(thr["tcp"]), np.asarray(thr["quic"]))
        share = statistics.fmean(q / (q + t) for q, t in zip(thr["quic"], thr["tcp"]))
        total = statistics.fmean(q + t for q, t in zip(thr["quic"], thr["tcp"]))
        rows.append(
            [
                buffer,
                len(runs),
                f"{statistics.fmean(thr['quic']):.2f} ({statistics.stdev(thr['quic']):.2f})",
                f"{statistics.fmean(thr['tcp']):.2f} ({statistics.stdev(thr['tcp']):.2f})",
                f"{gm:.2f} [{lo:.2f}, {hi:.2f}]",
                f"{paper:g}x",
                fmt_p(_vs_paper(ratios, paper)),
                f"{share:.0%}",
                f"{total / float(spec['rate']):.0%}",
                fmt_p(w.p_value),
            ]
        )
        for s in fc.flows:
            ca, rs, rp, sh = (
                "n/a" if v is None else format(v, f)
                for v, f in (
                    (s.ca_growth_kb_s, ".1f"),
                    (s.recovery_share, ".1%"),
                    (s.recovery_per_s, ".2f"),
                    (s.share, ".1%"),
                )
            )
            flow_rows.append([buffer, s.name, rs, rp, ca, sh])
        c = fc.comparison
        if c is not None:
            pair = c.pair("quic", "tcp") if any(p.a == "quic" for p in c.pairs) else c.pairs[0]
            for r in sorted(pair.states, key=lambda r: (not r.significant, -abs(r.difference)))[:6]:
                quic, tcp = (r.mean_a, r.mean_b) if r.a == "quic" else (r.mean_b, r.mean_a)  # difference is b - a
                state_rows.append(
                    [
                        buffer,
                        r.state,
                        f"{100 * quic:.1f}%",
                        f"{100 * tcp:.1f}%",
                        f"{100 * (quic - tcp):+.1f} pp",
                        fmt_p(r.p_corrected) + (" *" if r.significant else ""),
                    ]
                )
            if c.models:
                path = HERE / f"carlucci_s2-states-{name}.svg"
                write_picture(side_by_side_dot(c), str(path))
                pictures.append(path)
        mid = sorted(runs, key=lambda r: next(f.throughput_mbps for f in r.flows if f.name == "quic"))[
            (len(runs) - 1) // 2
        ]
        path = HERE / f"carlucci_s2-timeline-{name}.svg"
        write_output(
            str(path), flows_timeline_svg(mid, title=f"buffer {buffer}: {mid.path.name} (median QUIC throughput)")
        )
        pictures.append(path)
    text = [
        "# Carlucci et al. S2: QUIC and TCP Cubic sharing one bottleneck, three buffer sizes",
        "",
        spec["description"] + f"; {spec['runs']} runs per buffer, throughput over the window from 2 s after the start.",
        "",
        table(
            [
                "buffer",
                "runs",
                "QUIC Mbit/s (sd)",
                "TCP Mbit/s (sd)",
                "QUIC/TCP [95 %]",
                "paper",
                "p vs paper",
                "QUIC share",
                "utilization",
                "p QUIC vs TCP",
            ],
            rows,
        ),
        "QUIC/TCP: geometric mean over runs with a t interval on the log ratio; p vs paper: one-sample t-test of the"
        " log ratio against the paper's ratio; p QUIC vs TCP: Welch's t-test of the two flows' throughputs.",
        "",
        "## The flows' states",
        "",
        table(
            ["buffer", "flow", "time in Recovery/Loss", "Recovery entries/s", "cwnd growth in CA (kB/s)", "share"],
            flow_rows,
        ),
        table(["buffer", "state", "quic", "tcp", "quic - tcp", "corrected p"], state_rows),
        "Occupancy tests: each connection's share of time per state, Welch, Holm over the states, * = significant at 0.01.",
        "",
    ]
    for p in pictures:
        text.append(f"![{p.stem}]({p.name})")
    text += [
        "",
        f"Generated by `python3 experiments/carlucci_s2.py report` (runs: `sudo python3 experiments/carlucci_s2.py run`), quicsm {git_rev()}.",
        "",
    ]
    write_report(HERE / "carlucci_s2.md", "\n".join(text), HERE / "carlucci_s2.notes.md")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("run", "report"))
    args = ap.parse_args()
    run() if args.what == "run" else report()


if __name__ == "__main__":
    main()
