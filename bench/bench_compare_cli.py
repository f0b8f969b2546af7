"""`quicsm compare A.log B.log` end to end on two big synthetic logs: seconds and peak RSS.

    python bench/bench_compare_cli.py [--mb 100] [--noise 9] [--dir DIR] [--repeat 1] [-- EXTRA ARGS]

Writes two logs with bench/bench_parse.py's ``make_log`` (seeds 1 and 2; kept in DIR and reused when
present), then runs ``python -m quicsm compare A.log B.log --format json -o out.json`` (plus EXTRA
ARGS) under ``/usr/bin/time -v`` and prints wall seconds and peak RSS of each run.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_parse import make_log


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=100.0, help="size of each log in MB")
    ap.add_argument("--noise", type=int, default=9, help="noise lines per contract line")
    ap.add_argument("--dir", help="where the logs are kept (default: a temporary directory)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("extra", nargs="*", help="more arguments for quicsm compare (after --)")
    args = ap.parse_args()
    where = args.dir or tempfile.mkdtemp()
    os.makedirs(where, exist_ok=True)
    logs = []
    for seed in (1, 2):
        path = os.path.join(where, f"bench{seed}-{args.mb:g}mb.log")
        if not os.path.exists(path):
            records = make_log(path, args.mb, args.noise, seed)
            print(f"wrote {path}: {records} records", file=sys.stderr)
        logs.append(path)
    out = os.path.join(where, "out.json")
    cmd = [sys.executable, "-m", "quicsm", "compare", *logs, "--format", "json", "-o", out, "-q", *args.extra]
    print(" ".join(cmd))
    for _ in range(args.repeat):
        t = time.perf_counter()
        res = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True)
        wall = time.perf_counter() - t
        if res.returncode:
            sys.exit(res.stderr)
        rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", res.stderr).group(1))  # type: ignore[union-attr]
        print(f"{wall:.2f} s, peak RSS {rss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
