"""quicsm check, injected change: quic-go v0.65.0 (Reno) rebuilt with one extra Recovery entry per connection.

The change: when hybrid slow start ends (``MaybeExitSlowStart``), the patched sender also takes a
congestion event, i.e. cuts its window and enters Recovery once more than the unchanged server does,
as a regression in a stack bump might. Everything else (patch set, scenario, client) is as in the
baseline runs, so ``quicsm check`` must fail on this and nothing else.

The server is rebuilt the way ``--packet-threshold`` rebuilds it (quicsm.testbed.threshold copies the
instrumented module, edits one file, builds); here the edited file is the congestion controller and
the edit is :func:`inject_recovery`. The build goes to a private cache entry, removed afterwards.

    sudo flock /tmp/quicsm-testbed.lock python3 experiments/check_inject.py --runs 10 --name inject-a --out /tmp/qsm-exp/check
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from quicsm.errors import TestbedError
from quicsm.testbed import threshold
from quicsm.testbed.runner import RunConfig, run_many

FILE = "internal/congestion/cubic_sender.go"
EXIT = '\t\tc.quicsmTransition("CongestionAvoidance", "hystart", protocol.InvalidByteCount)\n'
ANCHOR = EXIT + "\t\tc.maybeQlogStateChange(qlog.CongestionStateCongestionAvoidance)\n"
INJECTED = ANCHOR + (
    "\t\tc.OnCongestionEvent(c.largestSentPacketNumber, 0, c.congestionWindow) // quicsm check experiment: injected\n"
)
TAG = 7_770_001
"""Stands in for the threshold in the cache entry's name (``...-pt7770001``): not a real threshold."""


def inject_recovery(text: str, name: str, value: int, *, where: str) -> str:
    """``MaybeExitSlowStart`` with a congestion event after the hybrid-slow-start exit (exactly one anchor); it
    stands in for :func:`quicsm.testbed.threshold.set_constant` (``name`` and ``value`` unused)."""
    if text.count(ANCHOR) != 1:
        raise TestbedError(f"{where}: the hybrid slow start exit of MaybeExitSlowStart was not found once")
    return text.replace(ANCHOR, INJECTED)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--name", default="inject")
    ap.add_argument("--out", default="/tmp/qsm-exp/check")
    ap.add_argument("--version", default="v0.65.0")
    args = ap.parse_args()
    threshold.THRESHOLD_FILE = FILE
    threshold.set_constant = inject_recovery  # the one edit build_constant_server makes
    bins = threshold.build_threshold_server(args.version, "reno", TAG)
    try:
        cfg = RunConfig(
            rate_mbps=50, rtt_ms=36, queue="1bdp", size=10_000_000, quic_go_version=args.version, cc="reno",
            name=args.name, labels=(("variant", "injected-recovery"),),
        )  # fmt: skip
        results = run_many(
            cfg, bins, Path(args.out), runs=args.runs, retries=2, on_result=lambda r: print(r.run_dir, r.ok, flush=True)
        )
    finally:
        shutil.rmtree(bins.cache_dir, ignore_errors=True)
    print(f"{sum(r.ok for r in results)}/{len(results)} runs ok in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
