"""``quicsm parse``: inputs -> normalized traces (JSON Lines or a Parquet store)."""

from __future__ import annotations

import json
from typing import Any

import click

from quicsm.cli.options import (
    close_dask,
    dask_option,
    echo_parse_summary,
    input_options,
    load_inputs,
    pop_parse_options,
)


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
    if output.lower().endswith(".parquet"):  # columns straight into the store, streamed
        from quicsm.traces.parse import Overrides, write_store

        parse_kw, quiet, where = pop_parse_options(kw)
        strict, progress = parse_kw.pop("strict"), parse_kw.pop("progress")
        over = Overrides(parse_kw.pop("labels"), **parse_kw)
        n, report, tally = write_store(
            list(kw.pop("inputs")), output, over, strict=strict, where=where or None, dask=dask, progress=progress
        )
        close_dask(dask)
        echo_parse_summary(report.summary(), tally.ccs, quiet)
    else:
        from quicsm.traces.store import write_traces

        result = load_inputs(kw, dask)
        n = write_traces(result.traces, output)
        report = result.report
    if report_path:
        from quicsm.files import atomic_output

        with atomic_output(report_path, binary=False) as fh:
            json.dump(report.to_json(), fh, indent=2)
    if output != "-":
        click.echo(f"wrote {n} trace(s) to {output}", err=True)
