"""Run a grid end to end: every planned run once, resumable, with progress.

The output directory holds ``grid.json`` (the grid's tables as read, so the report needs no file) and
``<cell>/<arm>-NN/`` per run, each a testbed run directory (``server.log``, ``meta.json`` with a ``grid``
block naming cell, arm, round and the run's fingerprint). A failed or emulator-late run is redone up to
``retries`` times, its bad attempts kept under ``_rejected/<cell>/`` as experiments do.

Running again continues where the last one stopped: a run whose ``meta.json`` is there with the same
fingerprint is done (good, or still bad after its retries: ``redo_bad`` tries those again); a directory
without ``meta.json`` (a run interrupted half-way) is moved to ``_rejected`` and run again; a run made with
other parameters (the grid file changed what a run measures) stops everything with an error rather than
mixing two experiments in one cell. Adding rounds (``runs``) or cells keeps every run already made.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from quicsm.errors import TestbedError
from quicsm.files import write_output
from quicsm.formats import described as _d
from quicsm.grids.spec import Grid, PlannedRun
from quicsm.testbed.runner import REJECTED, RunConfig, RunResult, read_meta, run_attempts
from quicsm.testbed.stacks import Built

__all__ = [
    "GRID_JSON",
    "GridEvent",
    "GridRecord",
    "GridRunSummary",
    "RunState",
    "build_key",
    "run_grid",
    "run_state",
    "write_grid_json",
]

GRID_JSON = "grid.json"
FORMAT: Literal["quicsm-grid-run"] = "quicsm-grid-run"


@dataclass(frozen=True, slots=True)
class RunState:
    """What the output already holds for a planned run."""

    status: str
    """``todo``, ``good``, ``bad`` (still bad after its retries), ``partial`` (interrupted: no meta.json)."""
    reason: str = ""


def run_state(planned: PlannedRun, out: Path) -> RunState:
    """The planned run's state in ``out``; TestbedError when the directory holds a run of other parameters."""
    run_dir = out / planned.rel_dir
    if not run_dir.exists():
        return RunState("todo")
    if not (run_dir / "meta.json").is_file():
        return RunState("partial")
    meta = read_meta(run_dir)
    have = (meta.grid or {}).get("fingerprint")
    if have != planned.fingerprint:
        raise TestbedError(
            f"{run_dir}: made with other parameters than the grid now asks for (fingerprint {have} != "
            f"{planned.fingerprint}): the grid file changed what this run measures; give a new --out, or move "
            "the old runs away"
        )
    ok = bool(meta.result and meta.result.ok)
    if ok and meta.emulator and meta.emulator.ok:
        return RunState("good")
    why = (meta.result and meta.result.error) or ("emulator late" if ok else "failed")
    return RunState("bad", str(why))


@dataclass(frozen=True, slots=True)
class GridEvent:
    """Progress: one planned run, done now or found done."""

    position: int
    total: int
    planned: PlannedRun
    status: str
    """``ran`` (result holds it), ``done`` (made by an earlier invocation)."""
    result: RunResult | None = None
    elapsed_s: float = 0.0
    eta_s: float | None = None
    """Time left for the runs still to do, from the mean time of the runs made so far."""


@dataclass(slots=True)
class GridRunSummary:
    out: Path
    planned: int
    found_done: int = 0
    ran: int = 0
    good: int = 0
    bad: list[tuple[str, str]] = field(default_factory=list)
    """(run, reason) of every run bad after its retries (made now or before)."""
    redone: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    stopped: str | None = None
    """Why the grid stopped before its last run (``time budget``), None when every run is made."""
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        return self.stopped is None

    @property
    def left(self) -> int:
        return self.planned - self.found_done - self.ran

    def lines(self) -> list[str]:
        left = self.left
        lines = [
            f"{self.good}/{self.planned} run(s) good in {self.out} ({self.ran} made now in "
            f"{self.seconds / 60:.1f} min, {self.found_done} found done)"
        ]
        if self.redone:
            lines.append(f"redone: {sum(len(r) for _, r in self.redone)} attempt(s) of {len(self.redone)} run(s)")
            lines += [f"  {name} attempt {k}: {why}" for name, reasons in self.redone for k, why in enumerate(reasons)]
        if self.bad:
            lines.append(f"not usable: {len(self.bad)} run(s) still bad after the retries (--redo-bad tries again)")
            lines += [f"  {name}: {why}" for name, why in self.bad]
        if self.stopped:
            lines.append(f"stopped ({self.stopped}): {left} run(s) left; run the same command again to continue")
        return lines


def build_key(cfg: RunConfig) -> tuple[Any, ...]:
    """Runs with the same key share binaries."""
    return (
        cfg.stack,
        cfg.version,
        cfg.cc,
        cfg.patch_set,
        cfg.packet_threshold,
        cfg.max_cwnd,
        cfg.quic_go_version,
    )


class GridRecord(msgspec.Struct, kw_only=True):
    """``grid.json`` in a grid's output: the grid file's tables as read, so ``grid report`` needs no file
    (JSON Schema ``quicsm/schemas/grid-run.schema.json``)."""

    format: Annotated[Literal["quicsm-grid-run"], _d("What the file is.")] = FORMAT
    version: Annotated[int, _d("Version of this record's layout.")] = 1
    name: Annotated[str, _d("The grid's name.")]
    source: Annotated[str | None, _d("The grid file it was run from (none: a grid given as tables).")] = None
    data: Annotated[dict[str, Any], _d("The grid file's tables as read (checked as a grid file when read).")]
    planned_runs: Annotated[int, _d("Runs the grid plans.")]
    written: Annotated[str, _d("When this record was written (UTC, ISO 8601).")]


def write_grid_json(grid: Grid, out: Path, planned: int) -> None:
    rec = GridRecord(
        name=grid.name,
        source=str(grid.path) if grid.path else None,
        data=dict(grid.data),
        planned_runs=planned,
        written=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    )
    # not sort_keys: the order of axes, values and arms is the grid's (cells, panels and the baseline follow it)
    write_output(str(out / GRID_JSON), json.dumps(msgspec.to_builtins(rec, enc_hook=str), indent=2))


def _move_aside(run_dir: Path, rejected: Path, suffix: str) -> Path:
    rejected.mkdir(parents=True, exist_ok=True)
    k = 0
    while (dest := rejected / f"{run_dir.name}-{suffix}{k}").exists():
        k += 1
    os.replace(run_dir, dest)
    return dest


def run_grid(
    grid: Grid,
    out: Path,
    *,
    retries: int | None = None,
    budget_s: float | None = None,
    redo_bad: bool = False,
    late_limit_ms: float | None = None,
    build: Callable[[RunConfig], Built] | None = None,
    run: Callable[..., RunResult] = run_attempts,
    on_event: Callable[[GridEvent], None] | None = None,
) -> GridRunSummary:
    """Make every planned run of ``grid`` that ``out`` does not hold yet (see the module doc).

    ``build`` gives a configuration's binaries (default: the stack's cached build); ``run`` makes one run
    with its retries (default :func:`quicsm.testbed.runner.run_attempts`; tests pass a fake). The grid
    stops starting runs once ``budget_s`` seconds have passed (``stopped`` says so; run it again to go on).
    """
    from dataclasses import replace

    t0 = time.monotonic()
    retries = grid.retries if retries is None else retries
    plan = grid.plan()
    if late_limit_ms is not None:
        plan = [replace(p, config=replace(p.config, late_limit_ms=late_limit_ms)) for p in plan]
    states = [run_state(p, out) for p in plan]  # refuses a changed grid before anything runs
    out.mkdir(parents=True, exist_ok=True)
    write_grid_json(grid, out, len(plan))
    summary = GridRunSummary(out=out, planned=len(plan))
    todo = [i for i, st in enumerate(states) if st.status in ("todo", "partial") or (redo_bad and st.status == "bad")]
    if build is None:
        from quicsm.testbed.stack import stack_for

        build = stack_for
    binaries: dict[tuple[Any, ...], Built] = {}
    for i in todo:  # every build first: a build that fails stops the grid before its first run
        key = build_key(plan[i].config)
        if key not in binaries:
            binaries[key] = build(plan[i].config)
    relay_bins = None
    if todo and run is run_attempts:
        from quicsm.testbed.relay import build_relay

        relay_bins = build_relay()
    made_s: list[float] = []
    todo_set = set(todo)
    left = len(todo)
    for i, (p, st) in enumerate(zip(plan, states)):
        if i not in todo_set:
            summary.found_done += 1
            if st.status == "good":
                summary.good += 1
            else:
                summary.bad.append((p.rel_dir, st.reason))
            if on_event:
                on_event(GridEvent(i + 1, len(plan), p, "done", elapsed_s=time.monotonic() - t0))
            continue
        if summary.stopped or (budget_s is not None and time.monotonic() - t0 >= budget_s):
            summary.stopped = f"time budget of {budget_s / 60:g} min used" if budget_s is not None else "stopped"
            continue  # runs found done further on are still counted
        run_dir = out / p.rel_dir
        rejected = out / REJECTED / p.cell.dirname
        if run_dir.exists():
            _move_aside(run_dir, rejected, "interrupted" if st.status == "partial" else "bad")
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        extra = {
            "grid": {
                "name": grid.name,
                "cell": dict(p.cell.values),
                "cell_id": p.cell.id,
                "arm": p.arm,
                "round": p.round,
                "fingerprint": p.fingerprint,
            }
        }
        t_run = time.monotonic()
        res = run(
            p.config,
            binaries[build_key(p.config)],
            run_dir,
            index=p.round,
            retries=retries,
            relay_bins=relay_bins,
            rejected_dir=rejected,
            extra_meta=extra,
        )
        made_s.append(time.monotonic() - t_run)
        left -= 1
        summary.ran += 1
        if res.good:
            summary.good += 1
        else:
            summary.bad.append((p.rel_dir, res.reason()))
        if res.redone:
            summary.redone.append((p.rel_dir, res.redone))
        if on_event:
            eta = sum(made_s) / len(made_s) * left
            on_event(GridEvent(i + 1, len(plan), p, "ran", res, time.monotonic() - t0, eta))
    summary.seconds = time.monotonic() - t0
    return summary
