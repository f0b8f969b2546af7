"""``quicsm diagram``: logs/qlogs/traces -> annotated state diagram, in one go."""

from __future__ import annotations

from typing import Any

import click

from quicsm.cli.options import learn_model, model_options, output_option
from quicsm.cli.render_cmd import check_stdout, diagram_options, dot_options_from
from quicsm.diagrams import output_format, write_diagram
from quicsm.inference.annotate import save_model


@click.command()
@model_options
@diagram_options
@output_option("Picture file (.svg .png .pdf .dot), - for stdout.", "diagram.svg", dir_okay=False)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Also write the annotated model JSON here.")
def diagram(output: str, json_path: str | None, fmt: str | None, **kw: Any) -> None:
    """Parse, infer and draw: the controller's state diagram with time shares and edge probabilities.

    INPUTS are instrumented server logs (any log prefix, .gz), qlogs (.qlog/.sqlog), trace files from
    `quicsm parse`, or directories holding them.

    \b
    Examples:
      quicsm diagram server.log -o cubic.svg
      quicsm diagram runs/ --label client=mobile --engine synoptic --json model.json -o mobile.pdf
      quicsm diagram traces.parquet --engine dfg --no-phases --min-prob 0.02 -o bbr2.png
    """
    options = dot_options_from(kw)
    fmt = output_format(output, fmt)
    check_stdout(output, fmt)
    quiet = kw["quiet"]
    engine, am = learn_model(kw)
    write_diagram(am, output, fmt, options)  # drawn first: a drawing Graphviz refuses leaves no --json behind
    if json_path:
        save_model(am, json_path)
    if output != "-" and not quiet:
        click.echo(
            f"wrote {fmt.upper()} state diagram ({engine}: {len(am.nodes)} nodes, {len(am.edges)} edges, "
            f"{am.traces} connections) to {output}",
            err=True,
        )
