"""Options shared by several verbs, so each is spelled and documented once."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from quicsm.inference import ENGINES
from quicsm.traces.events import StateView
from quicsm.traces.parse import ParseResult, parse_inputs, parse_label

if TYPE_CHECKING:
    from quicsm.traces.summary import Summary

__all__ = [
    "close_dask",
    "dask_option",
    "echo_parse_summary",
    "engine_options",
    "engine_opts",
    "input_options",
    "load_inputs",
    "load_summary",
    "pop_parse_options",
    "view_from",
    "view_options",
]

F = Callable[..., Any]


def _labels(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    try:
        return dict(parse_label(v) for v in values)
    except Exception as exc:
        raise click.BadParameter(str(exc)) from None


def input_options(f: F) -> F:
    """Inputs and their metadata: labels, implementation, version, strictness, progress."""
    decorators = [
        click.argument("inputs", nargs=-1, required=True, type=click.Path(allow_dash=True)),
        click.option(
            "--label",
            "labels",
            multiple=True,
            callback=_labels,
            metavar="KEY=VALUE",
            help="Free label for every trace (repeatable), e.g. --label client=mobile.",
        ),
        click.option(
            "--implementation",
            metavar="NAME",
            help="QUIC stack that wrote the inputs (chromium, quiche, quic-go, ...).",
        ),
        click.option("--impl-version", metavar="VERSION", help="Its version (e.g. QUIC 37, v0.65.0, a commit)."),
        click.option("--cc", metavar="NAME", help="Congestion controller, for qlogs that do not name it."),
        click.option(
            "--where",
            "where",
            multiple=True,
            callback=_labels,
            metavar="KEY=VALUE",
            help="Keep only traces with this label (or cc=, implementation=, version=).",
        ),
        click.option("--strict", is_flag=True, help="Fail on the first malformed record instead of counting it."),
        click.option(
            "--progress/--no-progress", default=None, help="Progress bar (default: when stderr is a terminal)."
        ),
        click.option("-q", "--quiet", is_flag=True, help="No summary on stderr."),
    ]
    for d in reversed(decorators):
        f = d(f)
    return f


def pop_parse_options(kw: dict[str, Any]) -> tuple[dict[str, Any], bool, dict[str, str] | None]:
    """The options of :func:`input_options`, popped from ``kw``: (parse keywords, quiet, --where)."""
    progress = kw.pop("progress")
    if progress is None:
        progress = sys.stderr.isatty() and not os.environ.get("CI")
    quiet = kw.pop("quiet")
    where = kw.pop("where")
    parse_kw = {
        "labels": kw.pop("labels"),
        "implementation": kw.pop("implementation"),
        "version": kw.pop("impl_version"),
        "cc": kw.pop("cc"),
        "strict": kw.pop("strict"),
        "progress": bool(progress),
    }
    return parse_kw, quiet, where


def echo_parse_summary(summary: str, ccs: set[str], quiet: bool) -> None:
    """The parse report on stderr, and a warning when the traces mix congestion controllers."""
    if quiet:
        return
    click.echo(summary, err=True)
    if len(ccs) > 1:
        click.echo(
            f"warning: traces mix congestion controllers ({', '.join(sorted(ccs))}); use --where cc=NAME to pick one",
            err=True,
        )


def load_inputs(kw: dict[str, Any], dask: str | None = None) -> ParseResult:
    """The parse stage (:func:`quicsm.parse`) with the options of :func:`input_options` (popped from ``kw``)."""
    parse_kw, quiet, where = pop_parse_options(kw)
    result = parse_inputs(list(kw.pop("inputs")), where=where or None, dask=dask, **parse_kw)
    close_dask(dask)
    echo_parse_summary(result.report.summary(), {t.cc for t in result.traces}, quiet)
    return result


def load_summary(kw: dict[str, Any], view: StateView) -> Summary:
    """The inputs folded into one summary (:func:`quicsm.summarize`), with :func:`input_options` and ``--dask``."""
    from quicsm.traces.summary import summarize

    parse_kw, quiet, where = pop_parse_options(kw)
    dask = kw.pop("dask", None)
    summary = summarize(list(kw.pop("inputs")), view=view, where=where or None, dask=dask, **parse_kw)
    close_dask(dask)
    echo_parse_summary(summary.report.summary(), set(summary.ccs), quiet)
    return summary


def close_dask(dask: str | None) -> None:
    """Shut down a LocalCluster as soon as the files are read (it holds worker processes)."""
    if dask:
        from quicsm.fleet.cluster import close_clients

        close_clients()


def dask_option(f: F) -> F:
    return click.option(
        "--dask",
        "dask",
        metavar="SCHEDULER",
        help="Read batches of input files as Dask tasks: local[:N] starts N local workers, or a scheduler "
        "address such as tcp://host:8786 (needs quicsm[fleet]). Results equal the local run.",
    )(f)


def view_options(f: F) -> F:
    f = click.option(
        "--recovery-states",
        is_flag=True,
        help="Make BBR's recovery sub-state part of the state (ProbeBw/Conservation).",
    )(f)
    f = click.option(
        "--phases/--no-phases",
        default=True,
        show_default=True,
        help="Keep PROBE_BW phases (Up/Down/Cruise/Refill) as separate states.",
    )(f)
    return f


def view_from(kw: dict[str, Any]) -> StateView:
    return StateView(phases=kw.pop("phases"), recovery=kw.pop("recovery_states"))


def engine_options(f: F) -> F:
    f = click.option(
        "--synoptic-jar",
        type=click.Path(dir_okay=False),
        envvar="QUICSM_SYNOPTIC_JAR",
        help="Original Synoptic jar for --engine synoptic-jar (or $QUICSM_SYNOPTIC_JAR).",
    )(f)
    f = click.option(
        "--refine",
        type=click.Choice(["stitch", "consistent"]),
        default=None,
        help="Refinement of --engine synoptic: stitch (Synoptic's split selection, default) or consistent "
        "(split by invariant-automaton state: faster, further from Synoptic's models). See docs/inference.md.",
    )(f)
    f = click.option(
        "--synoptic-seed",
        type=int,
        default=None,
        help="Synoptic's --randomSeed for --engine synoptic-jar (default 1; recorded in the model).",
    )(f)
    f = click.option(
        "--java",
        "java",
        default=None,
        help="Java runtime for --engine synoptic-jar (default: java on PATH; Synoptic's HEAD needs Java < 17).",
    )(f)
    f = click.option(
        "--java-option",
        "java_options",
        multiple=True,
        help="JVM option for --engine synoptic-jar, before -jar (repeatable), e.g. --java-option=-Xmx8g.",
    )(f)
    f = click.option(
        "--timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        help="Seconds --engine synoptic-jar may run before it is stopped (default 3600).",
    )(f)
    f = click.option(
        "-k",
        "k",
        type=click.IntRange(1, 50),
        default=None,
        help="k of k-Tails, as in Synoptic: the length of the k-strings compared, the node itself included "
        "(k=1: same state; k=2: same state and same next states). Defaults: synoptic coarsening 1, ktails 2.",
    )(f)
    f = click.option(
        "--engine", default="synoptic", show_default=True, type=click.Choice(sorted(ENGINES)), help="Inference engine."
    )(f)
    return f


def engine_opts(kw: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    engine = kw.pop("engine")
    opts: dict[str, Any] = {}
    k = kw.pop("k")
    jar = kw.pop("synoptic_jar")
    seed = kw.pop("synoptic_seed")
    java = kw.pop("java")
    java_options = list(kw.pop("java_options"))
    timeout = kw.pop("timeout")
    refine = kw.pop("refine")
    if k is not None:
        opts["k"] = k
    if refine is not None:
        if engine != "synoptic":
            raise click.UsageError("--refine applies to --engine synoptic only")
        opts["refine"] = refine
    if engine == "synoptic-jar":
        for key, value in (("synoptic_jar", jar), ("seed", seed), ("java", java), ("timeout", timeout)):
            if value is not None:
                opts[key] = value
        if java_options:
            opts["java_options"] = java_options
        from quicsm.inference.synoptic_jar import check_runtime

        check_runtime(jar, java or "java")  # before any input is read
    elif seed is not None or java is not None or java_options or timeout is not None:
        raise click.UsageError(
            "--synoptic-seed, --java, --java-option and --timeout apply to --engine synoptic-jar only"
        )
    return engine, opts
