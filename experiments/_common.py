"""Shared by the experiment scripts: load runs (traces + meta.json), format numbers and tables."""

from __future__ import annotations

import glob
import math
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from quicsm.compare.stats import welch
from quicsm.testbed import runner
from quicsm.traces import Trace, parse_inputs


def read_meta(run_dir: Path) -> dict[str, Any]:
    """A run's meta.json as plain data (these scripts index it; quicsm reads it as runmeta.RunMeta)."""
    return msgspec.to_builtins(runner.read_meta(run_dir))


__all__ = ["load_runs", "fmt_p", "fmt_ms", "mean_sd", "table", "git_rev", "welch_p"]


def load_runs(out: Path, prefix: str = "") -> list[tuple[Trace, dict[str, Any]]]:
    """Every successful, emulator-ok run ``out/<prefix>NN``: (trace, meta).

    A run has one connection (the page load); its trace is the longest in the log.
    """
    pairs = []
    logs = sorted(glob.glob(str(out / f"{prefix}[0-9][0-9]" / "server.log")))
    for log in logs:
        meta = read_meta(Path(log).parent)
        if not (meta["result"]["ok"] and meta["emulator"]["ok"]):
            continue
        traces = parse_inputs([log], require_transitions=False).traces
        if not traces:
            continue
        pairs.append((max(traces, key=lambda t: t.duration_us), meta))
    return pairs


def mean_sd(xs: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (NaN for no values, 0 for one)."""
    a = np.asarray(xs, dtype=float)
    if a.size == 0:
        return math.nan, math.nan
    return float(a.mean()), float(a.std(ddof=1)) if a.size > 1 else 0.0


def welch_p(b: Sequence[float], a: Sequence[float]) -> float | None:
    """p of Welch's test (quicsm.compare's, as ``quicsm compare`` runs it) of ``b`` against ``a``."""
    return welch(np.asarray(a, dtype=float), np.asarray(b, dtype=float)).p_value


def fmt_p(p: float | None) -> str:
    if p is None or math.isnan(p):
        return "n/a"
    return f"{p:.1e}" if p < 0.001 else f"{p:.3f}"


def fmt_ms(x: float) -> str:
    return f"{x:.0f}"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def git_rev() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=os.path.dirname(__file__),
            timeout=10,
        ).stdout.strip()
    except OSError:
        return "unknown"


def matrix_runs(scenarios: str, out: str | None, analyse_only: bool, retries: int | None = None) -> tuple[Any, Path]:
    """The scenario file and its run directory; unless only analysing, the runs made first with
    ``quicsm testbed matrix`` (``retries`` passed on when given)."""
    from quicsm.testbed.matrix import load_matrix

    m = load_matrix(Path(scenarios))
    where = Path(out) if out else m.out
    assert where is not None
    if not analyse_only:
        cmd = [sys.executable, "-m", "quicsm", "testbed", "matrix", scenarios, "--out", str(where)]
        if retries is not None:
            cmd += ["--retries", str(retries)]
        subprocess.run(cmd, check=True)
    return m, where


def write_report(report: Path, text: str, notes: Path) -> None:
    """Write (and print) the report, with the hand-written notes appended when there are any."""
    if notes.is_file():
        text += "\n" + notes.read_text()
    report.write_text(text)
    print(text)
