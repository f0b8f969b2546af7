"""Copy finished testbed runs into traces/ for shipping: server.log gzipped (reproducibly, mtime 0)
plus meta.json, one directory per run, so `quicsm parse traces/<set>/<group>/*/server.log.gz` picks up
each run's labels from its sidecar.

    python3 experiments/bundle_traces.py /tmp/qsm-exp/fig13 traces/fig13 desktop=desktop mobile=mobile
    (GROUP=PREFIX: runs named PREFIX-NN go to traces/<set>/GROUP/)
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import sys
from pathlib import Path

from quicsm.testbed import runner


def bundle(src: Path, dest: Path, groups: dict[str, str], limit: int | None) -> int:
    n = 0
    for group, prefix in groups.items():
        runs = sorted(  # a run still in progress has no meta.json yet
            p for p in src.glob(f"{prefix}-[0-9][0-9]") if (p / "server.log").is_file() and (p / "meta.json").is_file()
        )
        kept = 0
        for run in runs:
            meta = runner.read_meta(run)
            if not (meta.result and meta.result.ok and meta.emulator and meta.emulator.ok):
                continue
            out = dest / group / run.name
            out.mkdir(parents=True, exist_ok=True)
            tmp = out / ".server.log.gz.tmp"
            with open(run / "server.log", "rb") as fin, open(tmp, "wb") as raw:
                with gzip.GzipFile(filename="server.log", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
                    shutil.copyfileobj(fin, gz)
            os.replace(tmp, out / "server.log.gz")
            shutil.copyfile(run / "meta.json", out / "meta.json")
            kept += 1
            n += 1
            if limit and kept >= limit:
                break
        print(f"{group}: {kept} run(s) from {src}/{prefix}-NN", file=sys.stderr)
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", type=Path)
    ap.add_argument("dest", type=Path)
    ap.add_argument("groups", nargs="+", help="GROUP=PREFIX")
    ap.add_argument("--limit", type=int, default=None, help="at most this many runs per group")
    args = ap.parse_args()
    groups = dict(g.split("=", 1) for g in args.groups)
    bundle(args.src, args.dest, groups, args.limit)


if __name__ == "__main__":
    main()
