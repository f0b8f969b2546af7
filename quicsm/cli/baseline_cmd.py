"""``quicsm baseline save|show``: keep a known-good version's connections as a small bundle for ``quicsm check``."""

from __future__ import annotations

import click

from quicsm.cli.options import selector

__all__ = ["baseline"]


@click.group()
def baseline() -> None:
    """Baselines for `quicsm check`: per-connection stays, models and labels of known-good runs, no raw logs.

    \b
      quicsm baseline save runs/v0.52.0 -o base.qsb              # one scenario
      quicsm baseline save 'runs/*' --by scenario -o base.qsb    # a testbed matrix, one set per scenario
      quicsm baseline show base.qsb
    """


@baseline.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(allow_dash=True))
@click.option(
    "-o", "--output", required=True, type=click.Path(dir_okay=False, allow_dash=True), help="Bundle to write (.qsb)."
)
@click.option(
    "--by", metavar="LABEL", help="One set per value of LABEL (the testbed's 'scenario'); check matches new runs by it."
)
@click.option("--where", callback=selector, metavar="K=V[,K=V]", help="Keep only matching connections.")
@click.option("--name", help="Name of the set (without --by; default: the first input's last path part).")
@click.option(
    "--engine",
    type=click.Choice(["dfg", "synoptic", "ktails"]),
    default="dfg",
    help="Model engine; new runs are modelled the same way.",
)
@click.option("--no-phases", is_flag=True, help="Fold PROBE_BW phases into one state (kept for the check).")
@click.option("--recovery-states", is_flag=True, help="Keep BBR recovery sub-states (kept for the check).")
def save(
    inputs: tuple[str, ...],
    output: str,
    by: str | None,
    where: dict[str, str] | None,
    name: str | None,
    engine: str,
    no_phases: bool,
    recovery_states: bool,
) -> None:
    """Save the connections of INPUTS (logs, trace files, quoted globs, directories) as a baseline bundle."""
    from quicsm.check.bundle import save_baseline
    from quicsm.check.inputs import baseline_from_inputs
    from quicsm.textsafe import terminal
    from quicsm.traces.events import StateView

    view = StateView(phases=not no_phases, recovery=recovery_states)
    b, _ = baseline_from_inputs(inputs, by=by, where=where, name=name, engine=engine, view=view)
    size = save_baseline(b, output)
    sets = ", ".join(f"{s.name} ({len(s.rows)})" for s in b.sets)
    click.echo(
        terminal(f"{output}: {b.connections} connection(s) in {len(b.sets)} set(s): {sets}; {size:,} bytes"), err=True
    )


@baseline.command()
@click.argument("bundle", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def show(bundle: str, as_json: bool) -> None:
    """Print what a baseline bundle holds: tool, view, sets, connections, states and models."""
    from quicsm.check.bundle import load_baseline
    from quicsm.check.show import summary, summary_text

    b = load_baseline(bundle)
    if as_json:
        import json

        click.echo(json.dumps(summary(b), indent=2))
    else:
        click.echo(summary_text(b), nl=False)
