"""qlogs at full size through the CLI, whole process, against ``cat``, ``zcat | wc -l`` and the few lines
of Python a user would write instead, all in one run.

Inputs are the testbed's own quic-go v0.65 server qlogs (bench/qlog_inputs.py writes them; nothing here
is synthesized): a fleet of small ones (100 KB page, 0.1-0.2 MB each), one of large ones (10 MB page,
about 6 MB each), both also gzipped, and one connection's 1 GB qlog. Each command gets the inputs as one
quoted glob, as a user gives them; the commands of a case run one after the other in each of ``--rounds``
rounds (paired: a burst of load hits all of them), and each figure is the median over the rounds.

Printed per case: the files, their total size and the size per file (smallest, median, largest); per
command the median wall and CPU seconds, the largest peak RSS, and the rate relative to cat (cat's
seconds / the command's: 0.25x takes four times as long as cat) and to the user's script. ``cat`` takes
0.1-0.2 s over a fleet and its time moved by 2x between runs of this bench on the same files (page cache,
the VM), so it runs ``--base-repeats`` times in each round and its best time in the round is that round's
baseline; a rate is the median over the rounds of the round's own ratio (paired: both from the same
round), and cat's range over the rounds is printed beside the table. The goals
(issue 30): infer and parse -o x.parquet >= 0.25x cat and >= 5x the script; .gz at least as fast as
``zcat | wc -l``; the 1 GB qlog >= 0.25x cat in under 500 MB.

    python3 bench/bench_qlog.py --dir ~/qlog-bench --rounds 5
    python3 bench/bench_qlog.py --dir ~/qlog-bench --cases big --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "PYTHONPATH": str(ROOT)}
"""The children run this checkout's quicsm and cache their bytecode as an installed quicsm does."""

SCRIPT = """
import glob, gzip, json, sys
kept = []
for path in glob.glob(sys.argv[1]):
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as fh:
        for line in fh:
            event = json.loads(line.lstrip("\\x1e"))
            if "congestion_state_updated" in event.get("name", ""):
                kept.append(event)
print(len(kept))
"""
"""What a user writes instead of quicsm: json.loads every line (JSON-SEQ: one record a line), keep the
congestion-state events."""


def run(cmd: list[str], shell: bool = False) -> tuple[float, float, float]:
    """Wall and CPU seconds (the whole process tree) and peak RSS in MB of one command."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=ENV, shell=shell)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            raise SystemExit(f"{cmd} failed:\n{err.read().decode(errors='replace')[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def commands(glob: str, gz: bool, scratch: str) -> dict[str, tuple[list[str], bool]]:
    quicsm = [sys.executable, "-m", "quicsm"]
    base = ("zcat, wc -l", f"zcat {glob} | wc -l") if gz else ("cat", f"cat {glob} > /dev/null")
    return {
        base[0]: (["sh", "-c", base[1]], False),
        "json.loads script": ([sys.executable, "-c", SCRIPT, glob], False),
        "quicsm infer": ([*quicsm, "infer", glob, "-o", os.path.join(scratch, "m.json")], False),
        # one process (without the option, 1,000 files or more are read on two local workers)
        "quicsm infer --dask off": (
            [*quicsm, "infer", glob, "--dask", "off", "-o", os.path.join(scratch, "m1.json")],
            False,
        ),
        "quicsm parse -o x.parquet": ([*quicsm, "parse", glob, "-o", os.path.join(scratch, "x.parquet")], False),
        # both cores of a two-core machine: the files shared among two local worker processes
        "quicsm infer --dask local:2": (
            [*quicsm, "infer", glob, "--dask", "local:2", "-o", os.path.join(scratch, "m2.json")],
            False,
        ),
        "quicsm parse --dask local:2 -o x.parquet": (
            [*quicsm, "parse", glob, "--dask", "local:2", "-o", os.path.join(scratch, "x2.parquet")],
            False,
        ),
    }


CASES = {
    "small": "small/*/*.sqlog",
    "large": "large/*/*.sqlog",
    "small-gz": "small-gz/*/*.sqlog.gz",
    "large-gz": "large-gz/*/*.sqlog.gz",
    "big": "big/*.sqlog",
}


def sizes(paths: list[Path]) -> str:
    s = sorted(p.stat().st_size for p in paths)
    mb = sum(s) / 1e6
    return f"{len(s)} files, {mb:,.1f} MB; per file {s[0] / 1e6:.2f} / {s[len(s) // 2] / 1e6:.2f} / {s[-1] / 1e6:.2f} MB (min/median/max)"


def bench_case(root: Path, name: str, rounds: int, base_repeats: int) -> None:
    pattern = CASES[name]
    paths = sorted(root.glob(pattern))
    if not paths:
        print(f"{name}: no inputs ({root / pattern}); see bench/qlog_inputs.py")
        return
    glob = str(root / pattern)
    print(f"\n## {name}: {sizes(paths)}", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        cmds = commands(glob, name.endswith("-gz"), scratch)
        if name == "big":
            del cmds["json.loads script"]  # minutes a round: the fleets show the ratio
        for path in paths:  # warm the page cache for every contender
            with open(path, "rb") as fh:
                while fh.read(1 << 24):
                    pass
        base = next(iter(cmds))
        got: dict[str, list[tuple[float, float, float]]] = {k: [] for k in cmds}
        for r in range(rounds):
            for label, (cmd, shell) in cmds.items():
                times = [run(cmd, shell) for _ in range(base_repeats if label == base else 1)]
                got[label].append(min(times))  # the baseline's best in the round
            print(f"  round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    med = {k: (statistics.median(w for w, _, _ in v), statistics.median(c for _, c, _ in v)) for k, v in got.items()}
    walls = [w for w, _, _ in got[base]]
    print(f"`{base}` over the rounds: {min(walls):.3f}-{max(walls):.3f} s (best of {base_repeats} in each)")
    print(f"| command | wall s | CPU s | peak RSS MB | rate vs `{base}` (wall) | vs the script (wall) |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, (wall, cpu) in med.items():
        peak = max(m for _, _, m in got[label])
        print(
            f"| `{label}` | {wall:.2f} | {cpu:.2f} | {peak:.0f} | {rate(got[base], got[label])} "
            f"| {rate(got.get('json.loads script'), got[label], 1)} |"
        )


def rate(num: list[tuple[float, float, float]] | None, den: list[tuple[float, float, float]], digits: int = 3) -> str:
    """The median over the rounds of num's wall / den's wall in the same round (paired), e.g. ``0.250x``."""
    if not num:
        return "-"
    return f"{statistics.median(a[0] / b[0] for a, b in zip(num, den)):.{digits}f}x"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=Path(os.path.expanduser("~/qlog-bench")))
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--base-repeats", type=int, default=3, help="runs of cat (zcat | wc -l) in each round; its best counts"
    )
    args = ap.parse_args()
    print(f"load: {os.getloadavg()[0]:.1f} (1 min) at start; n={args.rounds} rounds, medians")
    for name in args.cases.split(","):
        bench_case(args.dir, name, args.rounds, args.base_repeats)
    print(f"load: {os.getloadavg()[0]:.1f} (1 min) at end")


if __name__ == "__main__":
    main()
