"""Fig. 13 for BBR2: time share per BBR2 state, desktop client vs one held to 10 % of a core.

    sudo python3 experiments/fig13_bbr2.py             # run fig13_bbr2.toml, bundle, compare, draw
    python3 experiments/fig13_bbr2.py --analyse-only   # bundle + compare + draw existing runs

The server is Cloudflare quiche 0.30.0 with the cloudflare-quiche-0.30.0-bbr2 patch set. Good runs are
bundled into traces/quiche-fig13-bbr2/{desktop,mobile}/ (experiments/bundle_traces.py); the statistics
are `quicsm compare`'s (Welch per state, Holm-corrected), the diagrams `quicsm diagram`'s. Writes
experiments/fig13_bbr2.md and experiments/fig13_bbr2_{desktop,mobile}.svg.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fmt_p, git_rev, load_runs, matrix_runs, mean_sd, table, welch_p, write_report
from bundle_traces import bundle

HERE = Path(__file__).resolve().parent
TRACES = HERE.parent / "traces" / "quiche-fig13-bbr2"
STATES = (
    "Startup",
    "Drain",
    "ProbeBw.Up",
    "ProbeBw.Down",
    "ProbeBw.Cruise",
    "ProbeBw.Refill",
    "ProbeRtt",
    "ApplicationLimited",
)


def _quicsm(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "quicsm", *args], check=True, capture_output=True, text=True).stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", default=str(HERE / "fig13_bbr2.toml"))
    ap.add_argument("--out", default=None, help="run directory (default: the scenario file's out)")
    ap.add_argument("--analyse-only", action="store_true")
    ap.add_argument("--report", default=str(HERE / "fig13_bbr2.md"))
    args = ap.parse_args()
    m, out = matrix_runs(args.scenarios, args.out, args.analyse_only, retries=2)
    names = [sc.config.name for sc in m.scenarios]
    shutil.rmtree(TRACES / "desktop", ignore_errors=True)
    shutil.rmtree(TRACES / "mobile", ignore_errors=True)
    bundle(out, TRACES, {n: n for n in names}, None)
    sets = [str(TRACES / n) for n in names]
    cmp = json.loads(_quicsm("compare", *sets, *[a for n in names for a in ("--name", n)], "--format", "json"))
    (c,) = cmp["comparisons"]
    by_state = {s["state"]: s for s in c["states"]}
    pairs = {n: load_runs(out, n + "-") for n in names}
    rows = []
    for st in STATES:
        s = by_state.get(st)
        if s is None:  # no time in it in any run; say whether runs passed through it (entered and left at once)
            seen = [sum(st in t.states() for t, _ in pairs[n]) for n in names]
            note = (
                f"{seen[0]}/{len(pairs[names[0]])} vs {seen[1]}/{len(pairs[names[1]])}, no time"
                if any(seen)
                else "never"
            )
            rows.append([st, "0", "0", "—", "—", "—", note])
            continue
        rows.append(
            [
                st,
                f"{s['mean_a']:.3f}",
                f"{s['mean_b']:.3f}",
                f"{100 * s['difference']:+.1f} pp",
                fmt_p(s["p_corrected"]),
                f"{s['effect_size']:.2f}" if s.get("effect_size") is not None else "—",
                f"{s['visited_a']}/{s['n_a']} vs {s['visited_b']}/{s['n_b']}",
            ]
        )
    for n in names:
        _quicsm("diagram", str(TRACES / n), "-o", str(HERE / f"fig13_bbr2_{n}.svg"))
    runs = []
    base_plts = [meta["result"]["plt_ms"] for _, meta in pairs[names[0]]]
    for n in names:
        plts = [meta["result"]["plt_ms"] for _, meta in pairs[n]]
        cpu = [meta["result"]["client_cpu_s"] or 0.0 for _, meta in pairs[n]]
        mp, sp = mean_sd(plts)
        p_plt = "—" if n == names[0] else fmt_p(welch_p(plts, base_plts))
        runs.append([n, len(pairs[n]), f"{mp:.0f} ± {sp:.0f}", p_plt, f"{mean_sd(cpu)[0]:.2f}" if any(cpu) else "—"])
    cfg = m.scenarios[0].config
    text = (
        f"""# Fig. 13 for BBR2: Cloudflare quiche's BBRv2 under a CPU-starved client

Cloudflare quiche {cfg.quiche_version} (crates.io) HTTP/3 server (`testbed/quiche-server`) with the
`cloudflare-quiche-{cfg.quiche_version}-bbr2` patch set, Go HTTP/3 client; {cfg.rate_mbps:g} Mbit/s bottleneck
(tc tbf), {cfg.rtt_ms:g} ms RTT (relay), {cfg.queue} drop-tail queue, one {cfg.size / 1e6:g} MB object. "mobile"
runs the client under a cgroup CPU quota of 10 % of one core. Share = time in the state / connection
lifetime, per connection. Statistics: `quicsm compare traces/quiche-fig13-bbr2/desktop
traces/quiche-fig13-bbr2/mobile` (Welch's t-test per state on per-connection shares, Holm-corrected
p, Hedges' g). Runs whose relay sent 1 % of packets more than 2 ms late were redone.

Generated {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC by `experiments/fig13_bbr2.py`
(scenarios: `experiments/fig13_bbr2.toml`, repo {git_rev()}).

"""
        + table(["scenario", "runs", "page load ms (mean ± sd)", "p (Welch)", "client CPU s"], runs)
        + "\n"
        + table(
            ["state", "desktop share", "mobile share", "difference", "p (Holm)", "Hedges' g", "visited"],
            rows,
        )
        + "\nDiagrams: `fig13_bbr2_desktop.svg`, `fig13_bbr2_mobile.svg` (`quicsm diagram` of each set).\n"
    )
    write_report(Path(args.report), text, HERE / "fig13_bbr2.notes.md")


if __name__ == "__main__":
    main()
