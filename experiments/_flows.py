"""Shared by the multi-flow experiments (Table 4, Fig. 5, CS244): run a FlowScenario N times in
short locked stretches, redo runs the emulator was late for, and load the runs back."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from quicsm.testbed.flows import FlowScenario, FlowSpec, run_flows

__all__ = ["run_series", "load_series", "LOCK", "scenario_dict", "scenario_from_dict"]

LOCK = "/tmp/quicsm-testbed.lock"


def scenario_dict(sc: FlowScenario) -> dict[str, Any]:
    from dataclasses import asdict

    return {**asdict(sc), "flows": [asdict(f) for f in sc.flows]}


def scenario_from_dict(d: dict[str, Any]) -> FlowScenario:
    from quicsm.testbed.tcp import TcpTuning

    return FlowScenario(
        **{
            **d,
            "flows": tuple(FlowSpec(**f) for f in d["flows"]),
            "tuning": TcpTuning(**d.get("tuning", {})),
        }
    )


def run_series(sc: FlowScenario, out: Path, runs: int, *, retries: int = 1, per_lock: int = 5) -> dict[str, int]:
    """``runs`` good runs of ``sc`` in ``out/<name>-NN`` (existing good ones count). Each stretch of
    ``per_lock`` runs holds the testbed lock in a child process, so other users get a turn."""
    out.mkdir(parents=True, exist_ok=True)
    counts = {"done": 0, "redone": 0, "failed": 0}
    while True:
        have = [p for p in sorted(out.glob(f"{sc.name}-[0-9][0-9]")) if _good(p)]
        if len(have) >= runs:
            counts["done"] = len(have)
            return counts
        todo = min(per_lock, runs - len(have))
        spec = json.dumps({"scenario": scenario_dict(sc), "out": str(out), "todo": todo, "retries": retries})
        proc = subprocess.run(
            ["flock", LOCK, sys.executable, __file__, spec], capture_output=True, text=True, timeout=3600
        )
        sys.stderr.write(proc.stderr)
        try:
            got = json.loads(proc.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise SystemExit(f"series {sc.name}: runner failed: {proc.stderr[-2000:]}") from None
        for k in ("redone", "failed"):
            counts[k] += got[k]
        if got["failed"] >= todo:
            raise SystemExit(f"series {sc.name}: every run of a stretch failed; see {out}")


def _good(run: Path) -> bool:
    try:
        m = json.loads((run / "meta.json").read_text())
    except (OSError, ValueError):
        return False
    return bool(m.get("result", {}).get("ok") and m.get("emulator", {}).get("ok"))


def _stretch(spec: dict[str, Any]) -> dict[str, int]:
    """In the child, under the lock: ``todo`` more runs, each redone up to ``retries`` times when
    it failed or the emulator was late; bad attempts kept in ``out/_rejected``."""
    sc = scenario_from_dict(spec["scenario"])
    out = Path(spec["out"])
    redone = failed = 0
    taken = [int(p.name.rsplit("-", 1)[1]) for p in out.glob(f"{sc.name}-[0-9][0-9]")]
    nxt = max(taken) + 1 if taken else 0
    for i in range(nxt, nxt + int(spec["todo"])):
        run_dir = out / f"{sc.name}-{i:02d}"
        for attempt in range(int(spec["retries"]) + 1):
            from dataclasses import replace

            res = run_flows(replace(sc, seed=sc.seed + attempt * 7919), run_dir, index=i)
            state = "ok" if res.ok and res.emulator_ok else ("late" if res.ok else f"FAILED {res.error}")
            thr = " ".join(f"{k}={v:.2f}" for k, v in res.throughput_mbps.items())
            print(f"{run_dir.name}: {state} {thr}", file=sys.stderr, flush=True)
            if res.ok and res.emulator_ok:
                break
            if attempt < int(spec["retries"]):
                redone += 1
                rej = out / "_rejected" / f"{run_dir.name}-attempt{attempt}"
                rej.parent.mkdir(parents=True, exist_ok=True)
                shutil.rmtree(rej, ignore_errors=True)
                os.replace(run_dir, rej)
            else:
                failed += 1
    return {"redone": redone, "failed": failed}


def load_series(out: Path, name: str) -> list[Path]:
    """The good runs of one scenario, in order."""
    return [p for p in sorted(out.glob(f"{name}-[0-9][0-9]")) if _good(p)]


if __name__ == "__main__":
    print(json.dumps(_stretch(json.loads(sys.argv[1]))))
