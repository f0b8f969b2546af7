"""Fig. 13: share of time the server is ApplicationLimited, unthrottled vs CPU-quota clients.

    sudo python3 experiments/fig13_app_limited.py            # run fig13.toml, then analyse
    python3 experiments/fig13_app_limited.py --analyse-only  # analyse existing runs

Writes experiments/fig13_app_limited.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fmt_p, git_rev, load_runs, matrix_runs, mean_sd, table, welch_p, write_report

from quicsm.compare.occupancy import state_entries, state_share

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", default=str(HERE / "fig13.toml"))
    ap.add_argument("--out", default=None, help="run directory (default: the scenario file's out)")
    ap.add_argument("--analyse-only", action="store_true")
    ap.add_argument("--report", default=str(HERE / "fig13_app_limited.md"))
    args = ap.parse_args()
    m, out = matrix_runs(args.scenarios, args.out, args.analyse_only)
    names = [sc.config.name for sc in m.scenarios]
    groups = {n: load_runs(out, n + "-") for n in names}
    base = names[0]
    base_shares = [state_share(t, "ApplicationLimited") for t, _ in groups[base]]
    rows = []
    for sc in m.scenarios:
        pairs = groups[sc.config.name]
        shares = [state_share(t, "ApplicationLimited") for t, _ in pairs]
        entries = [state_entries(t, "ApplicationLimited") for t, _ in pairs]
        plts = [meta["result"]["plt_ms"] for _, meta in pairs]
        cpu = [meta["result"]["client_cpu_s"] or 0.0 for _, meta in pairs]
        ms, sds = mean_sd(shares)
        w = welch_p(shares, base_shares)
        wp = welch_p(plts, [meta["result"]["plt_ms"] for _, meta in groups[base]])
        rows.append(
            [
                sc.config.name,
                f"{sc.config.cpu_quota:.0%}" if sc.config.cpu_quota else "none",
                len(pairs),
                f"{ms:.3f} ± {sds:.3f}",
                f"{min(shares):.3f}–{max(shares):.3f}" if shares else "-",
                f"{mean_sd(entries)[0]:.1f}",
                f"{mean_sd(plts)[0]:.0f}",
                f"{mean_sd(cpu)[0]:.2f}" if any(cpu) else "-",
                "—" if sc.config.name == base else fmt_p(w),
                "—" if sc.config.name == base else fmt_p(wp),
            ]
        )
    per_run = []
    for n in names:
        for t, meta in groups[n]:
            per_run.append(
                [
                    meta["labels"]["run"],
                    f"{state_share(t, 'ApplicationLimited'):.3f}",
                    f"{state_share(t, 'SlowStart'):.3f}",
                    f"{state_share(t, 'CongestionAvoidance'):.3f}",
                    f"{state_share(t, 'Recovery'):.3f}",
                    f"{meta['result']['plt_ms']:.0f}",
                ]
            )
    cfg = m.scenarios[0].config
    text = (
        f"""# Fig. 13 reproduced: a CPU-starved client makes the server ApplicationLimited

quic-go {cfg.quic_go_version} ({cfg.cc}) server instrumented with the quicsm patch set, Go HTTP/3 client;
{cfg.rate_mbps:g} Mbit/s bottleneck (tc tbf), {cfg.rtt_ms:g} ms RTT (relay), {cfg.queue} drop-tail queue, one
{cfg.size / 1e6:g} MB object. "mobile" clients run under a cgroup CPU quota (share of one core). Share = time in
ApplicationLimited / connection lifetime, per connection, from the server's contract log
(`quicsm.traces.parse_inputs`, `Trace.visits`). p: Welch's t-test against `{base}` (scipy).
Runs whose relay sent 1 % of packets more than 2 ms late are redone (`emulator.ok` in meta.json).

Generated {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC by `experiments/fig13_app_limited.py`
(scenarios: `experiments/fig13.toml`, repo {git_rev()}).

"""
        + table(
            [
                "scenario",
                "CPU quota",
                "runs",
                "ApplicationLimited share (mean ± sd)",
                "range",
                "AL entries",
                "PLT ms",
                "client CPU s",
                "p (share)",
                "p (PLT)",
            ],
            rows,
        )
        + """
Per run:

"""
        + table(["run", "AppLimited", "SlowStart", "CongAvoid", "Recovery", "PLT ms"], per_run)
    )
    write_report(Path(args.report), text, HERE / "fig13_app_limited.notes.md")


if __name__ == "__main__":
    main()
