"""`quicsm check` on 1,000 connections against a 1,000-connection baseline, whole process, start-up included.

    python bench/bench_check.py [--connections 1000] [--runs 7] [--dir DIR]

Makes two logs of real connections: the bundled Fig. 13 runs (quic-go v0.65.0, 50 Mbit/s, 36 ms)
copied under fresh connection keys until there are ``--connections`` each, the desktop runs for the
baseline and the CPU-starved ones for the new side (a real change, so every output has failures to
write). Saves the baseline, then times, A/B in turn (A B A B ...) so drift hits both alike:

  A: quicsm check base.qsb new.log --format json -o out.json
  B: quicsm compare base.log new.log --format json -o out.json   (the by-eye route it replaces)

and prints each one's median wall seconds, min-max, and the median of the per-pair ratios A/B.
The goal (issue 21) is A under 2 s.
"""

from __future__ import annotations

import argparse
import gzip
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONN = re.compile(rb"conn=(\S+)")


def make_log(src: Path, out: Path, connections: int) -> int:
    """``connections`` copies (round robin) of the connections in ``src``'s logs, each under its own key."""
    runs = [gzip.decompress(p.read_bytes()).splitlines(keepends=True) for p in sorted(src.glob("*/server.log.gz"))]
    runs = [[ln for ln in r if b"QUICSM " in ln] for r in runs]
    with out.open("wb") as fh:
        for k in range(connections):
            lines = runs[k % len(runs)]
            key = f"conn=0x{k + 1:x}".encode()
            fh.writelines(CONN.sub(key, ln, count=1) for ln in lines)
    return connections


def timed(cmd: list[str]) -> float:
    t = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True)
    wall = time.perf_counter() - t
    if res.returncode not in (0, 1):  # check exits 1 on a change: expected here
        sys.exit(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr.decode()[-2000:]}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    d = Path(args.dir or tempfile.mkdtemp(prefix="bench-check-"))
    d.mkdir(parents=True, exist_ok=True)
    base_log, new_log, bundle = d / "base.log", d / "new.log", d / "base.qsb"
    make_log(ROOT / "traces/fig13/desktop", base_log, args.connections)
    make_log(ROOT / "traces/fig13/mobile", new_log, args.connections)
    quicsm = [sys.executable, "-m", "quicsm"]
    t = timed([*quicsm, "baseline", "save", str(base_log), "-o", str(bundle)])
    print(
        f"{args.connections} connections per side in {d}; baseline save {t:.2f} s, bundle {bundle.stat().st_size:,} bytes"
    )
    a_cmd = [*quicsm, "check", str(bundle), str(new_log), "--format", "json", "-o", str(d / "check.json")]
    b_cmd = [*quicsm, "compare", str(base_log), str(new_log), "--format", "json", "-o", str(d / "compare.json")]
    timed(a_cmd), timed(b_cmd)  # warm-up: page cache, bytecode
    a, b = [], []
    for _ in range(args.runs):
        a.append(timed(a_cmd))
        b.append(timed(b_cmd))
    ratios = [x / y for x, y in zip(a, b)]
    print(f"check   median {statistics.median(a):.2f} s (min {min(a):.2f}, max {max(a):.2f}) over {args.runs} runs")
    print(f"compare median {statistics.median(b):.2f} s (min {min(b):.2f}, max {max(b):.2f})")
    print(
        f"check / compare, per pair: median {statistics.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f})"
    )
    print("goal: check under 2 s:", "met" if statistics.median(a) < 2.0 else "NOT met")


if __name__ == "__main__":
    main()
