"""How long `quicsm compare` takes per stage, against the baseline of just reading every trace's visits.

    python bench/bench_compare.py [--connections 500] [--resamples 2000] [--splits 200]

Synthetic connections (tests/compare/compare_fixtures.py); prints seconds per stage and each stage's
ratio to the baseline, so a change that slows one stage shows up in the same run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "compare"))

from compare_fixtures import make_traces

from quicsm.compare import CompareOptions, TraceSet, compare
from quicsm.compare.calibration import calibrate
from quicsm.compare.html import to_html
from quicsm.compare.report import to_json_text


def timed(fn):  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=500)
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--splits", type=int, default=200)
    args = ap.parse_args()
    ta, tb = make_traces("a", args.connections, 0.1, seed=1), make_traces("b", args.connections, 0.5, seed=2)
    a, b = TraceSet.from_traces("a", ta), TraceSet.from_traces("b", tb)
    events = sum(len(t.events) for t in ta + tb)
    _, base = timed(lambda: [t.visits() for t in ta + tb])
    stages = {}
    _, stages["compare, no models, no bootstrap"] = timed(
        lambda: compare([a, b], CompareOptions(resamples=0, models=False))
    )
    _, stages[f"compare, bootstrap {args.resamples}"] = timed(
        lambda: compare([a, b], CompareOptions(resamples=args.resamples, models=False))
    )
    c, stages["compare, full (dfg models + diff, 3 timelines/set)"] = timed(
        lambda: compare([a, b], CompareOptions(resamples=args.resamples, timelines=3))
    )
    _, stages["JSON"] = timed(lambda: to_json_text(c))
    _, stages["HTML (Graphviz, 3 timelines/set)"] = timed(lambda: to_html(c))
    _, stages[f"calibration, {args.splits} splits"] = timed(
        lambda: calibrate(a.rows, splits=args.splits, options=CompareOptions(models=False), edge_tests=("cluster",))
    )
    print(f"{2 * args.connections} connections, {events} events")
    print(f"{'baseline: visits of every trace':<40} {base:8.3f} s  1.0x")
    for name, sec in stages.items():
        print(f"{name:<40} {sec:8.3f} s  {sec / base:5.1f}x")


if __name__ == "__main__":
    main()
