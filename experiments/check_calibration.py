"""False alarms of ``quicsm check``: same version, same scenario, two disjoint sets of runs.

For every scenario directory of bundled traces (a folder of run folders, each with server.log.gz
and meta.json), the runs are sorted by their run label and split into the earlier half (saved as
the baseline) and the later half (checked against it): one same-version, same-scenario pair per
scenario, recorded one after the other as a CI would record a baseline and then a new build.
``--splits N`` adds N random half/half splits per scenario (not independent of each other: they
show how close each scenario sits to the threshold). Every check uses the same code path as
``quicsm check`` (quicsm.check.check), with the default config unless ``--config`` is given.

    python experiments/check_calibration.py traces --splits 20 --out /tmp/cal.json
    python experiments/check_calibration.py --pair traces/check/reno-a traces/check/reno-b ...
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import msgspec

from quicsm.check import CheckConfig, check, load_config, make_baseline
from quicsm.compare import load_rows
from quicsm.compare.sets import expand_set


def scenario_dirs(roots: list[str]) -> list[Path]:
    """Folders whose children are run folders holding a server log."""
    found = set()
    for root in roots:
        for log in Path(root).rglob("server.log*"):
            found.add(log.parent.parent)
    return sorted(found)


def run_key(r: object) -> str:
    return r.trace.labels.get("run", r.id)  # type: ignore[attr-defined]


SIGNIFICANCE_ONLY = {
    "min_effect": 0.0,
    "min_edge_effect": 0.0,
    "min_visits_effect": 0.0,
    "min_path_effect": 0.0,
    "min_support": 1,
}
"""The same tests with no minimum effect or support: what the effect thresholds add to the calibration."""


def one(rows_a: list, rows_b: list, name: str, config: CheckConfig) -> dict:
    base = make_baseline([(name, name, rows_a)])
    res = check(base, rows_b, config, models=False)
    bare = check(base, rows_b, msgspec.structs.replace(config, **SIGNIFICANCE_ONLY), models=False)
    ps = [f.p_corrected for f in res.findings if f.p_corrected is not None]
    return {
        "failed": res.changed,
        "failed_significance_only": bare.changed,
        "min_p_corrected": min(ps) if ps else None,
        "tests": len(ps),
        "n": [len(rows_a), len(rows_b)],
        "failures": [f"{f.kind} {f.item}: {f.check}" for f in res.failures],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("roots", nargs="*", help="folders of scenario folders (each split in time into two halves)")
    ap.add_argument(
        "--pair", nargs=2, action="append", default=[], metavar=("BASE", "NEW"), help="two batches of one scenario"
    )
    ap.add_argument(
        "--splits", type=int, default=0, help="random half/half splits per scenario, besides the time split"
    )
    ap.add_argument("--config", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="write every result as JSON here")
    args = ap.parse_args()
    config = load_config(args.config)
    rng = random.Random(args.seed)
    results = []
    t0 = time.time()
    for d in scenario_dirs(args.roots):
        rows = sorted(load_rows(expand_set(str(d))).rows, key=run_key)
        runs = sorted({run_key(r) for r in rows})
        if len(runs) < 6:
            print(f"{d}: only {len(runs)} runs, skipped", file=sys.stderr)
            continue
        half = len(runs) // 2
        first = set(runs[:half])
        a = [r for r in rows if run_key(r) in first]
        b = [r for r in rows if run_key(r) not in first]
        r = one(a, b, d.name, config)
        results.append({"scenario": str(d), "split": "time", **r})
        print(f"{d}: {len(a)} vs {len(b)}: {'FAIL ' + '; '.join(r['failures']) if r['failed'] else 'same'}", flush=True)
        for k in range(args.splits):
            pick = set(rng.sample(runs, half))
            a = [r for r in rows if run_key(r) in pick]
            b = [r for r in rows if run_key(r) not in pick]
            results.append({"scenario": str(d), "split": f"random{k}", **one(a, b, d.name, config)})
    for base_dir, new_dir in args.pair:
        a = list(load_rows(expand_set(base_dir)).rows)
        b = list(load_rows(expand_set(new_dir)).rows)
        r = one(a, b, Path(base_dir).name, config)
        results.append({"scenario": f"{base_dir} -> {new_dir}", "split": "batches", **r})
        print(
            f"{base_dir} -> {new_dir}: {len(a)} vs {len(b)}: {'FAIL ' + '; '.join(r['failures']) if r['failed'] else 'same'}"
        )
    time_pairs = [r for r in results if r["split"] in ("time", "batches")]
    random_pairs = [r for r in results if r["split"].startswith("random")]
    for label, group in (("pairs (time halves and batches)", time_pairs), ("random splits", random_pairs)):
        if not group:
            continue
        bare = sum(r["failed_significance_only"] for r in group)
        low = sorted(r["min_p_corrected"] for r in group if r["min_p_corrected"] is not None)
        print(
            f"{label}: {sum(r['failed'] for r in group)}/{len(group)} failed "
            f"(significance only: {bare}/{len(group)}); smallest corrected p per pair: min {low[0]:.3g}, "
            f"median {statistics.median(low):.3g}"
            if low
            else ""
        )
    if random_pairs:
        why = Counter(f for r in random_pairs for f in r["failures"])
        for k, n in why.most_common(15):
            print(f"  {n:4d}  {k}")
    print(f"({time.time() - t0:.0f} s)")
    if args.out:
        Path(args.out).write_text(json.dumps({"config": config.to_json(), "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
