"""BBR2 vs Cubic on Cloudflare quiche under 1 % loss and under the Fig. 10 reordering jitter.

    sudo python3 experiments/bbr2_loss_reordering.py             # run the scenarios, bundle, compare
    python3 experiments/bbr2_loss_reordering.py --analyse-only   # bundle + compare existing runs

Each controller's impaired runs are compared with its own clean runs on the same path (`quicsm compare`,
Welch per state, Holm-corrected): the two controllers have different states, so what they share is the
page load time. Good runs are bundled into traces/quiche-bbr2-vs-cubic/<scenario>/. Writes
experiments/bbr2_loss_reordering.md.
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

from _common import fmt_p, git_rev, load_runs, mean_sd, table, welch_p
from bundle_traces import bundle

from quicsm.testbed.matrix import load_matrix

HERE = Path(__file__).resolve().parent
TRACES = HERE.parent / "traces" / "quiche-bbr2-vs-cubic"
PAIRS = (  # (controller, condition, clean scenario, impaired scenario)
    ("bbr2", "1 % loss", "bbr2-clean50", "bbr2-loss"),
    ("cubic", "1 % loss", "cubic-clean50", "cubic-loss"),
    ("bbr2", "±10 ms jitter", "bbr2-clean10", "bbr2-jitter"),
    ("cubic", "±10 ms jitter", "cubic-clean10", "cubic-jitter"),
)


def _compare(a: str, b: str) -> dict:  # type: ignore[type-arg]
    out = subprocess.run(
        [sys.executable, "-m", "quicsm", "compare", str(TRACES / a), str(TRACES / b), "--format", "json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    (c,) = json.loads(out)["comparisons"]
    return c  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", default=str(HERE / "bbr2_loss_reordering.toml"))
    ap.add_argument("--out", default=None, help="run directory (default: the scenario file's out)")
    ap.add_argument("--analyse-only", action="store_true")
    ap.add_argument("--report", default=str(HERE / "bbr2_loss_reordering.md"))
    args = ap.parse_args()
    m = load_matrix(Path(args.scenarios))
    out = Path(args.out) if args.out else m.out
    assert out is not None
    if not args.analyse_only:
        subprocess.run(
            [sys.executable, "-m", "quicsm", "testbed", "matrix", args.scenarios, "--out", str(out), "--retries", "2"],
            check=True,
        )
    names = [sc.config.name for sc in m.scenarios]
    for n in names:
        shutil.rmtree(TRACES / n, ignore_errors=True)
    bundle(out, TRACES, {n: n for n in names}, None)
    runs = {n: load_runs(out, n + "-") for n in names}
    plt = {n: [meta["result"]["plt_ms"] for _, meta in runs[n]] for n in names}
    rows, shifts = [], []
    for cc, cond, clean, bad in PAIRS:
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
        c = _compare(clean, bad)
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
        f"""# BBR2 vs Cubic on Cloudflare quiche: 1 % loss and reordering jitter

Cloudflare quiche 0.30.0 HTTP/3 server (`testbed/quiche-server`) with the `cloudflare-quiche-0.30.0-bbr2`
and `-cubic` patch sets, Go HTTP/3 client, 1-BDP drop-tail queue. Loss: 50 Mbit/s, 36 ms RTT, 2 MB object,
1 % random loss per packet and direction (relay). Jitter: the Fig. 10 path (10 Mbit/s, 112 ms RTT, 1 MB
object) with ±10 ms uniform jitter per packet, which reorders like netem. Each impaired set is compared
with the same controller's clean runs on the same path. Page load p: Welch's t-test; states:
`quicsm compare <clean> <impaired>` (Welch per state on per-connection time shares, Holm-corrected),
significant shifts only (p < 0.01). Runs whose relay sent 1 % of packets more than 2 ms late were redone.

Generated {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC by `experiments/bbr2_loss_reordering.py`
(scenarios: `experiments/bbr2_loss_reordering.toml`, repo {git_rev()}); traces in `traces/quiche-bbr2-vs-cubic/`.

"""
        + table(
            ["controller", "impairment", "runs clean / impaired", "PLT clean ms", "PLT impaired ms", "ratio", "p"], rows
        )
        + "\nTime share per state, clean -> impaired (significant shifts):\n\n"
        + table(["controller", "impairment", "state", "clean", "impaired", "difference", "p (Holm)"], shifts)
    )
    notes = HERE / "bbr2_loss_reordering.notes.md"
    if notes.is_file():
        text += "\n" + notes.read_text()
    Path(args.report).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
