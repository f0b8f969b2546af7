"""Kill ``quicsm patch apply``/``revert`` at random moments on a real tree and count the outcomes.

    python tests/instrumentation/fault_trials.py TREE [--trials 200] [--seed 1]

TREE is a source tree every default set applies to (for example ``quiche/quic/core`` of a google/quiche
checkout, copied). Half the trials kill the process after a random file step (``QUICSM_FAULT_AFTER``),
half after a random delay within an undisturbed run's duration; apply and revert alternate. After each
kill the touched files are classified as they are (pristine, patched or mixed), then ``quicsm patch
status`` runs (it completes an interrupted change) and they are classified again, and status must name
the same state; then apply and revert must bring the tree back to pristine bytes and modes. Not a
pytest module (it takes minutes); the figures are in docs/patching.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STATE_FILE = ".quicsm-patch.json"


def run(args: list[str], fault: str | None = None, delay: float | None = None) -> tuple[int, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("QUICSM_FAULT_AFTER", None)
    if fault:
        env["QUICSM_FAULT_AFTER"] = fault
    proc = subprocess.Popen(
        [sys.executable, "-m", "quicsm", "patch", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    if delay is not None:
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=300)
    return proc.returncode, out.decode()


def snap(root: Path, rels: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for rel in rels:
        p = root / rel
        if not p.exists():
            continue
        data = p.read_bytes()
        if rel == STATE_FILE:
            rec = json.loads(data)
            for r in rec["applied"]:
                r.pop("at", None)
            data = json.dumps(rec, sort_keys=True).encode()
        out[rel] = (data, p.stat().st_mode & 0o7777)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tree", type=Path)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    root, rng = a.tree.resolve(), random.Random(a.seed)
    rc, out = run(["apply", str(root)])
    assert rc == 0, out
    rels = sorted({f["path"] for r in json.loads((root / STATE_FILE).read_text())["applied"] for f in r["files"]})
    rels.append(STATE_FILE)
    patched = snap(root, rels)
    t0 = time.perf_counter()
    rc, out = run(["revert", str(root)])
    span = {"revert": time.perf_counter() - t0}
    assert rc == 0, out
    pristine = snap(root, rels)
    t0 = time.perf_counter()
    run(["apply", str(root)])
    span["apply"] = time.perf_counter() - t0
    run(["revert", str(root)])
    print(f"{len(rels) - 1} files; undisturbed apply {span['apply']:.2f} s, revert {span['revert']:.2f} s")
    counts: Counter = Counter()
    bad = 0

    def kind(s: dict) -> str:
        return "pristine" if s == pristine else "patched" if s == patched else "mixed"

    for i in range(a.trials):
        op = ("apply", "revert")[i % 2]
        if op == "revert":
            assert run(["apply", str(root)])[0] == 0
        how = ("step", "timed")[(i // 2) % 2]
        if how == "step":
            rc, _ = run([op, str(root)], fault=str(rng.randint(1, 4 * len(rels) + 4)))
        else:
            rc, _ = run([op, str(root)], delay=rng.uniform(0.0, span[op]))
        physical = kind(snap(root, rels))
        src, out = run(["status", str(root)])
        settled = kind(snap(root, rels))
        said = next((ln.split()[1].rstrip(":") for ln in out.splitlines() if ln.startswith("tree ")), "?")
        ok = settled in ("pristine", "patched") and said == settled and not (root / ".quicsm-journal").exists()
        if settled == "patched":
            ok &= run(["revert", str(root)])[0] == 0
        ok &= kind(snap(root, rels)) == "pristine"
        killed = "killed" if rc == -signal.SIGKILL else "finished"
        counts[f"{op} {how} {killed}: {physical} -> {settled}"] += 1
        bad += not ok
        if not ok:
            print(f"trial {i}: {op} {how} rc={rc} physical={physical} settled={settled} status said {said}\n{out}")
    for k, v in sorted(counts.items()):
        print(f"{v:4}  {k}")
    print(f"{a.trials} trials, {bad} failures")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
