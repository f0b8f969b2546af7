"""Grid files: the IMC'17 paper's evaluation method as a TOML file, declared as msgspec Structs
(:class:`GridFile`, JSON Schema ``quicsm/schemas/grid.schema.json``).

A grid is a set of *axes* (any key of a testbed scenario: rate, rtt, loss, jitter, buffer, size, objects,
cpu_quota, zero_rtt, ...), whose product are the grid's *cells*, and *arms*, the protocols compared in
every cell (each a set of scenario keys: stack, cc, version, http, zero_rtt, client, ...). Every arm runs
``runs`` times in every cell, the arms of a round back to back as the paper ran TCP and QUIC::

    name = "imc17_fig6a"
    description = "QUIC vs TCP: rate x object size (IMC'17 Fig. 6a)"
    out = "runs/imc17_fig6a"
    runs = 10                     # per cell and arm

    [base]                        # keys every run takes
    rtt = 36
    queue = "1bdp"

    [axes]                        # the cells: every combination
    rate = [10, 50, 100]
    size = ["5KB", "100KB", "1MB", "10MB"]

    [arms.tcp]                    # the compared protocols
    stack = "tcp"
    cc = "cubic"

    [arms.quic]
    stack = "quic-go"
    cc = "cubic"
    zero_rtt = true

    [report]                      # what `quicsm grid report` draws (all optional)
    metric = "plt"                # page-load time; or goodput, utilization, loss_ratio, html_ms
    baseline = "tcp"              # percent difference of each other arm against this one
    rows = "rate"
    columns = "size"
    alpha = 0.01                  # the paper's threshold
    correction = "holm"           # over every cell of the grid
    timelines = [{rate = 100, size = "10MB"}]   # cwnd and state over time (Fig. 9)
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from quicsm.errors import TestbedError, reading
from quicsm.formats import checked
from quicsm.formats import described as _d
from quicsm.testbed.matrix import (
    KEY_ALIASES,
    ScenarioKeys,
    config_from_mapping,
    parse_value,
    scenario_keys,
)
from quicsm.testbed.runner import RunConfig

__all__ = [
    "ORDERS",
    "Arm",
    "Axis",
    "Cell",
    "Grid",
    "GridFile",
    "PlannedRun",
    "ReportSpec",
    "grid_from_data",
    "load_grid",
    "value_text",
]

ORDERS = ("rounds", "cells")
AxisValue = bool | int | float | str
_SLUG = re.compile(r"[^A-Za-z0-9.%+-]+")
_NOT_AXES = {"labels", "name", "seed", "set", "patch_set"}
"""Scenario keys that make no sense as an axis (every value would be another experiment's identity)."""


class ReportSpec(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """``[report]``: what ``quicsm grid report`` computes and draws (its options override these)."""

    metric: Annotated[
        str,
        _d("Per-run measure compared in each cell: plt (page-load time), html_ms, goodput, utilization, loss_ratio."),
    ] = "plt"
    baseline: Annotated[str | UnsetType, _d("The arm the others are compared against (default: the first).")] = UNSET
    versus: Annotated[list[str] | UnsetType, _d("Arms compared against the baseline (default: every other).")] = UNSET
    rows: Annotated[str | UnsetType, _d("Axis down the heatmap (default: the first axis).")] = UNSET
    columns: Annotated[str | UnsetType, _d("Axis across the heatmap (default: the second axis).")] = UNSET
    alpha: Annotated[float, msgspec.Meta(gt=0, lt=1, description="Significance level (the paper's 0.01).")] = 0.01
    correction: Annotated[
        Literal["holm", "bonferroni", "bh", "none"],
        _d("Multiple-testing correction over every cell and arm of the grid (none: the paper's rule)."),
    ] = "holm"
    timelines: Annotated[
        list[dict[str, AxisValue]], _d("Cells (axis = value) to draw cwnd and state over time for (Fig. 9).")
    ] = msgspec.field(default_factory=list)
    states: Annotated[bool, _d("Compare the arms' state machines in every cell.")] = True


class GridFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A grid file (``quicsm grid run FILE``)."""

    name: Annotated[str | UnsetType, _d("The grid's name (default: the file name).")] = UNSET
    description: Annotated[str, _d("What the grid reproduces or asks.")] = ""
    out: Annotated[str | UnsetType, _d("Output directory (the CLI's --out wins).")] = UNSET
    runs: Annotated[int, msgspec.Meta(ge=1, description="Runs of every arm in every cell.")] = 10
    order: Annotated[
        Literal["rounds", "cells"],
        _d("rounds: round k of every cell before round k+1 (a stopped grid has every cell); cells: cell by cell."),
    ] = "rounds"
    retries: Annotated[
        int, msgspec.Meta(ge=0, description="Redo a failed or emulator-late run this often (the CLI's wins).")
    ] = 4
    base: Annotated[ScenarioKeys, _d("Scenario keys every run takes.")] = msgspec.field(default_factory=ScenarioKeys)
    axes: Annotated[dict[str, list[AxisValue]], _d("Scenario key -> its values; the cells are every combination.")] = (
        msgspec.field(default_factory=dict)
    )
    arms: Annotated[dict[str, ScenarioKeys], _d("Name -> scenario keys: the protocols compared in every cell.")]
    report: ReportSpec = msgspec.field(default_factory=ReportSpec)


def value_text(v: AxisValue) -> str:
    """An axis value as written (``10``, ``5KB``, ``true``)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


@dataclass(frozen=True, slots=True)
class Axis:
    name: str
    """As written in the file (``rate``)."""
    key: str
    """The scenario key it sets (``rate_mbps``)."""
    values: tuple[AxisValue, ...]


@dataclass(frozen=True, slots=True)
class Cell:
    """One combination of axis values."""

    values: tuple[tuple[str, AxisValue], ...]
    """(axis name, value) in the grid's axis order."""

    @property
    def id(self) -> str:
        """``rate=10,size=5KB`` (``all`` for a grid without axes)."""
        return ",".join(f"{a}={value_text(v)}" for a, v in self.values) or "all"

    @property
    def dirname(self) -> str:
        """``rate-10_size-5KB``: the cell's directory under the grid's output."""
        return "_".join(f"{a}-{_SLUG.sub('_', value_text(v))}" for a, v in self.values) or "all"

    @property
    def slug(self) -> str:
        """``loss-1pct_rate-10``: the cell's name in a report's files, links and anchors (``%`` spelled out:
        a ``%`` in a URL starts an escape, so a report page or a Markdown link naming ``1%_r`` breaks)."""
        return self.dirname.replace("%", "pct")

    def get(self, axis: str) -> AxisValue:
        return dict(self.values)[axis]

    def matches(self, where: Mapping[str, Any]) -> bool:
        """Whether the cell has every ``axis = value`` of ``where`` (values compared as written)."""
        have = {a: value_text(v) for a, v in self.values}
        return all(have.get(a) == value_text(v) for a, v in where.items())


@dataclass(frozen=True, slots=True)
class Arm:
    name: str
    keys: Mapping[str, Any]
    """Canonical scenario keys (aliases resolved)."""


@dataclass(frozen=True, slots=True)
class PlannedRun:
    """One run of the grid: where it goes and what it runs."""

    cell: Cell
    arm: str
    round: int
    config: RunConfig
    rel_dir: str
    """``<cell dir>/<arm>-NN`` under the grid's output."""

    @property
    def fingerprint(self) -> str:
        """What the run measures (every parameter of its configuration): a run made with another is not this one."""
        return _fingerprint(self.config)


_UNSET_LATER = ("outage",)
"""RunConfig fields added after grids were run, left out of the fingerprint while unset: a grid's runs made
before a field existed stay the grid's."""


def _fingerprint(cfg: RunConfig) -> str:
    fields = asdict(cfg)
    for name in _UNSET_LATER:
        if fields.get(name) is None:
            fields.pop(name, None)
    data = json.dumps(fields, sort_keys=True, default=str)
    return hashlib.sha256(data.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Grid:
    """A grid file, checked and expanded: every (cell, arm) configuration is valid."""

    name: str
    description: str
    path: Path | None
    data: Mapping[str, Any]
    """The file's tables as read (kept in the output's grid.json, so the report needs no file)."""
    out: Path | None
    runs: int
    order: str
    retries: int
    base: Mapping[str, Any]
    axes: tuple[Axis, ...]
    arms: tuple[Arm, ...]
    report: ReportSpec
    configs: Mapping[tuple[str, str], RunConfig] = field(repr=False, default_factory=dict)
    """(cell id, arm) -> the run configuration of round 0."""

    @property
    def arm_names(self) -> list[str]:
        return [a.name for a in self.arms]

    def cells(self) -> list[Cell]:
        """Every combination of axis values, the first axis varying slowest."""
        names = [a.name for a in self.axes]
        return [Cell(tuple(zip(names, combo))) for combo in itertools.product(*(a.values for a in self.axes))]

    def axis(self, name: str) -> Axis:
        for a in self.axes:
            if a.name == name or a.key == KEY_ALIASES.get(name, name):
                return a
        raise TestbedError(
            f"grid {self.name}: no axis {name!r} (axes: {', '.join(a.name for a in self.axes) or 'none'})"
        )

    def plan(self) -> list[PlannedRun]:
        """Every run in the order it is made."""
        cells = self.cells()
        if self.order == "rounds":
            order: Iterator[tuple[int, Cell]] = ((r, c) for r in range(self.runs) for c in cells)
        else:
            order = ((r, c) for c in cells for r in range(self.runs))
        return [
            PlannedRun(c, a.name, r, self.configs[(c.id, a.name)], f"{c.dirname}/{a.name}-{r:02d}")
            for r, c in order
            for a in self.arms
        ]

    def timeline_cells(self) -> list[Cell]:
        """The cells ``[report] timelines`` names (each must name one cell or more)."""
        out: list[Cell] = []
        for where in self.report.timelines:
            for name in where:
                self.axis(name)
            found = [c for c in self.cells() if c.matches(where)]
            if not found:
                what = ", ".join(f"{k} = {value_text(v)}" for k, v in where.items())
                raise TestbedError(f"grid {self.name}: [report] timelines: no cell has {what}")
            out += [c for c in found if c not in out]
        return out


def grid_from_data(data: Mapping[str, Any], *, path: Path | None = None, name: str | None = None) -> Grid:
    """A grid from a file's tables (``path`` names it in errors); every run configuration is checked."""
    where = f"{path}" if path is not None else f"grid {name or ''}"
    if not isinstance(data.get("arms"), dict) or not data["arms"]:
        raise TestbedError(f"{where}: needs at least one arm ([arms.NAME] with scenario keys)")
    base = scenario_keys(data.get("base", {}), where=f"{where}: [base]")  # the scenario keys' wording first
    arms = []
    for arm_name, keys in data["arms"].items():
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", arm_name):
            raise TestbedError(f"{where}: arm {arm_name!r}: use letters, digits and _ . + - (it names directories)")
        arms.append(Arm(arm_name, scenario_keys(keys, where=f"{where}: [arms.{arm_name}]")))
    spec = checked(dict(data), GridFile, where, error=TestbedError)
    grid_name = spec.name if isinstance(spec.name, str) else (name or (path.stem if path else "grid"))
    axes: list[Axis] = []
    for axis_name, values in spec.axes.items():
        key = KEY_ALIASES.get(axis_name, axis_name)
        scenario_keys({axis_name: values[0]} if values else {}, where=f"{where}: [axes]")  # a key scenarios take
        if key in _NOT_AXES or key == "labels":
            raise TestbedError(
                f"{where}: [axes] {axis_name}: not an axis (one value for the whole grid: put it in [base])"
            )
        if not values:
            raise TestbedError(f"{where}: [axes] {axis_name}: give at least one value")
        texts = [value_text(v) for v in values]
        if len(set(texts)) != len(texts):
            raise TestbedError(f"{where}: [axes] {axis_name}: a value is listed twice")
        for v in values:
            scenario_keys({axis_name: v}, where=f"{where}: [axes] {axis_name}")
            try:
                parse_value(key, v)
            except (TestbedError, TypeError, ValueError) as exc:
                raise TestbedError(f"{where}: [axes] {axis_name}: {exc}") from None
        if key in base:
            raise TestbedError(f"{where}: {axis_name} is an axis and also in [base]: remove it from [base]")
        for arm in arms:
            if key in arm.keys:
                raise TestbedError(f"{where}: {axis_name} is an axis and also set by [arms.{arm.name}]")
        if any(a.key == key for a in axes):
            raise TestbedError(f"{where}: [axes] {axis_name}: the same key as another axis")
        axes.append(Axis(axis_name, key, tuple(values)))
    grid = Grid(
        name=grid_name,
        description=spec.description,
        path=path,
        data=dict(data),
        out=Path(spec.out) if isinstance(spec.out, str) else None,
        runs=spec.runs,
        order=spec.order,
        retries=spec.retries,
        base=base,
        axes=tuple(axes),
        arms=tuple(arms),
        report=spec.report,
    )
    if len({c.dirname for c in grid.cells()}) != len(grid.cells()):
        raise TestbedError(f"{where}: two cells would share a directory (axis values that differ only in punctuation)")
    configs: dict[tuple[str, str], RunConfig] = {}
    for cell in grid.cells():
        cell_keys = {KEY_ALIASES.get(a, a): v for a, v in cell.values}
        for arm in arms:
            labels = {**dict(base.get("labels", {})), **dict(arm.keys.get("labels", {}))}
            labels.update({"grid": grid_name, "cell": cell.id, "arm": arm.name})
            labels.update({a: value_text(v) for a, v in cell.values})
            keys = {**base, **arm.keys, **cell_keys, "name": arm.name, "labels": labels}
            cfg, _ = config_from_mapping(keys, where=f"{where}: cell {cell.id}, arm {arm.name}")
            configs[(cell.id, arm.name)] = cfg
    _check_report(grid, where)
    return replace(grid, configs=configs)


def _check_report(grid: Grid, where: str) -> None:
    """The report section names arms and axes the grid has, and a metric quicsm knows."""
    from quicsm.grids.metrics import METRICS

    r = grid.report
    if r.metric not in METRICS:
        raise TestbedError(f"{where}: [report] metric {r.metric!r}: choose one of {', '.join(METRICS)}")
    names = grid.arm_names
    for arm in ([r.baseline] if isinstance(r.baseline, str) else []) + (r.versus if isinstance(r.versus, list) else []):
        if arm not in names:
            raise TestbedError(f"{where}: [report] names arm {arm!r}; the grid's arms are {', '.join(names)}")
    try:
        for ax in (r.rows, r.columns):
            if isinstance(ax, str):
                grid.axis(ax)
        grid.timeline_cells()
    except TestbedError as exc:
        raise TestbedError(f"{where}: {str(exc).removeprefix(f'grid {grid.name}: ')}") from None


def load_grid(path: Path | str) -> Grid:
    """Read and check a grid file (one-line errors naming the file, the table and the key)."""
    p = Path(path)
    with reading(str(p)):
        text = p.read_bytes()
    return grid_from_data(checked(text, dict[str, Any], str(p), what="TOML", error=TestbedError), path=p)
