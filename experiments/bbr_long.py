"""BBR on long flows, two implementations: the whole cycle (bbr2_cycle.md) and Fig. 13 for BBR
(fig13_bbr_long.md).

    sudo python3 experiments/bbr_long.py                  # run bbr_long.toml, bundle, analyse, draw
    python3 experiments/bbr_long.py --analyse-only        # analyse runs already made (or the bundle)

Scenarios (``experiments/bbr_long.toml``): Cloudflare quiche 0.30.0 BBR2 and quinn-proto 0.11.19 BBR (v1)
behind the same path (50 Mbit/s, 36 ms RTT, 1-BDP queue), the Go client streaming for ``duration``
seconds, unthrottled (desktop) and under a 10 % CPU quota (mobile); the same under a Fig. 11 rate schedule.
Good runs are bundled into ``traces/bbr-long/<scenario>/`` and everything is computed from the bundle.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bbr import cycle_stats, mode_visits, summarise
from _common import fmt_p, git_rev, mean_sd, table, welch_p
from bundle_traces import bundle

from quicsm.testbed.runner import read_meta
from quicsm.traces import Trace, parse_inputs

HERE = Path(__file__).resolve().parent
TRACES = HERE.parent / "traces" / "bbr-long"
IMPLS = {"quiche": ("Cloudflare quiche 0.30.0", "BBR2"), "quinn": ("quinn-proto 0.11.19", "BBR (v1)")}
SHARE_STATES = ("Startup", "Drain", "ProbeBw.Down", "ProbeBw.Cruise", "ProbeBw.Refill", "ProbeBw.Up", "ProbeRtt")

# Design values, from the sources (experiments/bbr_implementations.md): what the cycle should look like at
# 50 Mbit/s and 36 ms RTT.
DESIGN = {
    "quiche": {
        "cruise": "≈ 2.0 s (probe wait 2 s from ProbeBw.Down; Reno bound min(63, BDP/MSS) rounds ≈ 2.3 s)",
        "up": "≥ 1 round (36 ms); ends on 2 rounds of queue or on loss > 1.5 %",
        "down": "until inflight ≤ target (≤ 1 round when the queue drains)",
        "refill": "1 round (≈ 36 ms)",
        "cycle": "≈ 2.1 s (Down + Cruise + Refill + Up)",
        "ups_per_cycle": "1",
        "downs_per_cycle": "1",
        "probe_rtt_first": "≈ 10 s after the last min-RTT sample",
        "probe_rtt_interval": "10 s unless a lower RTT sample refreshes the min RTT",
        "probe_rtt": "200 ms + 1 round at 0.5 BDP",
    },
    "quinn": {
        "cruise": "6 steps of ≥ 1 min RTT: ≈ 216 ms",
        "up": "≥ 1 min RTT (36 ms), held until inflight ≥ 1.25 BDP unless loss",
        "down": "≤ 1 min RTT, ends early at inflight ≤ BDP",
        "refill": "— (no such phase in v1)",
        "cycle": "8 steps of ≥ 1 min RTT: ≈ 0.29 s",
        "ups_per_cycle": "1",
        "downs_per_cycle": "1",
        "probe_rtt_first": "first round (the 10 s timer starts expired)",
        "probe_rtt_interval": "10 s from the last ProbeRtt start, whatever the RTT samples",
        "probe_rtt": "200 ms at 0.75 BDP",
    },
}
ROWS = [
    ("cruise", "ProbeBw.Cruise stay"),
    ("up", "ProbeBw.Up stay"),
    ("down", "ProbeBw.Down stay"),
    ("refill", "ProbeBw.Refill stay"),
    ("cycle", "cycle (Up entry to Up entry)"),
    ("ups_per_cycle", "Up stays per cycle"),
    ("downs_per_cycle", "Down stays per cycle"),
    ("probe_rtt_first", "first ProbeRtt entry"),
    ("probe_rtt_interval", "ProbeRtt entry to the next"),
    ("probe_rtt", "ProbeRtt stay"),
]


def _quicsm(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "quicsm", *args], check=True, capture_output=True, text=True).stdout


def load(group: Path) -> list[tuple[Trace, dict[str, Any]]]:
    """(longest trace, meta) of every run bundled in ``group``."""
    out = []
    for log in sorted(group.glob("*/server.log.gz")):
        traces = parse_inputs([str(log)], require_transitions=False).traces
        if traces:
            out.append((max(traces, key=lambda t: t.duration_us), read_meta(log.parent)))
    return out


def shares(trace: Trace) -> dict[str, float]:
    """Time share per state of one connection (ApplicationLimited kept as its own state)."""
    total = max(trace.duration_us, 1)
    out: dict[str, float] = {}
    for v in trace.visits():
        out[v.state] = out.get(v.state, 0.0) + v.duration_us / total
    return out


def mode_shares(trace: Trace) -> dict[str, float]:
    """Time share per BBR mode state, ApplicationLimited folded into the mode underneath."""
    total = max(trace.duration_us, 1)
    out: dict[str, float] = {}
    for v in mode_visits(trace):
        out[v.state] = out.get(v.state, 0.0) + v.duration_us / total
    return out


def acks_per_data(meta: dict[str, Any]) -> float | None:
    """Data packets per ACK-carrying packet through the relay (down received / up received)."""
    relay = (meta.get("emulator") or {}).get("relay") or {}
    up, down = (relay.get("up") or {}).get("received"), (relay.get("down") or {}).get("received")
    return down / up if up and down else None


def fmt_ms(x: float) -> str:
    return f"{1000 * x:.0f}"


def cycle_report(groups: dict[str, list[tuple[Trace, dict[str, Any]]]]) -> str:
    rows = []
    for impl in IMPLS:
        runs = groups.get(f"{impl}-desktop", [])
        if not runs:
            continue
        got = summarise(cycle_stats(t) for t, _ in runs)
        for key, label in ROWS:
            rows.append([f"{impl}", label, got[key], DESIGN[impl][key]])
    return table(["stack", "measure", "measured: median (min–max), n", "design value"], rows)


def schedule_report(groups: dict[str, list[tuple[Trace, dict[str, Any]]]]) -> str:
    """Per rate period of the schedule (pooled over runs): how often Up is entered and how much of the
    period Up takes, by bottleneck rate band; and the correlation of rate with each, per stack."""
    import numpy as np

    rows = []
    for impl in IMPLS:
        runs = groups.get(f"{impl}-schedule", [])
        periods: list[tuple[float, float, float]] = []  # (rate Mbit/s, Up entries per s, Up share)
        for trace, meta in runs:
            log = (meta.get("emulator") or {}).get("rate_log") or []
            visits = mode_visits(trace)
            t0 = trace.start_us
            ends = [t for t, _ in log[1:]] + [trace.duration_us / 1e6]
            for (start, rate), end in zip(log, ends, strict=False):
                if end <= start:
                    continue
                ups = [v for v in visits if v.state == "ProbeBw.Up"]
                n = sum(start <= (v.start_us - t0) / 1e6 < end for v in ups)
                up_time = sum(
                    max(0.0, min(end, (v.end_us - t0) / 1e6) - max(start, (v.start_us - t0) / 1e6)) for v in ups
                )
                periods.append((rate / 1e6, n / (end - start), up_time / (end - start)))
        if len(periods) < 3:
            continue
        a = np.array(periods)
        for lo, hi in ((10, 40), (40, 70), (70, 101)):
            sel = a[(a[:, 0] >= lo) & (a[:, 0] < hi)]
            if len(sel):
                rows.append([impl, f"{lo}–{hi} Mbit/s", len(sel), f"{sel[:, 1].mean():.1f}", f"{sel[:, 2].mean():.3f}"])
        r_n = np.corrcoef(a[:, 0], a[:, 1])[0, 1]
        r_s = np.corrcoef(a[:, 0], a[:, 2])[0, 1]
        rows.append([impl, "correlation with the rate", len(a), f"r = {r_n:+.2f}", f"r = {r_s:+.2f}"])
    return table(["stack", "bottleneck rate", "periods", "Up entries per s", "Up share of the period"], rows)


def rtt_step_report(groups: dict[str, list[tuple[Trace, dict[str, Any]]]]) -> str:
    """When ProbeRtt is entered around an RTT step: every entry's time, and the min RTT the lines carry."""
    rows = []
    for impl in IMPLS:
        for trace, meta in groups.get(f"{impl}-rttstep", []):
            step = (meta.get("params") or {}).get("rtt_step") or "?"
            t0 = trace.start_us
            entries = [e for e in trace.events if e.kind == "transition" and e.state == "ProbeRtt"]
            at = ", ".join(
                f"{(e.t_us - t0) / 1e6:.2f} s (min RTT {e.min_rtt_us / 1000:.1f} ms)" for e in entries if e.min_rtt_us
            )
            rtts = sorted({round(e.min_rtt_us / 1000) for e in trace.events if e.min_rtt_us})
            rows.append([impl, meta["labels"]["run"], step, at or "none", f"{rtts[0]}–{rtts[-1]} ms" if rtts else "—"])
    return table(["stack", "run", "RTT step (after:RTT)", "ProbeRtt entries", "min RTT seen"], rows)


def fig13_report(groups: dict[str, list[tuple[Trace, dict[str, Any]]]]) -> tuple[str, list[list[str]]]:
    rows, details = [], []
    for impl in IMPLS:
        d, m = groups.get(f"{impl}-desktop", []), groups.get(f"{impl}-mobile", [])
        if not d or not m:
            continue
        measures = [
            ("ProbeBw.Up share (mode view)", lambda t, _: mode_shares(t).get("ProbeBw.Up", 0.0), "{:.3f}"),
            ("ProbeBw.Down share (mode view)", lambda t, _: mode_shares(t).get("ProbeBw.Down", 0.0), "{:.3f}"),
            ("ProbeBw.Cruise share (mode view)", lambda t, _: mode_shares(t).get("ProbeBw.Cruise", 0.0), "{:.3f}"),
            ("ApplicationLimited share", lambda t, _: shares(t).get("ApplicationLimited", 0.0), "{:.3f}"),
            (
                "median ProbeBw.Up stay (ms)",
                lambda t, _: 1000 * statistics.median(cycle_stats(t).up_s or [math.nan]),
                "{:.0f}",
            ),
            (
                "longest ProbeBw.Up stay (ms)",
                lambda t, _: 1000 * max(cycle_stats(t).up_s or [math.nan]),
                "{:.0f}",
            ),
            ("Up stays ended by loss-free Down (share)", lambda t, _: _up_ended_quietly(t), "{:.2f}"),
            ("inflight / estimated BDP at Up exit (median)", lambda t, _: _inflight_at_up_exit(t), "{:.2f}"),
            ("bandwidth estimate (Mbit/s, median)", lambda t, _: _bw_estimate(t), "{:.0f}"),
            ("data packets per ACK packet (relay)", lambda _, meta: acks_per_data(meta) or math.nan, "{:.1f}"),
            ("goodput (Mbit/s)", lambda _, meta: _goodput(meta), "{:.1f}"),
        ]
        for name, fn, fmt in measures:
            a = [fn(t, meta) for t, meta in d]
            b = [fn(t, meta) for t, meta in m]
            a2 = [x for x in a if not math.isnan(x)]
            b2 = [x for x in b if not math.isnan(x)]
            ma, sa = mean_sd(a2)
            mb, sb = mean_sd(b2)
            p = welch_p(b2, a2) if len(a2) > 1 and len(b2) > 1 else None
            rows.append(
                [impl, name, f"{fmt.format(ma)} ± {fmt.format(sa)}", f"{fmt.format(mb)} ± {fmt.format(sb)}", fmt_p(p)]
            )
        details.append([impl, str(len(d)), str(len(m))])
    return table(
        ["stack", "measure (per connection)", "desktop mean ± sd", "mobile mean ± sd", "p (Welch)"], rows
    ), details


def _goodput(meta: dict[str, Any]) -> float:
    client = (meta.get("result") or {}).get("client") or {}
    if client.get("goodput_mbps"):
        return float(client["goodput_mbps"])
    plt = (meta.get("result") or {}).get("plt_ms")
    return float(client.get("bytes", 0)) * 8 / plt / 1000 if plt else math.nan


def _bw_estimate(trace: Trace) -> float:
    """Median of the controller's bandwidth estimate over its lines: ``bw_bps`` where logged (quinn), else the
    pacing rate on entering Cruise (quiche BBR2: pacing gain 1 there, so pacing = estimate)."""
    xs = [e.bw_bps for e in trace.events if e.bw_bps]
    if not xs:
        xs = [e.pacing_bps for e in trace.events if e.pacing_bps and e.state == "ProbeBw.Cruise"]
    return statistics.median(xs) / 1e6 if xs else math.nan


def _inflight_at_up_exit(trace: Trace) -> float:
    """Median of bytes in flight over the estimated BDP (estimate x min RTT) on the lines that leave Up."""
    ratios, prev = [], None
    for e in trace.events:
        if e.kind != "transition":
            continue
        if prev == "ProbeBw.Up" and e.state != "ApplicationLimited":
            # quiche logs no estimate: its pacing rate on the line is the new phase's gain times the estimate
            gain = {"ProbeBw.Down": 0.9, "ProbeBw.Cruise": 1.0, "ProbeBw.Refill": 1.0}.get(e.state)
            bw = e.bw_bps or (e.pacing_bps / gain if e.pacing_bps and gain else None)
            if bw and e.min_rtt_us and e.inflight is not None:
                ratios.append(e.inflight / (bw / 8 * e.min_rtt_us / 1e6))
        if e.state != "ApplicationLimited":
            prev = e.state
    return statistics.median(ratios) if ratios else math.nan


def _up_ended_quietly(trace: Trace) -> float:
    """Share of Up stays whose exit line was not triggered by a loss (queue or target reached)."""
    exits = []
    prev = None
    for e in trace.events:
        if e.kind != "transition":
            continue
        if prev == "ProbeBw.Up" and e.state != "ApplicationLimited":
            exits.append(e.trigger != "loss")
        if e.state != "ApplicationLimited":
            prev = e.state
    return sum(exits) / len(exits) if exits else math.nan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", default=str(HERE / "bbr_long.toml"))
    ap.add_argument("--out", default=None, help="run directory (default: the scenario file's out)")
    ap.add_argument("--analyse-only", action="store_true", help="no new runs; bundle what --out holds, if any")
    ap.add_argument("--no-bundle", action="store_true", help="analyse traces/bbr-long as it is")
    args = ap.parse_args()
    from quicsm.testbed.matrix import load_matrix

    m = load_matrix(Path(args.scenarios))
    out = Path(args.out) if args.out else m.out
    assert out is not None
    names = [sc.config.name for sc in m.scenarios]
    if not args.analyse_only:
        subprocess.run(
            [sys.executable, "-m", "quicsm", "testbed", "matrix", args.scenarios, "--out", str(out), "--retries", "2"],
            check=True,
        )
    if not args.no_bundle and out.is_dir():
        for n in names:
            shutil.rmtree(TRACES / n, ignore_errors=True)
        bundle(out, TRACES, {n: n for n in names}, None)
    groups = {n: load(TRACES / n) for n in names if (TRACES / n).is_dir()}
    for n in ("quiche-desktop", "quinn-desktop"):
        if groups.get(n):
            _quicsm("diagram", str(TRACES / n), "-o", str(HERE / f"bbr_cycle_{n.split('-')[0]}.svg"))
    sets = [str(TRACES / n) for n in ("quiche-desktop", "quinn-desktop") if groups.get(n)]
    if len(sets) == 2:
        _quicsm(
            "compare", *sets, "--name", "quiche BBR2", "--name", "quinn BBR", "--diagram", str(HERE / "bbr_compare.svg")
        )
        (HERE / "bbr_compare.md").write_text(
            _quicsm("compare", *sets, "--name", "quiche BBR2", "--name", "quinn BBR", "--format", "markdown")
        )
    for impl in IMPLS:  # fixed rate vs the rate schedule; the report draws the states under the rate curve
        if groups.get(f"{impl}-schedule") and groups.get(f"{impl}-desktop"):
            pair = [str(TRACES / f"{impl}-desktop"), str(TRACES / f"{impl}-schedule")]
            _quicsm(
                "compare",
                *pair,
                "--name",
                "fixed 50 Mbit/s",
                "--name",
                "schedule",
                "--html",
                str(HERE / f"bbr_schedule_{impl}.html"),
                "--timelines",
                "2",
            )
    now = f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC"
    runs_rows = []
    for n, runs in groups.items():
        plts = [meta["result"].get("plt_ms") or 0 for _, meta in runs]
        sizes = [(log.stat().st_size) for log in sorted((TRACES / n).glob("*/server.log.gz"))]
        lines = [len(t.events) for t, _ in runs]
        runs_rows.append(
            [n, len(runs), f"{mean_sd(plts)[0] / 1000:.1f} s", f"{max(lines)}", f"{max(sizes) / 1024:.0f} KiB"]
        )
    head = table(["scenario", "runs", "mean duration", "max log lines", "max server.log.gz"], runs_rows)
    text = (
        f"# The whole BBR cycle, from running code (two implementations)\n\nGenerated {now} by "
        f"`experiments/bbr_long.py` (scenarios `experiments/bbr_long.toml`, repo {git_rev()}); traces in "
        "`traces/bbr-long/`.\n\n"
        + head
        + "\n## Cycle timing against the design values (desktop runs)\n\n"
        + cycle_report(groups)
    )
    text += "\n## Under a rate schedule (a new rate in 10–100 Mbit/s every 2 s)\n\n" + schedule_report(groups)
    text += "\n## An RTT step (36 ms, then 80 ms)\n\n" + rtt_step_report(groups)
    _write(HERE / "bbr2_cycle.md", text, HERE / "bbr2_cycle.notes.md")
    f13, counts = fig13_report(groups)
    text = (
        f"# Fig. 13 for BBR on long flows: desktop vs a client at 10 % of a core\n\nGenerated {now} by "
        f"`experiments/bbr_long.py` (repo {git_rev()}); traces in `traces/bbr-long/`. Runs per stack "
        f"(desktop, mobile): {', '.join(f'{i} {a}+{b}' for i, a, b in counts)}.\n\n" + f13
    )
    _write(HERE / "fig13_bbr_long.md", text, HERE / "fig13_bbr_long.notes.md")
    print(json.dumps({n: len(r) for n, r in groups.items()}))


def _write(path: Path, text: str, notes: Path) -> None:
    if notes.is_file():
        text += "\n" + notes.read_text()
    path.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
