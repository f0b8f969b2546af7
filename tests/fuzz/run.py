"""Mutation fuzzer over every quicsm reader, in-process, on one core.

    python3 -m tests.fuzz.run --inputs 1000000            # the long run (about an hour on one core)
    python3 -m tests.fuzz.run --seconds 60 --save out/   # a time budget; keep one example per crash kind

Prints inputs tried (per target), distinct crash kinds with a count and one location each, and
C/Python scanner disagreements. Exit status 1 if there was any crash or disagreement.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import random
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from quicsm.errors import QuicsmError
from tests.fuzz.mutate import load_seeds
from tests.fuzz.targets import HAVE_C, TARGETS, Target, parquet_seed

HANG_SECONDS = 10
LAST_INPUT = "fuzz-input.bin"
"""The input being run, written before it runs (the process may die with it: a fault in C code)."""


class Hang(Exception):
    """An input took longer than HANG_SECONDS."""


@dataclass
class Results:
    tried: Counter[str] = field(default_factory=Counter)
    crashes: Counter[str] = field(default_factory=Counter)
    disagreements: Counter[str] = field(default_factory=Counter)
    examples: dict[str, bytes] = field(default_factory=dict)
    stopped: bool = False
    """Interrupted (SIGINT/SIGTERM) before the budget was spent."""

    @property
    def total(self) -> int:
        return sum(self.tried.values())

    def ok(self) -> bool:
        return not self.crashes and not self.disagreements

    def summary(self) -> str:
        out = [f"inputs tried: {self.total}  (C scanner {'present' if HAVE_C else 'ABSENT'})"]
        if self.stopped:
            out[0] += "  [stopped early]"
        out += [f"  {n:>9}  {name}" for name, n in sorted(self.tried.items())]
        out.append(f"crashes: {sum(self.crashes.values())} of {len(self.crashes)} distinct kind(s)")
        out += [f"  {n:>9}  {kind}" for kind, n in self.crashes.most_common()]
        out.append(f"disagreements: {sum(self.disagreements.values())}")
        out += [f"  {n:>9}  {kind}" for kind, n in self.disagreements.most_common()]
        return "\n".join(out)


def _crash_kind(target: str, exc: BaseException) -> str:
    """Target, exception type and the innermost quicsm frame: one kind per bug, not per input."""
    where = "?"
    for frame in traceback.extract_tb(exc.__traceback__):
        if "/quicsm/" in frame.filename:
            where = f"{Path(frame.filename).name}:{frame.lineno}"
    cause = exc.__cause__ if getattr(exc, "unexpected", False) and exc.__cause__ else exc
    if cause is not exc:
        for frame in traceback.extract_tb(cause.__traceback__):
            if "/quicsm/" in frame.filename:
                where = f"{Path(frame.filename).name}:{frame.lineno}"
    return f"{target}: {type(cause).__name__} at {where}: {str(cause)[:80]}"


def run_one(target: Target, data: bytes, scratch: Path, results: Results) -> None:
    results.tried[target.name] += 1
    signal.alarm(HANG_SECONDS)
    try:
        diff = target.run(data, scratch)
    except QuicsmError as exc:
        if not getattr(exc, "unexpected", False):
            return
        kind = _crash_kind(target.name, exc)
    except Hang:
        kind = f"{target.name}: hang (over {HANG_SECONDS} s)"
    except Exception as exc:  # every other exception is the finding
        kind = _crash_kind(target.name, exc)
    else:
        if diff is None:
            return
        results.disagreements[f"{target.name}: {diff}"] += 1
        results.examples.setdefault(f"{target.name}: {diff}", data)
        return
    finally:
        signal.alarm(0)
    results.crashes[kind] += 1
    results.examples.setdefault(kind, data)


def fuzz(
    *,
    inputs: int | None = None,
    seconds: float | None = None,
    seed: int = 1,
    targets: list[Target] | None = None,
    progress: bool = False,
) -> Results:
    """Run until ``inputs`` inputs or ``seconds`` have passed (whichever first)."""
    rng = random.Random(seed)
    seeds = load_seeds()
    chosen = targets if targets is not None else TARGETS
    pool = [t for t in chosen for _ in range(t.weight)]
    results = Results()

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        raise Hang()

    old = signal.signal(signal.SIGALRM, on_alarm)
    deadline = time.monotonic() + seconds if seconds else None
    last = time.monotonic()
    old_term = signal.getsignal(signal.SIGTERM)
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None  # in memory: writing to disk dominates
    with tempfile.TemporaryDirectory(prefix="quicsm-fuzz-", dir=shm) as d:
        scratch = Path(d)
        if progress:
            print(f"a fault (SIGSEGV, a sanitizer's abort) leaves its input in {scratch / LAST_INPUT}", file=sys.stderr)
        if any(t.seed_kind == "parquet" for t in chosen):
            seeds.by_kind["parquet"] = [parquet_seed(scratch, seeds.by_kind["jsonl"][0])]
        try:
            old_term = signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop early: print the figures
            while inputs is None or results.total < inputs:
                if deadline is not None and time.monotonic() > deadline:
                    break
                target = rng.choice(pool)
                data = target.make(rng, seeds)
                (scratch / LAST_INPUT).write_bytes(data)  # in memory; kept if a fault kills the process
                try:
                    run_one(target, data, scratch, results)
                except KeyboardInterrupt:
                    results.tried[target.name] -= 1  # the interrupted input does not count
                    results.stopped = True
                    break
                if progress and time.monotonic() - last > 30:
                    last = time.monotonic()
                    print(
                        f"... {results.total} inputs, {sum(results.crashes.values())} crashes, "
                        f"{sum(results.disagreements.values())} disagreements",
                        file=sys.stderr,
                        flush=True,
                    )
        finally:
            signal.signal(signal.SIGALRM, old)
            signal.signal(signal.SIGTERM, old_term)
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tests.fuzz.run", description=__doc__.split("\n")[0])
    ap.add_argument("--inputs", type=int, default=None, help="stop after this many inputs")
    ap.add_argument("--seconds", type=float, default=None, help="stop after this long")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--target", action="append", help="only these targets (repeatable); see targets.py")
    ap.add_argument("--save", type=Path, help="write one example input per crash kind here")
    args = ap.parse_args(argv)
    faulthandler.enable()  # a fault in C code: the Python stack (which target) on stderr
    if args.inputs is None and args.seconds is None:
        args.inputs = 10_000
    targets = [t for t in TARGETS if not args.target or t.name in args.target]
    start = time.monotonic()
    results = fuzz(inputs=args.inputs, seconds=args.seconds, seed=args.seed, targets=targets, progress=True)
    elapsed = time.monotonic() - start
    print(results.summary())
    print(f"elapsed: {elapsed:.0f} s ({results.total / max(elapsed, 1e-9):.0f} inputs/s)")
    if args.save and results.examples:
        args.save.mkdir(parents=True, exist_ok=True)
        for i, (kind, data) in enumerate(sorted(results.examples.items())):
            (args.save / f"{i:03d}.bin").write_bytes(data)
            (args.save / f"{i:03d}.txt").write_text(kind + "\n")
    return 0 if results.ok() else 1


if __name__ == "__main__":
    sys.exit(main())
