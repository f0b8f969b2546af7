"""Benchmark the patched quic-go build (quicsm.testbed.build): cache hit vs rebuild.

Prints, per patched version, the time of a cache hit (the baseline: what every testbed run pays) and,
for the versions given with --rebuild, a forced rebuild with Go's build cache warm (what a patch or
source change costs), with the ratio. A cold build (empty Go build cache) is not measured here: it
costs about a minute per version on a 2-core machine and would disturb anyone measuring.

    python3 bench/bench_build.py [--rebuild v0.65.0 ...] [--variant reno|cubic]
"""

from __future__ import annotations

import argparse
import statistics
import time

from quicsm.testbed import build


def _timed(version: str, variant: str, *, force: bool = False) -> tuple[float, build.BuildResult]:
    t0 = time.perf_counter()
    res = build.build_binaries(version, variant, force=force)
    return time.perf_counter() - t0, res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", default="reno", choices=build.VARIANTS)
    ap.add_argument(
        "--rebuild",
        nargs="*",
        default=[],
        metavar="VERSION",
        help="versions to rebuild with force=True (warm Go build cache)",
    )
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"{'version':<10} {'cache hit ms':>12} {'rebuild s':>10} {'ratio':>8}  go")
    for v in build.available_versions():
        _timed(v, args.variant)  # make sure an entry exists (builds it the first time)
        hits = [_timed(v, args.variant)[0] for _ in range(args.repeat)]
        hit = statistics.median(hits)
        rebuild = ratio = ""
        res = _timed(v, args.variant)[1]
        if v in args.rebuild:
            secs, res = _timed(v, args.variant, force=True)
            rebuild, ratio = f"{secs:10.1f}", f"{secs / hit:8.0f}x"
        print(f"{v:<10} {hit * 1000:12.1f} {rebuild:>10} {ratio:>8}  {res.go_version}")


if __name__ == "__main__":
    main()
