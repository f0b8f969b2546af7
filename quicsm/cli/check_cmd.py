"""``quicsm check BASELINE NEW...``: the CI gate. Exit 0 same behaviour, 1 changed, 2 bad input."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

import click

from quicsm.cli.main import failure
from quicsm.cli.options import output_option, selector
from quicsm.errors import QuicsmError, as_quicsm_error
from quicsm.files import write_output
from quicsm.textsafe import terminal

__all__ = ["check", "check_runs", "run_check"]

BAD_INPUT = 2


class BadInput(click.ClickException):
    """A QuicsmError (bad baseline, config or runs) as exit status 2, so CI can tell it from a change."""

    exit_code = BAD_INPUT


def run_check(
    baseline: str,
    inputs: tuple[str, ...],
    *,
    config: str | None = None,
    where: dict[str, str] | None = None,
    fmt: str = "text",
    output: str = "-",
    files: dict[str, str | None] | None = None,
) -> int:
    """Check, write every requested output, return the exit status (shared with ``testbed matrix --check``)."""
    from quicsm.check.inputs import check_runs
    from quicsm.check.report import WRITERS

    files = files or {}
    result = check_runs(baseline, inputs, config=config, where=where, models=bool(files.get("html")))
    for kind, path in files.items():
        if not path:
            continue
        if kind == "html":
            from quicsm.check.html import to_html

            write_output(path, to_html(result))
        else:
            write_output(path, WRITERS[kind](result))
    text = WRITERS[fmt](result)
    if output == "-":
        click.echo(text, nl=False)
    else:
        write_output(output, text)
    return result.exit_code


def preflight(baseline: str, config: str | None) -> None:
    """Read the baseline and config (exit 2 if bad) before a matrix spends minutes on runs."""
    from quicsm.check import load_baseline, load_config

    try:
        load_config(config)
        load_baseline(baseline)
    except QuicsmError as exc:
        raise BadInput(terminal(str(exc))) from exc


def check_runs(baseline: str, inputs: list[str], config: str | None, out: Path) -> None:
    """``testbed matrix --check``: check a matrix's new runs, reports beside them, exit with the verdict."""
    files: dict[str, str | None] = {
        k: str(out / f"check.{ext}")
        for k, ext in (("json", "json"), ("junit", "xml"), ("markdown", "md"), ("html", "html"))
    }
    try:
        code = run_check(baseline, tuple(inputs), config=config, output=str(out / "check.txt"), files=files)
    except QuicsmError as exc:
        raise BadInput(terminal(str(exc))) from exc
    click.echo((out / "check.txt").read_text(), nl=False)
    click.echo(f"check reports: {out}/check.{{txt,json,xml,md,html}}", err=True)
    sys.exit(code)


@click.command()
@click.argument("baseline", type=click.Path(dir_okay=False, allow_dash=True))
@click.argument("inputs", nargs=-1, required=True, type=click.Path(allow_dash=True))
@click.option(
    "--config", type=click.Path(dir_okay=False), help="Tolerances (TOML): ignore, min_effect, alpha per state/edge."
)
@click.option("--where", callback=selector, metavar="K=V[,K=V]", help="Check only matching new connections.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "junit", "markdown"]), default="text")
@output_option("Where --format goes.", dir_okay=False)
@click.option("--json", "json_file", type=click.Path(dir_okay=False), help="Also write the JSON report here.")
@click.option(
    "--junit",
    "junit_file",
    type=click.Path(dir_okay=False),
    help="Also write JUnit XML here (a test case per state and edge).",
)
@click.option(
    "--markdown", "md_file", type=click.Path(dir_okay=False), help="Also write a Markdown summary (for a PR) here."
)
@click.option(
    "--html",
    "html_file",
    type=click.Path(dir_okay=False),
    help="Also write the HTML report with the diff diagram here.",
)
def check(
    baseline: str,
    inputs: tuple[str, ...],
    config: str | None,
    where: dict[str, str] | None,
    fmt: str,
    output: str,
    json_file: str | None,
    junit_file: str | None,
    md_file: str | None,
    html_file: str | None,
) -> None:
    """Check new runs (INPUTS: logs, trace files, quoted globs, directories, .qsb) against BASELINE (.qsb).

    \b
    Exit status: 0 the controller behaves the same, 1 it changed, 2 bad input (baseline, config, runs).
      quicsm check base.qsb runs/new --junit check.xml --markdown summary.md --html check.html
    """
    files = {"json": json_file, "junit": junit_file, "markdown": md_file, "html": html_file}
    try:
        code = run_check(baseline, inputs, config=config, where=where, fmt=fmt, output=output, files=files)
    except Exception as exc:  # exit 2 for bad input, and for a bug: it must not look like "changed" (1) to CI
        err = as_quicsm_error(exc, readers=False)
        if err is None:
            traceback.print_exc()
            raise BadInput(terminal(f"internal error ({type(exc).__name__}: {exc}); please report it")) from exc
        raise BadInput(failure(err).message) from exc
    sys.exit(code)
