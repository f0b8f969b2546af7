"""BBR2 vs Cubic on Cloudflare quiche: each controller's impaired runs against its own clean runs.

    sudo python3 experiments/bbr2_vs_cubic.py loss-reordering   # 1 % loss, Fig. 10 reordering jitter
    sudo python3 experiments/bbr2_vs_cubic.py fig11             # Fig. 11 varying bandwidth
    python3 experiments/bbr2_vs_cubic.py fig11 --analyse-only   # bundle + compare existing runs

The comparisons are `quicsm compare`'s (Welch per state, Holm-corrected): the two controllers have
different states, so what they share is the page load time. Good runs are bundled into
traces/quiche-bbr2-vs-cubic/<scenario>/ (loss-reordering) or traces/quiche-bbr2-fig11/<scenario>/
(fig11). Writes experiments/bbr2_<study>.md (plus experiments/bbr2_<study>.notes.md if present).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fmt_p, git_rev, load_runs, matrix_runs, mean_sd, table, welch_p, write_report
from bundle_traces import bundle

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Study:
    title: str
    scenarios: str
    traces: str
    setup: str
    pairs: tuple[tuple[str, str, str, str], ...]
    """(controller, condition, clean scenario, impaired scenario)"""


STUDIES = {
    "loss-reordering": Study(
        "BBR2 vs Cubic on Cloudflare quiche: 1 % loss and reordering jitter",
        "bbr2_loss_reordering.toml",
        "quiche-bbr2-vs-cubic",
        "Loss: 50 Mbit/s, 36 ms RTT, 2 MB object, 1 % random loss per packet and direction (relay).\nJitter: the "
        "Fig. 10 path (10 Mbit/s, 112 ms RTT, 1 MB object) with ±10 ms uniform jitter per packet, which reorders\n"
        "like netem.",
        (
            ("bbr2", "1 % loss", "bbr2-clean50", "bbr2-loss"),
            ("cubic", "1 % loss", "cubic-clean50", "cubic-loss"),
            ("bbr2", "±10 ms jitter", "bbr2-clean10", "bbr2-jitter"),
            ("cubic", "±10 ms jitter", "cubic-clean10", "cubic-jitter"),
        ),
    ),
    "fig11": Study(
        "BBR2 vs Cubic on Cloudflare quiche: Fig. 11 varying bandwidth",
        "bbr2_fig11.toml",
        "quiche-bbr2-fig11",
        "100 ms RTT, one 10 MB object; a fixed 50 Mbit/s bottleneck against a new random rate between 10 and\n"
        "100 Mbit/s every second (tc tbf changed in place, the queue kept).",
        (
            ("bbr2", "varying rate", "bbr2-fixed", "bbr2-varying"),
            ("cubic", "varying rate", "cubic-fixed", "cubic-varying"),
        ),
    ),
}


def _compare(traces: Path, a: str, b: str) -> dict:  # type: ignore[type-arg]
    out = subprocess.run(
        [sys.executable, "-m", "quicsm", "compare", str(traces / a), str(traces / b), "--format", "json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    (c,) = json.loads(out)["comparisons"]
    return c  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("study", choices=sorted(STUDIES))
    ap.add_argument("--out", default=None, help="run directory (default: the scenario file's out)")
    ap.add_argument("--analyse-only", action="store_true")
    args = ap.parse_args()
    study = STUDIES[args.study]
    args.scenarios = str(HERE / study.scenarios)
    report = HERE / ("bbr2_" + args.study.replace("-", "_") + ".md")
    traces = HERE.parent / "traces" / study.traces
    m, out = matrix_runs(args.scenarios, args.out, args.analyse_only, retries=2)
    names = [sc.config.name for sc in m.scenarios]
    for n in names:
        shutil.rmtree(traces / n, ignore_errors=True)
    bundle(out, traces, {n: n for n in names}, None)
    runs = {n: load_runs(out, n + "-") for n in names}
    plt = {n: [meta["result"]["plt_ms"] for _, meta in runs[n]] for n in names}
    rows, shifts = [], []
    for cc, cond, clean, bad in study.pairs:
        (mc, sc), (mb, sb) = mean_sd(plt[clean]), mean_sd(plt[bad])
        rows.append(
            [
                cc,
                cond,
                f"{len(plt[clean])} / {len(plt[bad])}",
                f"{mc:.0f} ± {sc:.0f}",
                f"{mb:.0f} ± {sb:.0f}",
                f"{mb / mc:.2f}x",
                fmt_p(welch_p(plt[bad], plt[clean])),
            ]
        )
        c = _compare(traces, clean, bad)
        for s in sorted(c["states"], key=lambda s: -abs(s["difference"])):
            if s["significant"]:
                shifts.append(
                    [
                        cc,
                        cond,
                        s["state"],
                        f"{s['mean_a']:.3f}",
                        f"{s['mean_b']:.3f}",
                        f"{100 * s['difference']:+.1f} pp",
                        fmt_p(s["p_corrected"]),
                    ]
                )
    text = (
        f"""# {study.title}

Cloudflare quiche 0.30.0 HTTP/3 server (`testbed/quiche-server`) with the `cloudflare-quiche-0.30.0-bbr2`
and `-cubic` patch sets, Go HTTP/3 client, 1-BDP drop-tail queue.
{study.setup}
Each impaired set is compared with the same controller's clean runs on the same path. Page load p: Welch's t-test; states:
`quicsm compare <clean> <impaired>` (Welch per state on per-connection time shares, Holm-corrected),
significant shifts only (p < 0.01). Runs whose relay sent 1 % of packets more than 2 ms late were redone.

Generated {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC by `experiments/bbr2_vs_cubic.py {args.study}`
(scenarios: `experiments/{study.scenarios}`, repo {git_rev()}); traces in `traces/{study.traces}/`.

"""
        + table(
            ["controller", "impairment", "runs clean / impaired", "PLT clean ms", "PLT impaired ms", "ratio", "p"], rows
        )
        + "\nTime share per state, clean -> impaired (significant shifts):\n\n"
        + table(["controller", "impairment", "state", "clean", "impaired", "difference", "p (Holm)"], shifts)
    )
    write_report(report, text, report.with_suffix(".notes.md"))


if __name__ == "__main__":
    main()
