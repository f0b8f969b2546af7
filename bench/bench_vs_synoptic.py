"""Our ``synoptic`` engine against the original Synoptic, whole process, on the same inputs.

Per size (default 10^3 and 10^4 events of ``bench_infer.synth``'s Cubic-like traces) the traces are
written twice: as a quicsm contract log (``server.log``) and as Synoptic's log
(:func:`quicsm.inference.export.dump_synoptic_log`, the sequences ``quicsm export server.log`` writes:
without the leading ``Init``, the contract's start marker). Then, as a user runs them, one after the other:

- ours: ``quicsm diagram server.log -o model.png`` (parse, infer, annotate, draw the PNG: Graphviz's
  library lays it out and draws dot's pixels, quicsm encodes them, :mod:`quicsm.diagrams.gvlib`);
- the original: ``java -jar JAR -r ... -m ... -o model --randomSeed=1 synoptic.log``, whose default
  output is the final model's DOT file and its PNG (drawn with the same dot).

The original runs only if a jar is configured (``--jar`` or ``$QUICSM_SYNOPTIC_JAR``); otherwise the
figures recorded on this project's machine are printed instead and marked as recorded. ``--events``
also takes 1e7 to time ours alone (the original would need days).

``--verb infer`` times the model alone instead: ``quicsm infer server.log -o model.json`` against the
jar as the ``synoptic-jar`` engine runs it (``-j --noModelOutput``: the JSON model, no DOT or PNG).

    python bench/bench_vs_synoptic.py [--events 1000 10000] [--runs 3] [--verb diagram|infer] [--jar synoptic.jar]
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_infer import synth

from quicsm.inference.export import dump_synoptic_log, synoptic_arguments
from quicsm.inference.synoptic_jar import ENV_JAR
from quicsm.traces.contract import format_line
from quicsm.traces.states import INIT

RECORDED_ORIGINAL_S = {1_000: 15.6, 10_000: 3416.0}
"""The original (a2b6a0d, Java 17 with the NamedMatcher fix) on these inputs, whole process, CPU seconds
on this project's machine: 10^3 events with its PNG (2026-11-23); 10^4 events the finished JSON-only run
of ``recorded-10k.json.gz`` (2026-11-26, 1 h 30 min of wall time; 1,086 s was a run stopped unfinished)."""


def write_contract_log(seqs: list[list[str]], path: Path) -> None:
    """The sequences as a quicsm contract log: one transition line per step, a close line per connection."""
    with path.open("w", encoding="utf-8") as fh:
        t = 1_000_000
        for c, seq in enumerate(seqs):
            for a, b in zip(seq, seq[1:]):
                t += 1000
                fh.write(format_line(conn=f"0x{c:x}", t_us=t, cc="cubic", frm=a, to=b) + "\n")
            fh.write(format_line(conn=f"0x{c:x}", t_us=t + 500, cc="cubic", ev="close") + "\n")


def compile_bytecode() -> None:
    """Write quicsm's bytecode as ``pip install`` does, so that a shell with PYTHONDONTWRITEBYTECODE set
    (or an editable install never run before) does not recompile every module in each timed run: that
    was 0.33 s of a 1.8 s 10^3-event diagram, a cost no installed quicsm has."""
    import compileall

    import quicsm

    compileall.compile_dir(str(Path(quicsm.__file__).parent), quiet=1)


def timed(cmd: list[str], cwd: Path, runs: int) -> float:
    """Median wall seconds of ``runs`` runs of ``cmd`` (whole process)."""
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - t)
        if proc.returncode != 0:
            sys.exit(f"{shlex.join(cmd)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return sorted(times)[len(times) // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=float, nargs="+", default=[1_000, 10_000])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jar", default=os.environ.get(ENV_JAR))
    ap.add_argument("--java", default="java")
    ap.add_argument("--keep", type=Path, help="write the inputs here and keep them")
    ap.add_argument("--verb", choices=["diagram", "infer"], default="diagram", help="what both sides output")
    opts = ap.parse_args()
    quicsm = shutil.which("quicsm") or sys.exit("quicsm is not on PATH")
    compile_bytecode()
    for events in map(int, opts.events):
        seqs = synth(events)
        work = opts.keep or Path(tempfile.mkdtemp(prefix="quicsm-vs-synoptic-"))
        work.mkdir(parents=True, exist_ok=True)
        write_contract_log(seqs, work / "server.log")
        with (work / "synoptic.log").open("w", encoding="utf-8") as fh:  # what `quicsm export server.log` writes:
            dump_synoptic_log([s[1:] if s[0] == INIT else s for s in seqs], fh)  # Init is the start marker
        n = sum(map(len, seqs))
        out = "model.png" if opts.verb == "diagram" else "model.json"
        ours = timed([quicsm, opts.verb, "server.log", "-o", out, "-q"], work, opts.runs)
        print(f"events {n}, traces {len(seqs)}: ours (quicsm {opts.verb} -o {out}) {ours:.2f} s", flush=True)
        if events > 100_000:
            continue
        if opts.jar:
            json_only = opts.verb == "infer"
            args = synoptic_arguments("synoptic.log", str(work / "original"), quiet=True, json_only=json_only)
            theirs = timed([opts.java, "-jar", opts.jar, *args], work, 1)
            note = "measured, one run"
        elif opts.verb == "infer":
            print("  original Synoptic: no jar configured (figures recorded for --verb infer: docs/inference.md)")
            continue
        else:
            theirs, note = RECORDED_ORIGINAL_S.get(events, float("nan")), "recorded (no jar configured)"
        what = "its PNG" if opts.verb == "diagram" else "its JSON model"
        print(f"  original Synoptic with {what}: {theirs:.1f} s [{note}]; ratio {theirs / ours:.0f}x", flush=True)


if __name__ == "__main__":
    main()
