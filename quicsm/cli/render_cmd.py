"""``quicsm render``: model JSON -> DOT/SVG/PNG/PDF state diagram in the IMC'17 figures' style.

:func:`diagram_options` and :func:`dot_options_from` are shared with ``quicsm diagram`` so both verbs
spell and document the drawing options once.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from quicsm.cli.options import output_option
from quicsm.diagrams import (
    FORMATS,
    RANKDIRS,
    DotOptions,
    output_format,
    render_side_by_side,
    write_diagram,
    write_picture,
)
from quicsm.inference.annotate import load_model

__all__ = ["render", "diagram_options", "dot_options_from", "check_stdout"]

F = Callable[..., Any]


def diagram_options(f: F) -> F:
    """``--format``, ``--min-prob``, ``--title``, ``--no-terminals``, ``--no-legend``, ``--rankdir``."""
    decorators = [
        click.option(
            "--format",
            "fmt",
            type=click.Choice(FORMATS, case_sensitive=False),
            help="Output format; default: from the -o suffix (.svg .png .pdf .dot), DOT on stdout.",
        ),
        click.option(
            "--min-prob",
            type=click.FloatRange(0.0, 1.0),
            default=0.0,
            metavar="P",
            help="Hide edges whose probability is below P (their states stay).",
        ),
        click.option("--title", help="Title above the diagram."),
        click.option(
            "--no-terminals", is_flag=True, help="Leave out the synthetic start (dot) and end (double circle) nodes."
        ),
        click.option(
            "--no-legend", is_flag=True, help="Leave out the legend (colours, connections, total time, engine)."
        ),
        click.option(
            "--rankdir",
            type=click.Choice(RANKDIRS, case_sensitive=False),
            default="TB",
            help="Layout direction: TB top to bottom, LR left to right, ...",
        ),
    ]
    for d in reversed(decorators):
        f = d(f)
    return f


def dot_options_from(kw: dict[str, Any]) -> DotOptions:
    """Pop :func:`diagram_options`' values (all but ``fmt``) from ``kw`` into :class:`DotOptions`."""
    return DotOptions(
        min_prob=kw.pop("min_prob"),
        terminals=not kw.pop("no_terminals"),
        legend=not kw.pop("no_legend"),
        rankdir=kw.pop("rankdir").upper(),
        title=kw.pop("title"),
    )


def check_stdout(output: str, fmt: str) -> None:
    """Refuse to print a binary picture to a terminal."""
    if output == "-" and fmt in ("png", "pdf") and sys.stdout.isatty():
        raise click.UsageError(f"will not write {fmt.upper()} to a terminal; give -o FILE.{fmt} or redirect stdout")


@click.command()
@click.argument("models", nargs=-1, required=True, type=click.Path(allow_dash=True, dir_okay=False))
@output_option("Picture file (.svg .png .pdf .dot), - for stdout.", dir_okay=False)
@diagram_options
def render(models: tuple[str, ...], output: str, fmt: str | None, **kw: Any) -> None:
    """Draw a model (from `quicsm infer`, docs/model-format.md) as a state diagram.

    States show their share of time in red, edges their probability in black, as in the IMC'17
    paper's figures; colours mark state families. MODEL may be - for stdin. Several MODELS are drawn
    side by side with equal states aligned (the paper's Fig. 13), each titled by its file name.
    Needs Graphviz's `dot` for SVG/PNG/PDF (apt-get install graphviz); DOT output does not.

    \b
    Examples:
      quicsm render model.json -o model.svg
      quicsm render model.json -o model.png --min-prob 0.05 --title "quic-go cubic, 50 Mbit/s"
      quicsm render desktop.json mobile.json -o fig13.pdf
      quicsm infer traces.jsonl --engine dfg | quicsm render - --format svg > model.svg
    """
    options = dot_options_from(kw)
    fmt = output_format(output, fmt)
    check_stdout(output, fmt)
    if models.count("-") > 1:
        raise click.UsageError("only one MODEL can be read from stdin")
    loaded = [(_title_of(path), load_model(path)) for path in models]
    if len(loaded) == 1:
        am = loaded[0][1]
        write_diagram(am, output, fmt, options)
        what = f"{len(am.nodes)} nodes, {len(am.edges)} edges"
    else:
        write_picture(render_side_by_side(loaded, options), output, fmt)
        what = f"{len(loaded)} models side by side"
    if output != "-":
        click.echo(f"wrote {fmt.upper()} diagram of {what} to {output}", err=True)


def _title_of(path: str) -> str:
    if path == "-":
        return "stdin"
    name = Path(path).name
    for suffix in (".gz", ".json"):
        name = name.removesuffix(suffix)
    return name
