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
from quicsm.fleet.malloc import keep_freed_memory
from quicsm.textsafe import terminal
from quicsm.version import __version__

__all__ = ["cli", "failure", "main", "COMMANDS", "UsageFailure"]

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    # quicsm does no linear algebra worth threads; NumPy's OpenBLAS would otherwise start a thread per
    # core at import (0.07 s of every command's start-up, and CPU spinning in Dask workers too)
    os.environ.setdefault(_var, "1")


keep_freed_memory()  # glibc: a batch's freed arrays are reused, not returned to the kernel

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

    def invoke(self, ctx: click.Context) -> Any:
        from quicsm.files import guard_inputs

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


def main() -> None:
    # Registered first, so it runs after every other exit handler: the interpreter's last collection
    # would walk every object the imports made (NumPy, Arrow, click: 0.02-0.03 s of a short command)
    # to find nothing; outputs are closed explicitly, and __del__ at exit is not promised anyway.
    atexit.register(gc.freeze)
    cli(prog_name="quicsm")
