"""``quicsm parse``: inputs -> normalized traces."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

from quicsm.cli.dask_options import close_dask, dask_option, load_dask_inputs
from quicsm.cli.options import echo_parse_summary, input_options, load_inputs, no_trace_matches, pop_parse_options
from quicsm.fleet.sources import is_url
from quicsm.traces import write_traces
from quicsm.traces.events import Trace

if TYPE_CHECKING:
    from quicsm.traces.columnar import TraceColumns
    from quicsm.traces.parquet import StoreBatch
    from quicsm.traces.report import ParseReport


@click.command()
@input_options
@dask_option
@click.option(
    "-o",
    "--output",
    default="-",
    show_default=True,
    type=click.Path(allow_dash=True),
    help="Traces file: .jsonl, .jsonl.gz or .parquet; - for JSON Lines on stdout.",
)
@click.option("--report", "report_path", type=click.Path(dir_okay=False), help="Also write the parse report as JSON.")
def parse(output: str, report_path: str | None, **kw: Any) -> None:
    """Parse logs (any prefix, .gz, - for stdin) and qlogs into per-connection traces.

    \b
    Example:
      quicsm parse server1.log server2.log.gz --label client=mobile -o mobile.parquet
    """
    dask = kw.pop("dask")
    urls = any(is_url(p) for p in kw["inputs"])  # read file by file as on Dask workers, here
    if output.lower().endswith(".parquet"):
        n, report = _parse_to_parquet(kw, output, dask, urls)
    else:
        result = load_dask_inputs(kw, dask) if dask or urls else load_inputs(kw)
        n = write_traces(result.traces, output)
        report = result.report
    if report_path:
        from quicsm.traces.store import atomic_output

        with atomic_output(report_path, binary=False) as fh:
            json.dump(report.to_json(), fh, indent=2)
    if output != "-":
        click.echo(f"wrote {n} trace(s) to {output}", err=True)


def _parse_to_parquet(kw: dict[str, Any], output: str, dask: str | None, urls: bool) -> tuple[int, ParseReport]:
    """Logs straight into the Parquet store as column batches, streamed: no object per event, memory
    bounded by one batch and the open connections. Same traces and order as the object path. With
    ``dask``, each file's row groups are built on a worker and written here in input order."""
    from quicsm.traces.parquet import write_parquet
    from quicsm.traces.parse import iter_trace_batches, no_transitions, progress_bar
    from quicsm.traces.report import ParseReport
    from quicsm.traces.select import Kept, keep_traces

    parse_kw, quiet, where = pop_parse_options(kw)
    paths = list(kw.pop("inputs"))
    report = ParseReport(strict=parse_kw.pop("strict"))
    progress = parse_kw.pop("progress")
    tally = Kept()

    def stream(on_bytes: Any) -> Iterator[Trace | TraceColumns | StoreBatch]:
        if dask or urls:
            from quicsm.fleet.run import store_files

            yield from store_files(
                paths,
                dask=dask,
                report=report,
                tally=tally,
                where=where,
                strict=report.strict,
                progress=progress,
                **parse_kw,
            )
        else:
            items = iter_trace_batches(paths, report=report, on_bytes=on_bytes, **parse_kw)
            yield from keep_traces(items, where, tally)
        if not tally.transitions:  # raised inside the writer: the output file is not made
            raise no_transitions(paths, report)
        if where and not tally.kept:
            raise no_trace_matches(where)

    if dask:
        n = write_parquet(stream(None), output)
        close_dask()
    else:
        with progress_bar(paths, progress) as on_bytes:
            n = write_parquet(stream(on_bytes), output)
    echo_parse_summary(report.summary(), tally.ccs, quiet)
    return n, report
