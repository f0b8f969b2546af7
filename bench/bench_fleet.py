"""Fleet benchmark: many log files, end to end through the CLI, local versus ``--dask local:N``.

Writes ``--files`` synthetic Chromium-format logs of ``--mb`` MB each (one contract line in ten, as
bench_parse.py) under a temporary directory, then times, in one run and against the same files:

* ``grep -c QUICSM`` over all files (the baseline; ratios are throughput relative to it),
* ``quicsm parse DIR -o x.parquet`` and ``quicsm infer x.parquet`` (reading the store back),
* ``quicsm diagram DIR`` in one process, and ``parse`` and ``diagram`` with ``--dask local:N``,

each ``--repeat`` times (best kept), with the child's peak RSS and the load average; then the reading
stage alone (raw logs, and the store, reduced to the summary inference reads, in one child process
after its imports), which is where the store's advantage shows when start-up is a large share. Example:

    python3 bench/bench_fleet.py --files 100 --mb 100 --workers 2   # 10 GB; needs disk and time
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from bench_parse import make_log

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""Children cache their bytecode as an installed quicsm does (best-of-N keeps the warm runs)."""


def run(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB, the largest of the process tree the child waited for).

    The child's stdout is a scratch file, not /dev/null: GNU grep stops at the first match when its
    output is /dev/null, so ``grep -c`` into it timed 2 ms for 300 MB and every ratio was void."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, env=ENV)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{err}")
    return wall, usage.ru_maxrss / 1024


def read_stage(logs: str, store: str, repeat: int) -> tuple[float, float]:
    """Seconds to reduce the raw logs, and the store, to the summary inference reads (best of ``repeat``,
    both in one child process after its imports): where the store's advantage shows, start-up aside."""
    code = (
        "import sys, time\n"
        "from quicsm.traces.summary import summarize\n"
        "def once(p):\n"
        "    t = time.perf_counter(); summarize([p]); return time.perf_counter() - t\n"
        "print(*(min(once(p) for _ in range(int(sys.argv[1]))) for p in sys.argv[2:]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(repeat), logs, store], capture_output=True, text=True, env=ENV, check=True
    )
    raw, stored = map(float, out.stdout.split())
    return raw, stored


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--mb", type=float, default=5.0, help="size of each file in MB")
    ap.add_argument("--workers", type=int, default=2, help="--dask local:N workers (0: no Dask case)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--dir", help="keep/reuse the logs here (default: a temporary directory, removed)")
    args = ap.parse_args()
    work = args.dir or tempfile.mkdtemp(prefix="quicsm-fleet-")
    logs = os.path.join(work, "logs")
    os.makedirs(logs, exist_ok=True)
    paths = [os.path.join(logs, f"server{i:03d}.log") for i in range(args.files)]
    for i, p in enumerate(paths):
        if not os.path.exists(p):
            make_log(p, args.mb, 9, seed=i)
    size = sum(os.path.getsize(p) for p in paths)
    store = os.path.join(work, "x.parquet")
    q = [sys.executable, "-m", "quicsm"]
    cases = {
        "grep -c QUICSM": ["grep", "-c", "QUICSM", *paths],
        "quicsm parse -o x.parquet": [*q, "parse", logs, "-o", store, "-q"],
        "quicsm infer LOGS": [*q, "infer", logs, "-o", os.devnull, "-q"],
        "quicsm infer x.parquet": [*q, "infer", store, "-o", os.devnull, "-q"],
        "quicsm diagram": [*q, "diagram", logs, "-o", os.path.join(work, "d.svg"), "-q"],
        "quicsm diagram x.parquet": [*q, "diagram", store, "-o", os.path.join(work, "d3.svg"), "-q"],
    }
    if args.workers:
        for verb, out in (("parse", "x2.parquet"), ("diagram", "d2.dot")):
            cases[f"quicsm {verb} --dask local:{args.workers}"] = [
                *q,
                verb,
                logs,
                "-o",
                os.path.join(work, out),
                "-q",
                "--dask",
                f"local:{args.workers}",
            ]
    best: dict[str, tuple[float, float]] = {}
    for _ in range(args.repeat):
        for name, cmd in cases.items():
            wall, rss = run(cmd)
            if name not in best or wall < best[name][0]:
                best[name] = (wall, max(rss, best.get(name, (0, 0))[1]))
    base = best["grep -c QUICSM"][0]
    print(f"{args.files} files, {size / 1e6:.0f} MB; best of {args.repeat}; load average {os.getloadavg()}")
    print(f"{'case':<34} {'seconds':>8} {'MB/s':>8} {'vs grep':>8} {'peak RSS MB':>12}")
    for name, (wall, rss) in best.items():
        print(f"{name:<34} {wall:>8.2f} {size / 1e6 / wall:>8.1f} {base / wall:>8.3f} {rss:>12.0f}")
    print(
        "store read-back vs raw log (infer): "
        f"{best['quicsm infer LOGS'][0] / best['quicsm infer x.parquet'][0]:.2f}x faster"
    )
    raw, stored = read_stage(logs, store, args.repeat)
    print(
        f"reading stage alone (input -> summary, in one process, start-up excluded): raw logs {raw:.2f} s, "
        f"store {stored:.2f} s: {raw / stored:.2f}x faster"
    )
    if args.workers:
        for verb in ("parse", "diagram"):
            local = best["quicsm parse -o x.parquet" if verb == "parse" else "quicsm diagram"][0]
            dask = best[f"quicsm {verb} --dask local:{args.workers}"][0]
            print(f"dask speed-up over one process ({verb}): {local / dask:.2f}x")
    if not args.dir:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
