"""The grid reproductions (IMC'17 Fig. 6a, 6b, 7, 8, 9, 15; Carlucci et al. S1, S3): each is a grid file
``experiments/<name>.toml`` run by ``quicsm grid run`` and reported by ``quicsm grid report``.

    sudo python3 experiments/grids.py run imc17_fig6a [--chunk 8m] [--pause 60]
    python3 experiments/grids.py report imc17_fig6a [--metric goodput ...]

``run`` makes the grid in chunks, each holding the testbed lock for at most ``--chunk`` (others get a
turn in between), until every run is made; a grid stopped any way continues where it was. ``report``
writes the grid report into /tmp/qsm-exp/<name>-report (with every cell's ``quicsm compare`` page) and
copies what the repository keeps into experiments/grids/<name>/ (heatmaps, cwnd timelines, cells.csv,
grid-report.json); experiments/<name>.md is the report's Markdown with experiments/<name>.notes.md (what
matches the paper, what does not, and why, from the state machines) appended.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import git_rev, write_report

HERE = Path(__file__).resolve().parent
LOCK = "/tmp/quicsm-testbed.lock"
KEEP = ("heatmap-*.svg", "heatmap-*.png", "timeline-*.svg", "cells.csv", "grid-report.json")
INCOMPLETE = 3


def _quicsm(*args: str) -> list[str]:
    return [sys.executable, "-m", "quicsm", *args]


def run(name: str, chunk: str, pause: float) -> None:
    grid = HERE / f"{name}.toml"
    while True:
        t0 = time.monotonic()
        proc = subprocess.run(["flock", LOCK, *_quicsm("grid", "run", str(grid), "--for", chunk)])
        if proc.returncode == 0:
            return
        if proc.returncode != INCOMPLETE:
            raise SystemExit(f"{name}: quicsm grid run exited {proc.returncode}")
        print(f"{name}: chunk of {time.monotonic() - t0:.0f} s done; pausing {pause:g} s for others", file=sys.stderr)
        time.sleep(pause)


def report(name: str, extra: list[str]) -> None:
    import tomllib

    data = tomllib.loads((HERE / f"{name}.toml").read_text())
    out = Path(data["out"])
    full = Path(f"/tmp/qsm-exp/{name}-report")
    shutil.rmtree(full, ignore_errors=True)
    subprocess.run(_quicsm("grid", "report", str(out), "-o", str(full), *extra), check=True)
    keep = HERE / "grids" / name
    shutil.rmtree(keep, ignore_errors=True)
    keep.mkdir(parents=True)
    for pattern in KEEP:
        for f in sorted(full.glob(pattern)):
            shutil.copy(f, keep / f.name)
    text = (full / "report.md").read_text().replace("](heatmap-", f"](grids/{name}/heatmap-")
    for t in sorted(keep.glob("timeline-*.svg")):
        text += f"\n![{t.stem}](grids/{name}/{t.name})\n"
    text += (
        f"\nMade with quicsm {git_rev()}: `sudo python3 experiments/grids.py run {name}` then "
        f"`python3 experiments/grids.py report {name}`; the whole report with every cell's state-machine "
        f"comparison is /tmp/qsm-exp/{name}-report/report.html.\n"
    )
    write_report(HERE / f"{name}.md", text, HERE / f"{name}.notes.md")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("run", "report"))
    ap.add_argument("name", help="grid file experiments/NAME.toml")
    ap.add_argument("--chunk", default="8m", help="longest stretch holding the testbed lock")
    ap.add_argument("--pause", type=float, default=60.0, help="seconds between chunks")
    args, extra = ap.parse_known_args()
    if args.what == "run":
        run(args.name, args.chunk, args.pause)
    else:
        report(args.name, extra)


if __name__ == "__main__":
    main()
