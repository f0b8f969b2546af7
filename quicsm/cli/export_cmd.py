"""``quicsm export``: traces (or logs, qlogs) -> input for other tools (the original Synoptic)."""

from __future__ import annotations

import shlex
from typing import Any

import click

from quicsm.cli.options import input_options, load_inputs, output_option, view_from, view_options
from quicsm.files import atomic_output
from quicsm.inference.export import EXPORT_FORMATS, dump_synoptic_log, model_prefix, synoptic_command_line


@click.command()
@input_options
@view_options
@click.option("--to", "target", type=click.Choice(EXPORT_FORMATS), default="synoptic", help="Tool to export for.")
@output_option("Log file for the tool; - for stdout.")
def export(target: str, output: str, **kw: Any) -> None:
    """Write the traces' state sequences for the original Synoptic and print how to run it.

    One line per state visit, '<trace> <state>'; the printed command gives Synoptic the matching
    -r (event regex) and -m (trace mapping) and writes its model to PREFIX.dot, which
    `quicsm infer --engine synoptic-jar` reads for you when you have the jar.

    \b
    Example:
      quicsm export traces.parquet --to synoptic -o cubic.log
    """
    parsed = load_inputs(kw)
    view = view_from(kw)
    sequences = [t.states(view) for t in parsed.traces]
    with atomic_output(output, binary=False) as fh:
        lines = dump_synoptic_log(sequences, fh)
    path = output if output != "-" else "LOGFILE"
    command = shlex.join(synoptic_command_line(path, model_prefix(path)))
    if output != "-":
        click.echo(f"wrote {lines} event(s) of {len(sequences)} trace(s) to {output}", err=True)
    click.echo(f"run Synoptic on it with:\n  {command}", err=True)
