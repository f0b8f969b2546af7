"""``quicsm compare``: two or more trace sets -> statistics, model differences, diagrams, report."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from quicsm.cli.options import dask_option, dask_workers, output_option, selector, storage_option
from quicsm.compare import CompareOptions, build_sets
from quicsm.compare import compare as run_compare
from quicsm.compare.sets import TraceSet
from quicsm.compare.stats import CORRECTIONS, EDGE_TESTS, SAMPLE_TESTS
from quicsm.errors import InputError
from quicsm.files import write_output
from quicsm.inference import ENGINES
from quicsm.textsafe import terminal
from quicsm.traces.events import StateView
from quicsm.traces.report import ParseReport

__all__ = ["compare"]


def _echo_skipped(sets: list[TraceSet]) -> None:
    """Problem records and files skipped while reading each input, as the other verbs report them."""
    by_report: dict[int, tuple[ParseReport, list[str]]] = {}
    for s in sets:
        report = s.report
        if report is not None and (report.total_issues or report.skipped_files):
            by_report.setdefault(id(report), (report, []))[1].append(s.name)
    for report, names in by_report.values():  # sets split from one dataset (--vs, --by) share a report
        click.echo(f"warning: reading the input(s) of set(s) {terminal(', '.join(names))}:", err=True)
        for line in report.summary().splitlines()[1:]:  # the problems, not the "read N files" line
            click.echo(f"  {line}", err=True)


def _pair_path(path: str, k: int, a: str, b: str, many: bool) -> str:
    if not many:
        return path
    stem, ext = os.path.splitext(path)
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in f"{b}-vs-{a}")
    return f"{stem}.{k + 1}.{safe}{ext}"


@click.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(allow_dash=True))
@click.option("--name", "names", multiple=True, metavar="NAME", help="Name of each set, in order (repeatable).")
@click.option(
    "--where",
    multiple=True,
    callback=selector,
    metavar="K=V[,K=V]",
    help="With --vs: selects the first set from the dataset. Otherwise: keeps only matching traces in every set.",
)
@click.option(
    "--vs",
    multiple=True,
    callback=selector,
    metavar="K=V[,K=V]",
    help="Another set selected from the same dataset (repeatable for N-way).",
)
@click.option("--by", metavar="LABEL", help="One set per value of LABEL (or cc, implementation, version).")
@click.option("--order", metavar="V1,V2,...", help="Order of the --by sets; the first is the baseline.")
@click.option(
    "--test",
    type=click.Choice(list(SAMPLE_TESTS)),
    default="welch",
    help="Per-state test on per-connection shares: Welch's t-test (the paper's) or Mann-Whitney U.",
)
@click.option("--alpha", type=float, default=0.01, help="Significance threshold after correction.")
@click.option(
    "--correction",
    type=click.Choice(list(CORRECTIONS)),
    default="holm",
    help="Multiple-comparison correction across states (and, separately, across edges).",
)
@click.option(
    "--edge-test",
    type=click.Choice(list(EDGE_TESTS)),
    default="cluster",
    help="Per-edge test: cluster (connections as units; calibrated), z or chi2 (every step independent).",
)
@click.option(
    "--bootstrap",
    "resamples",
    type=click.IntRange(0, 100_000),
    default=2000,
    help="Bootstrap resamples for the CI of each mean.",
)
@click.option("--confidence", type=float, default=0.95, help="Level of the bootstrap CI.")
@click.option("--seed", type=int, default=0, help="Seed of the bootstrap (results are deterministic).")
@click.option(
    "--engine",
    default="synoptic",
    type=click.Choice(sorted(ENGINES)),
    help="Engine of the per-set models (model differences, diagrams): synoptic (as `diagram`), ktails, dfg.",
)
@click.option(
    "-k",
    "k",
    type=click.IntRange(1, 50),
    help="k of k-Tails as in Synoptic (k=1: same state). Defaults: synoptic coarsening 1, ktails 2.",
)
@click.option("--phases/--no-phases", default=True, help="Keep PROBE_BW phases as separate states.")
@click.option("--recovery-states", is_flag=True, help="Make BBR's recovery sub-state part of the state.")
@click.option("--all-pairs", is_flag=True, help="N-way: test every pair instead of every set against the first.")
@click.option(
    "--witnesses",
    type=click.IntRange(0, 50),
    default=3,
    help="Shortest sequences shown per direction that one model accepts and the other rejects.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "csv", "markdown"]),
    default="text",
    help="Tables on the terminal, JSON for scripts (docs/compare.md), CSV or Markdown.",
)
@output_option("Where --format goes.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False), help="Self-contained HTML report.")
@click.option(
    "--diagram",
    "diagram_path",
    type=click.Path(dir_okay=False),
    help="Side-by-side diagram of all sets (Fig. 13 style); .svg, .pdf, .png or .dot.",
)
@click.option(
    "--diff-diagram",
    "diff_path",
    type=click.Path(dir_okay=False),
    help="Merged diff diagram (one file per pair when N > 2); .svg, .pdf, .png or .dot.",
)
@click.option("--heatmap", "heatmap_path", type=click.Path(dir_okay=False), help="Occupancy heatmap across sets (SVG).")
@click.option(
    "--timelines",
    type=click.IntRange(0, 50),
    default=3,
    help="cwnd/bytes-in-flight timelines per set in the HTML report.",
)
@click.option(
    "--strict", is_flag=True, help="Stop at the first malformed record (FILE:LINE: reason) instead of skipping it."
)
@click.option("-q", "--quiet", is_flag=True, help="No warnings or summaries on stderr.")
@click.option("--progress/--no-progress", default=None, help="Progress on stderr (default: when stderr is a terminal).")
@storage_option
@dask_option
def compare(
    inputs: tuple[str, ...],
    names: tuple[str, ...],
    where: list[dict[str, str]],
    vs: list[dict[str, str]],
    by: str | None,
    order: str | None,
    fmt: str,
    output: str,
    html_path: str | None,
    diagram_path: str | None,
    diff_path: str | None,
    heatmap_path: str | None,
    timelines: int,
    quiet: bool,
    strict: bool,
    phases: bool,
    recovery_states: bool,
    dask: str | None,
    progress: bool | None,
    storage_options: dict[str, str],
    **kw: Any,
) -> None:
    """Compare the state machines of two or more trace sets, with statistics.

    Each INPUT is one set (a log, qlog or trace file, a quoted glob, or a directory), or, with
    --where/--vs or --by, all INPUTS form one dataset split by labels.

    \b
    Examples:
      quicsm compare traces/fig13/desktop traces/fig13/mobile --html report.html
      quicsm compare 'runs/v0.33/*.log' 'runs/v0.65/*.log' --format json
      quicsm compare all.parquet --where client=desktop --vs client=mobile
      quicsm compare all.parquet --by version --heatmap versions.svg
      quicsm compare runs/table4/quicgo-tcp1-* --html fairness.html   (multi-flow runs: a set per flow, fairness first)
    """
    from pathlib import Path

    from quicsm.compare.fairness import FlowComparison, compare_flow_runs, fairness_output, is_flow_run
    from quicsm.compare.report import WRITERS

    for path in (diagram_path, diff_path):
        if path:
            from quicsm.diagrams.render import output_format

            output_format(path)  # a bad suffix fails now, before anything is computed or written
    view = StateView(phases=phases, recovery=recovery_states)
    options = CompareOptions(view=view, timelines=timelines if html_path else 0, **kw)
    fc: FlowComparison | None = None
    if all(is_flow_run(Path(p)) for p in inputs):  # quicsm.testbed.flows runs: one set per flow name
        if names or where or vs or by:
            raise InputError(
                "multi-flow run directories: the sets are the flows; --name/--where/--vs/--by do not apply"
            )
        fc = compare_flow_runs(inputs, options, strict=strict)
        sets = fc.sets
        if fc.comparison is None:  # a single flow name: the fairness view alone
            write_output(output, fairness_output(fc, fmt))
            if html_path:
                from quicsm.compare.fairness import flows_report_html

                write_output(html_path, flows_report_html(fc, timelines=timelines or 3))
            return
        result = fc.comparison
    else:
        if len(inputs) > 2 and not names and not (vs or by) and all(os.path.isdir(p) for p in inputs):
            # Most likely an unquoted glob the shell expanded: say what was made of it.
            click.echo(
                f"note: {len(inputs)} sets, one per directory ({', '.join(inputs[:3])}, ...); to compare groups of runs, "
                "quote the globs (compare 'runs/a-*' 'runs/b-*') or give --name for each set",
                err=True,
            )
        with dask_workers(dask):  # the workers are not needed for the analysis
            sets = build_sets(
                inputs,
                names=names,
                where=where,
                vs=vs,
                by=by,
                order=order.split(",") if order else None,
                view=view,
                metrics=options.timelines > 0,
                dask=dask,
                strict=strict,
                progress=sys.stderr.isatty() and not os.environ.get("CI") if progress is None else progress,
                storage_options=storage_options or None,
            )
            if not quiet:
                _echo_skipped(sets)
        result = run_compare(sets, options)
    if not quiet and (fmt != "text" or output != "-"):
        for w in result.warnings:
            click.echo(f"warning: {terminal(w)}", err=True)
    # everything is made before anything is written: a drawing Graphviz refuses leaves no report behind
    files: list[tuple[str, str | bytes]] = [(output, fairness_output(fc, fmt) if fc else WRITERS[fmt](result))]
    if html_path:
        from quicsm.compare.html import to_html

        if fc:
            from quicsm.compare.fairness import flows_report_html

            files.append((html_path, flows_report_html(fc, timelines=timelines or 3)))
        else:
            files.append((html_path, to_html(result)))
    if diagram_path or diff_path:
        from quicsm.compare.figures import diff_dot, side_by_side_dot
        from quicsm.diagrams.render import picture_bytes

        if diagram_path:
            files.append((diagram_path, picture_bytes(side_by_side_dot(result), diagram_path)))
        if diff_path:
            many = len(result.pairs) > 1
            for k, p in enumerate(result.pairs):
                pair_path = _pair_path(diff_path, k, p.a, p.b, many)
                files.append((pair_path, picture_bytes(diff_dot(result, p), pair_path)))
    if heatmap_path:
        from quicsm.compare.html import heatmap

        files.append((heatmap_path, heatmap(result)))
    for path, data in files:
        write_output(path, data)
    if not quiet:
        written = [p for p in (html_path, diagram_path, diff_path, heatmap_path) if p]
        if output != "-":
            written.insert(0, output)
        if written:
            click.echo(
                terminal(
                    f"compared {len(sets)} sets ({', '.join(f'{s.name}: {len(s)}' for s in sets)}); "
                    f"wrote {', '.join(written)}"
                ),
                err=True,
            )
