"""``quicsm grid``: run a grid of testbed scenarios (IMC'17's evaluation method) and report it as heatmaps."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from quicsm.errors import TestbedError

__all__ = ["grid"]

INCOMPLETE = 3
"""Exit status of ``grid run`` when it stopped at its time budget with runs left (run it again to go on)."""


@click.group()
def grid() -> None:
    """Grids of testbed runs and the IMC'17 paper's heatmaps of them.

    \b
    A grid file names axes (rate, rtt, loss, size, objects, cpu_quota, zero_rtt, ...) and the arms compared
    in every cell (e.g. QUIC vs TCP); see quicsm.grids.spec or quicsm/schemas/grid.schema.json.
      sudo quicsm grid run experiments/imc17_fig6a.toml --for 20m   # resumable; run again to go on
      quicsm grid report runs/imc17_fig6a -o report/               # heatmaps, states, HTML
    """


def _event_line(ev: Any) -> str | None:
    from quicsm.testbed.buildtools import format_duration

    if ev.status == "done":
        return None
    res = ev.result
    m = (res.plt_ms and f"PLT {res.plt_ms:.0f} ms") or "-"
    state = "ok" if res.good else f"BAD ({res.reason()})"
    again = f" [redone {len(res.redone)}x]" if res.redone else ""
    eta = f", ~{format_duration(ev.eta_s)} left" if ev.eta_s is not None else ""
    from quicsm.textsafe import terminal

    return terminal(
        f"[{ev.position:>{len(str(ev.total))}}/{ev.total}] {ev.planned.cell.id} {ev.planned.arm} "
        f"#{ev.planned.round:02d}: {state}, {m}{again} ({format_duration(ev.elapsed_s)}{eta})"
    )


@grid.command("run")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--out", type=click.Path(file_okay=False), help="Output directory (default: the file's `out`).")
@click.option(
    "--for",
    "budget",
    metavar="DURATION",
    help="Start no run after this long (20m, 1h); exit 3 with runs left, and the next call goes on from there.",
)
@click.option("--retries", type=int, help="Redo a failed or emulator-late run this often (default: the file's, 4).")
@click.option("--redo-bad", is_flag=True, help="Try again the runs still bad after their retries.")
@click.option("--late-limit", metavar="MS", help="Emulator-late threshold (default 2ms, as testbed run).")
@click.option("--dry-run", is_flag=True, help="Check the file, list cells, arms and what is done; run nothing.")
@click.option("--report", "report_dir", type=click.Path(file_okay=False), help="Then write the report here.")
def run_cmd(
    file: str,
    out: str | None,
    budget: str | None,
    retries: int | None,
    redo_bad: bool,
    late_limit: str | None,
    dry_run: bool,
    report_dir: str | None,
) -> None:
    """Make every run of a grid file through the emulator (needs root), resuming where it stopped.

    Each run is OUT/<cell>/<arm>-NN (server.log, meta.json); a failed or emulator-late run is redone and
    its bad attempts kept in OUT/_rejected. Exit 0 when every run is made, 3 when --for stopped it early.
    """
    from quicsm.grids.execute import run_grid, run_state
    from quicsm.grids.spec import load_grid
    from quicsm.testbed.config import parse_duration, parse_late_limit

    g = load_grid(file)
    target = Path(out) if out else g.out
    if target is None:
        raise TestbedError(f"{file}: no `out` in the file and no --out given")
    plan = g.plan()
    click.echo(
        f"grid {g.name}: {len(g.cells())} cell(s) x {len(g.arms)} arm(s) x {g.runs} run(s) = {len(plan)} runs "
        f"-> {target}",
        err=True,
    )
    for a in g.axes:
        click.echo(f"  axis {a.name}: {', '.join(str(v) for v in a.values)}", err=True)
    for arm in g.arms:
        c = g.configs[(g.cells()[0].id, arm.name)]
        extra = [f"{c.http_version}"] + (["0-RTT"] if c.zero_rtt else []) + ([f"client {c.client}"])
        click.echo(f"  arm {arm.name}: {c.stack} {c.version} {c.cc}, {', '.join(extra)}", err=True)
    if dry_run:
        states = [run_state(p, target) for p in plan] if target.exists() else []
        done = sum(s.status == "good" for s in states)
        bad = sum(s.status == "bad" for s in states)
        click.echo(f"{done} good, {bad} bad, {len(plan) - done - bad} to do", err=True)
        return
    from quicsm.cli.testbed_cmd import sigterm_as_interrupt
    from quicsm.testbed.system import require_root

    require_root("quicsm grid run")
    sigterm_as_interrupt()
    budget_s = parse_duration(budget) if budget else None
    limit = parse_late_limit(late_limit) if late_limit else None

    def on_event(ev: Any) -> None:
        line = _event_line(ev)
        if line:
            click.echo(line, err=True)

    def build(cfg: Any) -> Any:
        from quicsm.cli.testbed_cmd import build_with_progress

        return build_with_progress(cfg)

    try:
        summary = run_grid(
            g,
            target,
            retries=retries,
            budget_s=budget_s,
            redo_bad=redo_bad,
            late_limit_ms=limit,
            build=build,
            on_event=on_event,
        )
    except KeyboardInterrupt:
        click.echo("interrupted; the run in progress was cleaned up; run the same command again to continue", err=True)
        raise SystemExit(130) from None
    click.echo("\n".join(summary.lines()), err=True)
    if report_dir and summary.complete:
        _report(str(target), report_dir)
    if not summary.complete:
        raise SystemExit(INCOMPLETE)


def _report(out: str, report_dir: str, **kw: Any) -> None:
    from quicsm.grids.report import write_report
    from quicsm.grids.results import compare_grid, load_grid_runs

    runs = load_grid_runs(out)
    comp = compare_grid(
        runs,
        metric_name=kw.get("metric"),
        baseline=kw.get("baseline"),
        versus=kw.get("versus") or None,
        alpha=kw.get("alpha"),
        correction=kw.get("correction"),
    )
    from quicsm.grids.spec import Cell

    timelines: list[Cell] | None = [] if kw.get("no_timelines") else None
    if kw.get("timelines"):
        cells: list[Cell] = []
        for spec in kw["timelines"]:
            where = dict(part.split("=", 1) for part in spec.split(",") if "=" in part)
            found = [c for c in runs.grid.cells() if c.matches(where)]
            if not found:
                raise click.BadParameter(f"no cell has {spec}", param_hint="--timeline")
            cells += [c for c in found if c not in cells]
        timelines = cells

    def say(line: str) -> None:
        if sys.stderr.isatty():
            click.echo(f"  {line}", err=True)

    rep = write_report(
        runs,
        Path(report_dir),
        comp,
        rows=kw.get("rows"),
        columns=kw.get("columns"),
        states=kw.get("states"),
        diagrams=kw.get("diagrams", True),
        timelines=timelines,
        progress=say,
    )
    sig = sum(c.significant for c in comp.cells)
    click.echo(
        f"{len(runs.grid.cells())} cell(s), {sig}/{len(comp.cells)} significant ({comp.correction}, alpha {comp.alpha:g}); "
        f"{len(rep.files)} file(s) in {report_dir}; open {Path(report_dir) / 'report.html'}",
        err=True,
    )


@grid.command("report")
@click.argument("out", type=click.Path(file_okay=False, exists=True))
@click.option("-o", "--output", "report_dir", required=True, type=click.Path(file_okay=False), help="Report directory.")
@click.option("--metric", help="plt, html_ms, goodput, utilization or loss_ratio (default: the file's [report]).")
@click.option("--baseline", help="Arm the others are compared against (default: the file's, else the first).")
@click.option("--versus", multiple=True, help="Arm compared against the baseline (repeatable; default: every other).")
@click.option("--alpha", type=float, help="Significance level (default: the file's, else 0.01 as the paper).")
@click.option(
    "--correction", type=click.Choice(["holm", "bonferroni", "bh", "none"]), help="Over every cell of the grid."
)
@click.option("--rows", help="Axis down the heatmap.")
@click.option("--columns", help="Axis across the heatmap.")
@click.option(
    "--timeline",
    "timelines",
    multiple=True,
    metavar="AXIS=VALUE[,...]",
    help="Cell(s) to draw cwnd and state over time for (repeatable; default: the file's [report] timelines).",
)
@click.option("--no-timelines", is_flag=True, help="Draw no cwnd timelines (whatever the file's [report] says).")
@click.option("--states/--no-states", default=None, help="Compare the arms' state machines in every cell.")
@click.option("--diagrams/--no-diagrams", default=True, help="Per-cell model diagrams in the state comparisons.")
def report_cmd(out: str, report_dir: str, **kw: Any) -> None:
    """Heatmaps (SVG, PNG), per-cell numbers, state-machine comparisons and cwnd timelines of a grid's runs.

    OUT is a `quicsm grid run` output (its grid.json); a grid stopped early is reported with what it has.
    """
    _report(out, report_dir, **kw)
