"""``quicsm parse``: inputs -> normalized traces (JSON Lines or a Parquet store)."""

from __future__ import annotations

from functools import partial
from typing import Any

import click

from quicsm.cli.options import (
    dask_option,
    dask_workers,
    echo_parse_summary,
    input_options,
    load_inputs,
    output_option,
    pop_inputs,
    pop_parse_options,
    report_option,
    write_report,
)
from quicsm.traces.inputs import AUTO


@click.command()
@input_options
@partial(dask_option, default=AUTO)  # the library's (write_store, quicsm.parse)
@output_option("Traces file: .jsonl, .jsonl.gz or .parquet; - for JSON Lines on stdout.")
@report_option
def parse(output: str, **kw: Any) -> None:
    """Parse logs (any prefix, .gz, - for stdin) and qlogs into per-connection traces.

    --dask auto reads in workers only for a .parquet output: JSON Lines traces are written in one process.

    \b
    Example:
      quicsm parse server1.log server2.log.gz --label client=mobile -o mobile.parquet
    """
    dask, quiet = kw.pop("dask"), kw["quiet"]
    if output.lower().endswith(".parquet"):  # columns straight into the store, streamed
        from quicsm.traces.parse import Overrides, write_store

        parse_kw, quiet, where = pop_parse_options(kw)
        strict, progress, options = parse_kw.pop("strict"), parse_kw.pop("progress"), parse_kw.pop("storage_options")
        over = Overrides(parse_kw.pop("labels"), **parse_kw)
        paths = pop_inputs(kw)
        with dask_workers(dask):
            n, report, tally = write_store(
                paths,
                output,
                over,
                strict=strict,
                where=where or None,
                dask=dask,
                progress=progress,
                storage_options=options,
            )
        echo_parse_summary(report, tally.ccs, quiet)
        write_report(kw.pop("report_path"), report)
    else:
        from quicsm.traces.store import write_traces

        n = write_traces(load_inputs(kw, dask).traces, output)
    if output != "-" and not quiet:
        click.echo(f"wrote {n} trace(s) to {output}", err=True)
