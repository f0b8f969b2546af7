"""``quicsm parse``: inputs -> normalized traces."""

from __future__ import annotations

import json
from typing import Any

import click

from quicsm.cli.dask_options import dask_option, load_dask_inputs
from quicsm.cli.options import input_options, load_inputs
from quicsm.traces import write_traces


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
    result = load_dask_inputs(kw, dask) if dask else load_inputs(kw)
    n = write_traces(result.traces, output)
    if report_path:
        from quicsm.traces.store import atomic_output

        with atomic_output(report_path, binary=False) as fh:
            json.dump(result.report.to_json(), fh, indent=2)
    if output != "-":
        click.echo(f"wrote {n} trace(s) to {output}", err=True)
