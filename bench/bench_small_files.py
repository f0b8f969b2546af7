"""Many small files, end to end through the CLI, against ``cat`` over the same files in the same run.

A fleet's logs are 10^5-10^6 small files: hourly server logs per host, or one qlog per connection
(quic-go's ``QLOGDIR``). This writes ``--files`` of them (``small_files.py``: text logs of 0.5-1 KB in
50 host folders, or JSON-SEQ qlogs of about 1 KB) and times, each ``--repeat`` times (best kept; the
child's peak RSS), with the inputs given as one quoted glob as a user would:

* ``cat GLOB > /dev/null`` (the shell expands the glob; the baseline of every ratio),
* ``quicsm parse GLOB -o x.parquet``, ``quicsm infer GLOB``,
* ``quicsm compare A B`` of the two halves (even and odd file numbers, or odcids 0-7 and 8-f),
* with ``--workers N``, each of the three with ``--dask local:N`` too.

The ratio is throughput relative to cat (cat's seconds / quicsm's seconds): 0.2x means quicsm takes
five times as long as cat. Example:

    python3 bench/bench_small_files.py --files 20000 --kind text --repeat 3
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
from bench_fleet import ENV, run
from small_files import make_qlogs, make_text_logs

STARTUP_PROBE = """
import os, runpy, sys
import quicsm.traces.parse as parse  # the reader's own name for the opener
def first(path):
    print("FIRST FILE", file=sys.stderr, flush=True)
    os._exit(0)
parse.open_input = first
sys.argv = ["quicsm", *sys.argv[1:]]
runpy.run_module("quicsm", run_name="__main__")
"""


def startup(args: list[str]) -> float:
    """Seconds from starting ``quicsm ARGS`` until it opens its first input file (the process is then ended)."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", STARTUP_PROBE, *args], stderr=subprocess.PIPE, text=True, env=ENV)
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("FIRST FILE"):
            break
    else:
        raise SystemExit("the probe never saw a file opened")
    wall = time.perf_counter() - started
    proc.wait()
    return wall


def cases(root: str, kind: str, workers: int) -> dict[str, list[str]]:
    ext = "log" if kind == "text" else "sqlog"
    files = f"{root}/*/*.{ext}"
    half_a, half_b = (
        (f"{root}/*/*[02468].log", f"{root}/*/*[13579].log")
        if kind == "text"
        else (f"{root}/*/*[0-7]_server.sqlog", f"{root}/*/*[89a-f]_server.sqlog")
    )
    q = [sys.executable, "-m", "quicsm"]
    out = {
        "cat": ["sh", "-c", f"cat {files} > /dev/null"],
        "parse -o x.parquet": [*q, "parse", files, "-o", os.path.join(root, "..", "x.parquet"), "-q"],
        "infer": [*q, "infer", files, "-o", os.devnull, "-q"],
        "compare (two halves)": [*q, "compare", half_a, half_b, "--format", "json", "-o", os.devnull, "-q"],
    }
    if workers:
        for name in ("parse -o x.parquet", "infer", "compare (two halves)"):
            out[f"{name} --dask local:{workers}"] = [*out[name], "--dask", f"local:{workers}"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--kind", choices=["text", "qlog", "both"], default="both")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, default=0, help="also each verb with --dask local:N (0: no Dask case)")
    ap.add_argument("--dir", help="keep/reuse the files here (default: a temporary directory, removed)")
    ap.add_argument("--startup", action="store_true", help="only time start-up: until the first file is opened")
    args = ap.parse_args()
    work = args.dir or tempfile.mkdtemp(prefix="quicsm-small-")
    for kind in ("text", "qlog") if args.kind == "both" else (args.kind,):
        root = os.path.join(work, f"{kind}-{args.files}")
        if not os.path.isdir(root):
            (make_text_logs if kind == "text" else make_qlogs)(root, args.files)
        ext = "log" if kind == "text" else "sqlog"
        if args.startup:
            times = sorted(startup(["infer", f"{root}/*/*.{ext}", "-o", os.devnull]) for _ in range(args.repeat))
            print(
                f"{args.files} {kind} files: start-up until the first file is opened {times[len(times) // 2]:.2f} s "
                f"(median of {args.repeat}; {times[0]:.2f}-{times[-1]:.2f})"
            )
            continue
        size = sum(e.stat().st_size for d in os.scandir(root) for e in os.scandir(d.path))
        best: dict[str, tuple[float, float]] = {}
        todo = cases(root, kind, args.workers)
        for _ in range(args.repeat):
            for name, cmd in todo.items():
                wall, rss = run(cmd)
                if name not in best or wall < best[name][0]:
                    best[name] = (wall, max(rss, best.get(name, (0.0, 0.0))[1]))
        base = best["cat"][0]
        print(f"{args.files} {kind} files, {size / 1e6:.1f} MB; best of {args.repeat}; load {os.getloadavg()[0]:.1f}")
        print(f"{'case':<28} {'seconds':>8} {'files/s':>9} {'vs cat':>7} {'peak RSS MB':>12}")
        for name, (wall, rss) in best.items():
            print(f"{name:<28} {wall:>8.2f} {args.files / wall:>9.0f} {base / wall:>7.3f} {rss:>12.0f}")
    if not args.dir:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
