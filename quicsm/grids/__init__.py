"""Grids: the IMC'17 paper's evaluation method as a product (issue 34).

A grid file (:mod:`quicsm.grids.spec`) names axes (rate, delay, loss, object size, ...) and the arms
compared in every cell (QUIC vs TCP, 0-RTT on vs off, two versions, ...); :func:`run_grid` makes every
run through the testbed, resumably; :func:`load_grid_runs` and :func:`compare_grid` turn the runs into
per-cell percent differences with Welch's test and a correction over the grid; :mod:`quicsm.grids.heatmap`
draws them as the paper's heatmaps and :func:`write_report` writes the HTML report with the cells' state
machine comparisons and cwnd timelines.
"""

from __future__ import annotations

from quicsm.grids.execute import GridRunSummary, run_grid
from quicsm.grids.results import GridComparison, GridRuns, compare_cells, compare_grid, load_grid_runs
from quicsm.grids.spec import Grid, GridFile, load_grid

__all__ = [
    "Grid",
    "GridComparison",
    "GridFile",
    "GridRunSummary",
    "GridRuns",
    "compare_cells",
    "compare_grid",
    "load_grid",
    "load_grid_runs",
    "run_grid",
]
