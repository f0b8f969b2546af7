"""Our ``synoptic`` engine against the original Synoptic on the same 10k-event input, end to end.

Both run through the Python API (``infer_sequences``; the jar engine includes the JVM start) on the
bench's Cubic-like traces (``bench_infer.synth``). The original runs only if a jar is configured
(``--jar`` or ``$QUICSM_SYNOPTIC_JAR``, engine ``synoptic-jar``); otherwise the figure recorded on
this project's machine is printed instead and marked as recorded.

    python bench/bench_vs_synoptic.py [--events 10000] [--jar synoptic.jar] [--java java]
"""

from __future__ import annotations

import argparse
import os
import time

from bench_infer import synth

from quicsm.inference import infer_sequences
from quicsm.inference.synoptic_jar import ENV_JAR

RECORDED_ORIGINAL_S = 18 * 60.0
"""Synoptic (a2b6a0d, Java 17, the Java 17 fix) on 10k bench events, 2026-11-23 (issue 12): about 18 min."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=10_000)
    ap.add_argument("--jar", default=os.environ.get(ENV_JAR))
    ap.add_argument("--java", default="java")
    opts = ap.parse_args()
    seqs = synth(opts.events)
    t = time.perf_counter()
    infer_sequences(seqs, "synoptic")
    ours = time.perf_counter() - t
    if opts.jar:
        t = time.perf_counter()
        infer_sequences(seqs, "synoptic-jar", synoptic_jar=opts.jar, java=opts.java)
        theirs, note = time.perf_counter() - t, "measured"
    else:
        theirs, note = RECORDED_ORIGINAL_S, "recorded (no jar configured)"
    print(f"events {sum(map(len, seqs))}, traces {len(seqs)}")
    print(f"ours (engine synoptic): {ours:.2f} s")
    print(f"original Synoptic: {theirs:.1f} s [{note}]")
    print(f"ratio: {theirs / ours:.0f}x")


if __name__ == "__main__":
    main()
