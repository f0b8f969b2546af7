"""The paper's figures from Chromium's own QUIC (proto-quic 62.0.3187.0): Fig. 3a (Cubic), Fig. 3b (BBR), Fig. 13
(desktop vs CPU-throttled client), and Chromium vs quic-go vs Cloudflare quiche Cubic under one network.

    sudo flock /tmp/quicsm-testbed.lock python3 experiments/chromium_figures.py   # run, bundle, compare, draw
    python3 experiments/chromium_figures.py --analyse-only                         # existing runs only
    python3 experiments/chromium_figures.py --figure-scenarios fig3a-outage --skip-compare   # one new scenario

Scenarios: experiments/chromium_figures.toml and chromium_compare.toml. Good runs are bundled into
traces/chromium-figures/<scenario>/ and traces/chromium-compare/<stack>/ (server.log.gz + meta.json); the
diagrams are `quicsm diagram`'s, the statistics `quicsm compare`'s. Writes experiments/chromium_figures.md and
experiments/chromium_{fig3a,fig3b,fig13_desktop,fig13_mobile,compare_*}.svg.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fmt_p, git_rev, load_runs, matrix_runs, mean_sd, table, write_report
from bundle_traces import bundle

HERE = Path(__file__).resolve().parent
TRACES = HERE.parent / "traces"
FIGS = TRACES / "chromium-figures"
CMP = TRACES / "chromium-compare"
CUBIC = ("SlowStart", "CongestionAvoidance", "CongestionAvoidanceMaxed", "ApplicationLimited", "Recovery",
         "TailLossProbe", "RetransmissionTimeout")  # fmt: skip
BBR = ("Startup", "Drain", "ProbeBw.Up", "ProbeBw.Down", "ProbeBw.Cruise", "ProbeRtt")


def _quicsm(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "quicsm", *args], check=True, capture_output=True, text=True).stdout


def _compare(sets: list[Path], names: list[str]) -> dict[str, Any]:
    return json.loads(
        _quicsm("compare", *map(str, sets), *[a for n in names for a in ("--name", n)], "--format", "json")
    )


def _runs_table(out: Path, names: list[str]) -> tuple[str, dict[str, list[tuple[Any, dict[str, Any]]]]]:
    runs = {n: load_runs(out, n + "-") for n in names}
    rows = []
    for n in names:
        plts = [m["result"]["plt_ms"] for _, m in runs[n]]
        cpu = [m["result"]["client_cpu_s"] or 0.0 for _, m in runs[n]]
        mp, sp = mean_sd(plts) if plts else (0.0, 0.0)
        seen: Counter[str] = Counter()
        for t, _ in runs[n]:
            seen.update(set(t.states()))
        visits = ", ".join(f"{s} {seen[s]}" for s in (*CUBIC, *BBR) if seen[s])
        rows.append([n, len(runs[n]), f"{mp:.0f} ± {sp:.0f}", f"{mean_sd(cpu)[0]:.2f}" if any(cpu) else "—", visits])
    head = ["scenario", "runs", "page load ms (mean ± sd)", "client CPU s", "runs that visited each state"]
    return table(head, rows), runs


def _share_table(cmp: dict[str, Any], names: list[str], states: tuple[str, ...]) -> str:
    rows = []
    for c in cmp["comparisons"]:
        by_state = {s["state"]: s for s in c["states"]}
        for st in states:
            s = by_state.get(st)
            if s is None:
                continue
            rows.append([f"{c['a']} vs {c['b']}", st, f"{s['mean_a']:.3f}", f"{s['mean_b']:.3f}",
                         f"{100 * s['difference']:+.1f} pp", fmt_p(s["p_corrected"]),
                         f"{s['visited_a']}/{s['n_a']} vs {s['visited_b']}/{s['n_b']}"])  # fmt: skip
    return table(["pair", "state", "share a", "share b", "difference", "p (Holm)", "visited"], rows)


def _only(toml: Path, names: list[str]) -> str:
    """``toml`` with only the scenarios named ``names`` (a copy beside the runs when some are left out)."""
    import tomllib

    doc = tomllib.loads(toml.read_text())
    if {sc["name"] for sc in doc["scenario"]} <= set(names):
        return str(toml)
    out = Path(doc["out"]).with_name(Path(doc["out"]).name + ".toml")
    out.parent.mkdir(parents=True, exist_ok=True)
    text = toml.read_text().split("[[scenario]]")
    keep = [t for t in text[1:] if any(f'name = "{n}"' in t for n in names)]
    out.write_text(text[0] + "".join("[[scenario]]" + t for t in keep))
    return str(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--analyse-only", action="store_true")
    ap.add_argument(
        "--skip-compare", action="store_true", help="no new comparison runs (the existing ones are analysed)"
    )
    ap.add_argument("--compare-stacks", default="chromium,quic-go,quiche", help="scenarios of chromium_compare.toml")
    ap.add_argument("--skip-figures", action="store_true", help="no new figure runs (the existing ones are analysed)")
    ap.add_argument(
        "--figure-scenarios", help="run only these scenarios of chromium_figures.toml (the others' runs are reused)"
    )
    ap.add_argument("--report", default=str(HERE / "chromium_figures.md"))
    args = ap.parse_args()
    figs_toml = HERE / "chromium_figures.toml"
    m, out = matrix_runs(str(figs_toml), None, True)
    names = [sc.config.name for sc in m.scenarios]
    if not (args.analyse_only or args.skip_figures):
        wanted = args.figure_scenarios.split(",") if args.figure_scenarios else names
        matrix_runs(_only(figs_toml, wanted), None, False, retries=2)
    shutil.rmtree(FIGS, ignore_errors=True)
    bundle(out, FIGS, {n: n for n in names}, None)
    runs_md, _ = _runs_table(out, names)

    cubic_sets = [FIGS / n for n in ("fig3a-loss1", "fig3a-loss3", "fig3a-loss10", "fig3a-outage", "fig13-desktop")]
    _quicsm("diagram", *map(str, cubic_sets), "-o", str(HERE / "chromium_fig3a.svg"))
    _quicsm("diagram", str(FIGS / "fig3b-bbr"), "-o", str(HERE / "chromium_fig3b.svg"))
    for n in ("fig13-desktop", "fig13-mobile"):
        _quicsm("diagram", str(FIGS / n), "-o", str(HERE / f"chromium_{n.replace('-', '_')}.svg"))
    fig13 = _compare([FIGS / "fig13-desktop", FIGS / "fig13-mobile"], ["desktop", "mobile"])

    cmp_md = ""
    wanted = args.compare_stacks.split(",")
    mc, out_c = matrix_runs(
        _only(HERE / "chromium_compare.toml", wanted), None, args.analyse_only or args.skip_compare, retries=2
    )
    if any(load_runs(out_c, n + "-") for n in wanted):
        stacks = [sc.config.name for sc in mc.scenarios if sc.config.name in wanted]
        shutil.rmtree(CMP, ignore_errors=True)
        bundle(out_c, CMP, {n: n for n in stacks}, None)
        cmp_runs, _ = _runs_table(out_c, stacks)
        three = _compare([CMP / n for n in stacks], stacks)
        for n in stacks:
            _quicsm("diagram", str(CMP / n), "-o", str(HERE / f"chromium_compare_{n.replace('-', '_')}.svg"))
        c0 = mc.scenarios[0].config
        cmp_md = (
            f"\n## {' vs '.join(stacks)}, Cubic, one network\n\n{c0.rate_mbps:g} Mbit/s, {c0.rtt_ms:g} ms "
            f"RTT, {c0.queue} queue, {100 * c0.loss:g} % loss per packet and direction, one {c0.size / 1e6:g} MB object "
            f"(`chromium_compare.toml`). `quicsm compare traces/chromium-compare/{{{','.join(stacks)}}}`; "
            + "diagrams "
            + ", ".join(f"`chromium_compare_{n.replace('-', '_')}.svg`" for n in stacks)
            + ".\n\n"
            + cmp_runs
            + "\n"
            + _share_table(three, stacks, CUBIC)
        )
    text = (
        f"""# The paper's figures from Chromium's own QUIC (62.0.3187.0)

Chromium 62.0.3187.0 (proto-quic's last tree) toy `quic_server`, built by `quicsm testbed build --stack chromium`
with the `chromium-62.0.3187.0-cubic` / `-bbr` sets, and the toy `quic_client` (gQUIC, QUIC 39 negotiated; page-load
time measured by the client from the start of the handshake to the last response). tc tbf bottleneck, relay
delay/loss, 1-BDP drop-tail queue. "mobile" = the client under a cgroup quota of 10 % of one core. Runs whose relay
sent 1 % of packets more than 2 ms late were redone (up to 2 times) and otherwise left out.

Generated {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC by `experiments/chromium_figures.py` (repo {git_rev()}).

## Runs (`chromium_figures.toml`)

"""
        + runs_md
        + """
* Fig. 3a, `chromium_fig3a.svg`: Cubic, all Cubic runs together (1 % and 3 % loss at 20 Mbit/s/40 ms, 10 % at
  10 Mbit/s/40 ms, 1 % loss with a 1.5 s outage 0.6 s into the load (`--outage 0.6s:1.5s`: the link carries
  nothing in either direction), and the Fig. 13 desktop runs), as the paper drew it from all its configurations.
* Fig. 3b, `chromium_fig3b.svg`: BBR (`--cc bbr`: the server's `quic_default_to_bbr`), 50 Mbit/s, 36 ms.
* Fig. 13, `chromium_fig13_desktop.svg` / `chromium_fig13_mobile.svg`: 50 Mbit/s, no added loss.

## Fig. 13: time share per state, desktop vs mobile (`quicsm compare`)

"""
        + _share_table(fig13, ["desktop", "mobile"], CUBIC)
        + cmp_md
    )
    write_report(Path(args.report), text, HERE / "chromium_figures.notes.md")


if __name__ == "__main__":
    main()
