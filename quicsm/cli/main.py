"""Top-level ``quicsm`` group. Verbs live in their own modules and are imported only when used."""

from __future__ import annotations

import atexit
import gc
import importlib
import importlib.util
import os
from typing import Any

import click

from quicsm.errors import OptionError, QuicsmError, TestbedError, as_quicsm_error
from quicsm.textsafe import terminal
from quicsm.version import __version__

__all__ = ["cli", "failure", "main", "COMMANDS", "SUMMARIES", "UsageFailure"]

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    # quicsm does no linear algebra worth threads; NumPy's OpenBLAS would otherwise start a thread per
    # core at import (0.07 s of every command's start-up, and CPU spinning in Dask workers too)
    os.environ.setdefault(_var, "1")

COMMANDS: dict[str, str] = {
    "parse": "quicsm.cli.parse_cmd:parse",
    "infer": "quicsm.cli.infer_cmd:infer",
    "render": "quicsm.cli.render_cmd:render",
    "diagram": "quicsm.cli.diagram_cmd:diagram",
    "export": "quicsm.cli.export_cmd:export",
    "patch": "quicsm.cli.patch_cmd:patch",
    "testbed": "quicsm.cli.testbed_cmd:testbed",
    "grid": "quicsm.cli.grid_cmd:grid",
    "compare": "quicsm.cli.compare_cmd:compare",
    "baseline": "quicsm.cli.baseline_cmd:baseline",
    "check": "quicsm.cli.check_cmd:check",
}
"""Verb -> ``module:attribute`` of its click command."""

SUMMARIES: dict[str, str] = {
    "baseline": "Baselines for `quicsm check`: per-connection stays, models and labels of known-good runs, no raw logs.",
    "check": "Check new runs (INPUTS: logs, trace files, quoted globs, directories, .qsb) against BASELINE (.qsb).",
    "compare": "Compare the state machines of two or more trace sets, with statistics.",
    "diagram": "Parse, infer and draw: the controller's state diagram with time shares and edge probabilities.",
    "export": "Write the traces' state sequences for the original Synoptic and print how to run it.",
    "grid": "Grids of testbed runs and the IMC'17 paper's heatmaps of them.",
    "infer": "Infer the congestion controller's state machine and annotate it.",
    "parse": "Parse logs (any prefix, .gz, - for stdin) and qlogs into per-connection traces.",
    "patch": "Instrument congestion-control senders with the log lines quicsm reads.",
    "render": "Draw a model (from `quicsm infer`, docs/model-format.md) as a state diagram.",
    "testbed": "Run instrumented quic-go or Cloudflare quiche servers through an emulated network (needs root).",
}
"""Verb -> the first sentence of its help, listed by ``quicsm --help`` without importing the verb (a verb's
module imports its part of the library: all of them took 0.1-0.2 s); tests/cli hold it to the commands'."""


class LazyGroup(click.Group):
    """Imports a verb's module on first use, so ``quicsm --help`` stays fast and verbs stay independent."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(n for n, t in COMMANDS.items() if importlib.util.find_spec(t.partition(":")[0]))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, _, attr = target.partition(":")
        cmd = getattr(importlib.import_module(module), attr)
        assert isinstance(cmd, click.Command)
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's own listing (same widths, same shortening), from :data:`SUMMARIES`.

        The shortening goes through ``Command.get_short_help_str``: click 8.5 deprecates
        ``click.utils.make_default_short_help``.
        """
        names = self.list_commands(ctx)
        if names:
            limit = formatter.width - 6 - max(map(len, names))
            with formatter.section("Commands"):
                formatter.write_dl([(n, click.Command(n, help=SUMMARIES[n]).get_short_help_str(limit)) for n in names])

    def invoke(self, ctx: click.Context) -> Any:
        from quicsm.files import guard_inputs
        from quicsm.fleet.malloc import keep_freed_memory

        keep_freed_memory()  # glibc: a batch's freed arrays are reused, not returned to the kernel
        try:
            with guard_inputs():  # no output of the command may replace one of its inputs
                return super().invoke(ctx)
        except Exception as exc:  # click would print a bare "Aborted!" for an EOFError
            err = as_quicsm_error(exc, readers=False)
            if err is None:
                raise
            raise failure(err) from exc


class UsageFailure(click.ClickException):
    """An :class:`~quicsm.errors.OptionError`: exit 2, as click's own usage errors."""

    exit_code = 2


def failure(err: QuicsmError) -> click.ClickException:
    """The one line (names from inputs shown escaped; a build's output keeps its lines) and exit status of
    a quicsm error: 2 for an unknown engine, option or value, else 1."""
    text = terminal(str(err), lines=isinstance(err, TestbedError))
    return UsageFailure(text) if isinstance(err, OptionError) else click.ClickException(text)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.version_option(__version__, prog_name="quicsm")
def cli() -> None:
    """Instrument QUIC congestion controllers, infer their state machines, explain performance.

    \b
    Typical use:
      quicsm diagram server.log -o cubic.svg      # logs -> annotated state diagram
      quicsm parse logs/*.log.gz -o traces.jsonl  # logs -> normalized traces
      quicsm infer traces.jsonl -o model.json     # traces -> model
      quicsm render model.json -o model.pdf       # model -> picture
    """
    if _paused_gc:  # the verb's module is imported (click runs this between the two): its objects stay
        _paused_gc.clear()
        gc.freeze()
        gc.enable()


_paused_gc: list[bool] = []
"""Not empty while :func:`main` holds the collector off during start-up."""


def main() -> None:
    # Registered first, so it runs after every other exit handler: the interpreter's last collection
    # would walk every object the imports made (NumPy, Arrow, click: 0.02-0.03 s of a short command)
    # to find nothing; outputs are closed explicitly, and __del__ at exit is not promised anyway.
    atexit.register(gc.freeze)
    # Importing the verb's modules makes only objects that live for the whole run: collections during it
    # (about 50) walk them to find nothing. cli() freezes them and collects as usual from there on.
    if gc.isenabled():
        gc.disable()
        _paused_gc.append(True)
    cli(prog_name="quicsm")
