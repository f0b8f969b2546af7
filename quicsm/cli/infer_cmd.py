"""``quicsm infer``: traces (or logs, qlogs) -> annotated model."""

from __future__ import annotations

import sys
from typing import Any

import click

from quicsm.cli.options import learn_model, model_options, output_option
from quicsm.files import write_output
from quicsm.inference.annotate import AnnotatedModel, save_model
from quicsm.textsafe import terminal


def model_table(am: AnnotatedModel) -> str:
    """Plain-text view of a model: states with time shares, then edges with probabilities (names escaped)."""
    names = {
        n.id: terminal(n.state) + (f"#{n.id}" if sum(1 for m in am.nodes if m.state == n.state) > 1 else "")
        for n in am.nodes
    }
    width = max(len(v) for v in names.values())
    out = [
        f"{am.model.engine} model of {am.traces} trace(s), {am.events} events, {am.total_time_us / 1e6:.3f} s in states",
        "",
    ]
    out.append(f"{'state':<{width}}  {'visits':>8}  {'time share':>10}  {'mean stay':>12}")
    for n in sorted(am.nodes, key=lambda n: -n.time_fraction):
        if n.kind != "state":
            continue
        out.append(
            f"{names[n.id]:<{width}}  {n.visits:>8}  {n.time_fraction:>10.1%}  {n.mean_dwell_us / 1000:>9.2f} ms"
        )
    out += ["", f"{'from':<{width}}  {'to':<{width}}  {'count':>8}  {'prob':>6}"]
    for e in am.edges:
        out.append(f"{names[e.src]:<{width}}  {names[e.dst]:<{width}}  {e.count:>8}  {e.probability:>6.3f}")
    return "\n".join(out)


def write_model(am: AnnotatedModel, path: str, fmt: str) -> None:
    if fmt == "json":
        save_model(am, path)
        return
    if fmt == "graphml":
        from quicsm.inference.graphs import write_graphml  # networkx only when asked for

        write_graphml(am, path)
        return
    write_output(path, model_table(am) + "\n")


@click.command()
@model_options
@output_option("Model file, - for stdout.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "graphml", "text"]),
    help="json (docs/model-format.md), graphml, or a text table; default: graphml for *.graphml, "
    "json for other files, text on a terminal.",
)
def infer(output: str, fmt: str | None, **kw: Any) -> None:
    """Infer the congestion controller's state machine and annotate it.

    INPUTS are trace files from `quicsm parse`, or logs/qlogs directly.

    \b
    Example:
      quicsm infer traces.parquet --engine synoptic -o model.json
    """
    quiet = kw["quiet"]
    engine, am = learn_model(kw)
    if fmt is None and output.endswith(".graphml"):
        fmt = "graphml"
    if fmt is None:
        fmt = "text" if output == "-" and sys.stdout.isatty() else "json"
    write_model(am, output, fmt)
    if output != "-" and not quiet:
        click.echo(f"wrote {engine} model ({len(am.nodes)} nodes, {len(am.edges)} edges) to {output}", err=True)
