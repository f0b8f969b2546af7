"""A finished (or partly finished) grid as numbers: every run's record, and per cell the percent difference
between two arms with Welch's test and one multiple-testing correction over the whole grid.

The paper's rule (IMC'17 Sec. 5.2): a cell's difference is shown only when Welch's t-test rejects equal
means at p < 0.01; otherwise the cell is white. A grid tests many cells at once, so by default the
p-values are corrected over every cell and compared arm of the grid (Holm); ``correction = "none"`` is
the paper's rule as printed. The percent difference is signed so that positive always means the compared
arm did better than the baseline: for page-load time ``(baseline - arm) / baseline``, for goodput
``(arm - baseline) / baseline`` (Fig. 6's red = QUIC faster; Carlucci et al.'s improvement Im).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from quicsm.compare.stats import TestResult, correct, welch
from quicsm.errors import InputError
from quicsm.formats import checked
from quicsm.grids.execute import GRID_JSON, GridRecord
from quicsm.grids.metrics import Metric, metric
from quicsm.grids.spec import Cell, Grid, grid_from_data
from quicsm.testbed.runner import read_meta
from quicsm.traces.runmeta import RunMeta

__all__ = [
    "CellResult",
    "GridComparison",
    "GridRuns",
    "RunRecord",
    "compare_cells",
    "compare_grid",
    "load_grid_runs",
    "percent_difference",
]


@dataclass(frozen=True, slots=True)
class RunRecord:
    cell: str
    """The cell's id (``rate=10,size=5KB``)."""
    arm: str
    round: int
    run_dir: Path
    good: bool
    meta: RunMeta = field(repr=False)


@dataclass(frozen=True, slots=True)
class GridRuns:
    """A grid's output directory read back: the grid (from ``grid.json``) and the runs it holds."""

    grid: Grid
    out: Path
    records: tuple[RunRecord, ...]
    missing: int
    """Planned runs the directory does not hold (a grid stopped early)."""

    def runs(self, cell: str, arm: str, *, good: bool = True) -> list[RunRecord]:
        return [r for r in self.records if r.cell == cell and r.arm == arm and (r.good or not good)]

    def values(self, cell: str, arm: str, m: Metric) -> list[float]:
        """The metric of every good run of ``arm`` in ``cell`` that tells it."""
        return [v for r in self.runs(cell, arm) if (v := m.value(r.meta)) is not None and math.isfinite(v)]


def load_grid_runs(out: Path | str) -> GridRuns:
    """Read ``out/grid.json`` and every planned run's ``meta.json`` (runs of other parameters are not taken)."""
    out = Path(out)
    path = out / GRID_JSON
    if not path.is_file():
        raise InputError(f"{path}: no {GRID_JSON} (not the output of `quicsm grid run`)")
    rec = checked(path.read_bytes(), GridRecord, str(path))
    grid = grid_from_data(rec.data, path=Path(rec.source) if rec.source else None, name=rec.name or out.name)
    records = []
    missing = 0
    for p in grid.plan():
        run_dir = out / p.rel_dir
        if not (run_dir / "meta.json").is_file():
            missing += 1
            continue
        meta = read_meta(run_dir)
        if (meta.grid or {}).get("fingerprint") != p.fingerprint:
            missing += 1
            continue
        good = bool(meta.result and meta.result.ok and meta.emulator and meta.emulator.ok)
        records.append(RunRecord(p.cell.id, p.arm, p.round, run_dir, good, meta))
    return GridRuns(grid, out, tuple(records), missing)


@dataclass(frozen=True, slots=True)
class CellResult:
    """One cell: arm ``versus`` against ``baseline`` on the grid's metric."""

    cell: Cell
    baseline: str
    versus: str
    a: tuple[float, ...]
    """The baseline's values (good runs)."""
    b: tuple[float, ...]
    diff_pct: float | None
    """Percent difference, positive when ``versus`` did better (None without values in both arms)."""
    test: TestResult
    p_adjusted: float | None
    significant: bool

    @property
    def mean_a(self) -> float | None:
        return float(np.mean(self.a)) if self.a else None

    @property
    def mean_b(self) -> float | None:
        return float(np.mean(self.b)) if self.b else None

    @property
    def sd_a(self) -> float | None:
        return float(np.std(self.a, ddof=1)) if len(self.a) > 1 else None

    @property
    def sd_b(self) -> float | None:
        return float(np.std(self.b, ddof=1)) if len(self.b) > 1 else None

    @property
    def testable(self) -> bool:
        return self.test.p_value is not None


@dataclass(frozen=True, slots=True)
class GridComparison:
    metric: Metric
    baseline: str
    versus: tuple[str, ...]
    alpha: float
    correction: str
    cells: tuple[CellResult, ...]
    """Every cell for every compared arm, in the grid's cell order, arm by arm."""

    def of(self, versus: str) -> list[CellResult]:
        return [c for c in self.cells if c.versus == versus]

    def cell(self, cell_id: str, versus: str) -> CellResult:
        return next(c for c in self.cells if c.cell.id == cell_id and c.versus == versus)


def percent_difference(a: Sequence[float], b: Sequence[float], higher_is_better: bool) -> float | None:
    """How much better the mean of ``b`` is than the mean of ``a``, in percent of ``a``'s."""
    if not len(a) or not len(b):
        return None
    ma, mb = float(np.mean(a)), float(np.mean(b))
    if ma == 0:
        return None
    return 100.0 * ((mb - ma) if higher_is_better else (ma - mb)) / abs(ma)


def compare_cells(
    values: Callable[[str, str], Sequence[float]],
    cells: Sequence[Cell],
    *,
    baseline: str,
    versus: Sequence[str],
    m: Metric,
    alpha: float = 0.01,
    correction: str = "holm",
) -> GridComparison:
    """Welch's test of ``versus`` against ``baseline`` in every cell (``values(cell_id, arm)`` gives a cell's
    values), p-values corrected over all of them; significant when the corrected p < ``alpha``."""
    if not 0 < alpha < 1:
        raise InputError(f"alpha must be between 0 and 1, not {alpha}")
    raw: list[tuple[Cell, str, tuple[float, ...], tuple[float, ...], TestResult]] = []
    for v in versus:
        for c in cells:
            a, b = tuple(values(c.id, baseline)), tuple(values(c.id, v))
            raw.append((c, v, a, b, welch(np.asarray(a, float), np.asarray(b, float))))
    adjusted = correct([t.p_value for *_, t in raw], correction)
    out = []
    for (c, v, a, b, t), q in zip(raw, adjusted):
        diff = percent_difference(a, b, m.higher_is_better)
        sig = q is not None and q < alpha and diff is not None and diff != 0
        out.append(CellResult(c, baseline, v, a, b, diff, t, q, sig))
    return GridComparison(m, baseline, tuple(versus), alpha, correction, tuple(out))


def compare_grid(
    runs: GridRuns,
    *,
    metric_name: str | None = None,
    baseline: str | None = None,
    versus: Sequence[str] | None = None,
    alpha: float | None = None,
    correction: str | None = None,
) -> GridComparison:
    """:func:`compare_cells` on a grid's runs; every argument left out comes from the grid's ``[report]``."""
    g, r = runs.grid, runs.grid.report
    arms = g.arm_names
    base = baseline or (r.baseline if isinstance(r.baseline, str) else arms[0])
    if base not in arms:
        raise InputError(f"baseline {base!r}: the grid's arms are {', '.join(arms)}")
    others = list(versus or (r.versus if isinstance(r.versus, list) else [a for a in arms if a != base]))
    bad = [v for v in others if v not in arms or v == base]
    if bad or not others:
        raise InputError(
            f"compare {', '.join(bad) or 'nothing'} against {base}: the grid's arms are {', '.join(arms)} "
            "(a grid needs two arms to compare)"
        )
    m = metric(metric_name or r.metric)
    return compare_cells(
        lambda cell, arm: runs.values(cell, arm, m),
        g.cells(),
        baseline=base,
        versus=others,
        m=m,
        alpha=alpha if alpha is not None else r.alpha,
        correction=correction or r.correction,
    )
