"""Full-size qlogs for the qlog benchmark (bench/bench_qlog.py), written by the testbed, not synthesized.

quic-go v0.65 servers write one qlog per connection with every packet event in it (JSON-SEQ): about
0.1-0.2 MB for a 150 KB page and about 6 MB for a 10 MB page. Three steps:

* ``runs``: page loads through the emulator with the server's own qlog kept (``quicsm testbed run
  --qlog``): a 150 KB and a 10 MB page, without loss and at 1 % loss. Needs root and the testbed; take
  the testbed lock as for any emulator run.
* ``fleet``: those qlogs copied into host folders as a fleet's collector holds them (2,000 small files
  from 40 hosts, 200 large ones from 20), and the same files gzipped.
* ``big``: one connection's qlog of about 1 GB: the largest testbed qlog's events repeated, each copy's
  times shifted past the last (a long transfer's qlog, as big as quic-go writes for a 2 GB download).

    flock /tmp/quicsm-testbed.lock python3 bench/qlog_inputs.py runs --out ~/qlog-bench
    python3 bench/qlog_inputs.py fleet --out ~/qlog-bench
    python3 bench/qlog_inputs.py big --out ~/qlog-bench --mb 1024
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

PAGES = {"small": "150KB", "large": "10MB"}
"""Page size of each kind of run."""
LOSSES = ("0", "0.01")


def runs(out: Path, per_case: int, kinds: list[str]) -> None:
    """The testbed's page loads, each keeping its server qlog in RUN/qlog/."""
    for kind in kinds:
        size = PAGES[kind]
        for loss in LOSSES:
            name = f"{kind}-loss{loss.replace('.', '')}"
            cmd = [sys.executable, "-m", "quicsm", "testbed", "run", "--stack", "quic-go", "--quic-go-version"]
            cmd += ["v0.65.0", "--cc", "cubic", "--rate", "50", "--delay", "36", "--loss", loss, "--size", size]
            cmd += ["--runs", str(per_case), "--name", name, "--qlog", "--out", str(out / "runs")]
            print("+", " ".join(cmd), flush=True)
            subprocess.run(cmd, check=True)


def testbed_qlogs(out: Path, kind: str) -> list[Path]:
    found = sorted((out / "runs").glob(f"{kind}-*/qlog/*.sqlog"))
    if not found:
        raise SystemExit(f"no {kind} testbed qlogs under {out / 'runs'}: run the `runs` step first")
    return found


def fleet(out: Path, small: int, large: int) -> None:
    """Copies of the testbed qlogs in host folders, plain and gzipped (files are cycled over the runs)."""
    for kind, count, hosts in (("small", small, 40), ("large", large, 20)):
        sources = testbed_qlogs(out, kind)
        for variant in (kind, f"{kind}-gz"):
            shutil.rmtree(out / variant, ignore_errors=True)
        for i in range(count):
            src = sources[i % len(sources)]
            data = src.read_bytes()
            name = f"host{i % hosts:02d}/{i:05d}_server.sqlog"
            plain, packed = out / kind / name, out / f"{kind}-gz" / (name + ".gz")
            for path in (plain, packed):
                path.parent.mkdir(parents=True, exist_ok=True)
            plain.write_bytes(data)
            packed.write_bytes(gzip.compress(data, 6, mtime=0))
        sizes = [p.stat().st_size for p in (out / kind).rglob("*.sqlog")]
        print(f"{kind}: {len(sizes)} files from {len(sources)} testbed qlogs, {sum(sizes) / 1e6:.1f} MB")


def big(out: Path, megabytes: float) -> None:
    """One connection's qlog of ``megabytes``: the largest testbed qlog's events repeated, times shifted."""
    src = max(testbed_qlogs(out, "large"), key=lambda p: p.stat().st_size)
    records = src.read_bytes().split(b"\x1e")
    head, events = b"\x1e" + records[1], [r for r in records[2:] if r.startswith(b'{"time":')]
    times = [float(r[8 : r.index(b",", 8)]) for r in events]
    span = max(times) + 1.0
    target = int(megabytes * 1e6)
    path = out / "big" / "big_server.sqlog"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        written = fh.write(head)
        copy = 0
        while written < target:
            shift = copy * span
            part = b"".join(b'\x1e{"time":%.6f%s' % (t + shift, r[r.index(b",", 8) :]) for t, r in zip(times, events))
            written += fh.write(part)
            copy += 1
    print(f"{path}: {written / 1e6:.0f} MB, {copy} copies of {src} ({src.stat().st_size / 1e6:.1f} MB)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=("runs", "fleet", "big"))
    ap.add_argument("--out", type=Path, default=Path(os.path.expanduser("~/qlog-bench")))
    ap.add_argument("--runs", type=int, default=5, help="runs per page size and loss (runs step)")
    ap.add_argument("--kinds", default="small,large", help="page kinds to run (runs step): small, large")
    ap.add_argument("--small", type=int, default=2000, help="small files in the fleet")
    ap.add_argument("--large", type=int, default=200, help="large files in the fleet")
    ap.add_argument("--mb", type=float, default=1024.0, help="size of the one-connection qlog (big step)")
    args = ap.parse_args()
    if args.step == "runs":
        runs(args.out, args.runs, args.kinds.split(","))
    elif args.step == "fleet":
        fleet(args.out, args.small, args.large)
    else:
        big(args.out, args.mb)


if __name__ == "__main__":
    main()
