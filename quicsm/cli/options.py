"""Options shared by several verbs, so each is spelled and documented once."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

import click

from quicsm.textsafe import terminal
from quicsm.traces.events import StateView
from quicsm.traces.inputs import AUTO, OFF
from quicsm.traces.parse import ParseResult, parse_inputs, parse_label
from quicsm.traces.report import ParseReport
from quicsm.traces.select import parse_selector

if TYPE_CHECKING:
    from quicsm.inference.annotate import AnnotatedModel
    from quicsm.traces.summary import Summary

__all__ = [
    "dask_workers",
    "dask_option",
    "echo_parse_summary",
    "ENGINE_FLAGS",
    "engine_options",
    "engine_opts",
    "input_options",
    "learn_model",
    "load_inputs",
    "load_summary",
    "model_options",
    "output_option",
    "pop_inputs",
    "parsed_by",
    "pop_parse_options",
    "report_option",
    "selector",
    "storage_option",
    "write_report",
    "view_from",
    "view_options",
]

F = Callable[..., Any]


def parsed_by(parse: Callable[[str], Any], collect: Callable[[Iterator[Any]], Any] = list) -> Callable[..., Any]:
    """A click callback putting the option's value (each value of a repeatable one, ``collect``-ed) through
    ``parse``; what ``parse`` refuses is a usage error naming the option."""

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        try:
            if isinstance(value, tuple):
                return collect(parse(v) for v in value)
            return None if value is None else parse(value)
        except Exception as exc:
            raise click.BadParameter(str(exc)) from None

    return callback


_labels = parsed_by(parse_label, dict)
selector = parsed_by(parse_selector)
"""``--where K=V[,K=V]`` as a selector (repeatable: a list of them)."""


def input_options(f: F) -> F:
    """Inputs and their metadata: labels, implementation, version, strictness, progress."""
    decorators = [
        click.argument("inputs", nargs=-1, required=False, type=click.Path(allow_dash=True)),
        click.option(
            "--files-from",
            metavar="LIST",
            help="Also read the inputs named in LIST, one a line (- for stdin), e.g. from find or aws s3 ls.",
        ),
        storage_option,
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
            "--states",
            type=click.Choice(["auto", "logged", "metrics"]),
            default="auto",
            show_default=True,
            help="qlog states: auto = logged ones, inferred from the metrics when a file logs none; "
            "logged = only logged ones; metrics = always inferred from the metrics (see docs/metric-states.md).",
        ),
        click.option(
            "--where",
            multiple=True,
            callback=_labels,
            metavar="KEY=VALUE",
            help="Keep only traces with this label (or cc=, implementation=, version=).",
        ),
        click.option("--strict", is_flag=True, help="Fail on the first malformed record instead of counting it."),
        click.option(
            "--progress/--no-progress", default=None, help="Progress bar (default: when stderr is a terminal)."
        ),
        click.option(
            "-q",
            "--quiet",
            is_flag=True,
            help="No summary on stderr, not even the line naming the output (problem files are still named).",
        ),
    ]
    for d in reversed(decorators):
        f = d(f)
    return f


storage_option = click.option(
    "--storage-option",
    "storage_options",
    multiple=True,
    callback=_labels,
    metavar="KEY=VALUE",
    help="fsspec option for URL inputs (repeatable), e.g. endpoint_url=http://127.0.0.1:9000; Dask workers get it too.",
)


def output_option(help: str, default: str = "-", *, dir_okay: bool = True) -> Callable[[F], F]:
    """``-o/--output`` (``-``: stdout)."""
    path = click.Path(allow_dash=True, dir_okay=dir_okay)
    return click.option("-o", "--output", default=default, type=path, help=help)


def pop_inputs(kw: dict[str, Any]) -> list[str]:
    """The INPUTS arguments and the ones ``--files-from`` names, popped from ``kw``."""
    from quicsm.traces.inputs import read_file_list

    inputs = list(kw.pop("inputs"))
    listed = kw.pop("files_from", None)
    if listed:
        inputs += read_file_list(listed)
    if not inputs:
        raise click.UsageError("give input files (or --files-from LIST)")
    return inputs


def pop_parse_options(kw: dict[str, Any]) -> tuple[dict[str, Any], bool, dict[str, str] | None]:
    """The options of :func:`input_options` but the inputs, popped from ``kw``: (parse keywords, quiet, --where)."""
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
        "states": kw.pop("states"),
        "strict": kw.pop("strict"),
        "progress": bool(progress),
        "storage_options": kw.pop("storage_options") or None,
    }
    return parse_kw, quiet, where


def echo_parse_summary(report: ParseReport, ccs: set[str], quiet: bool) -> None:
    """The parse report on stderr, and a warning when the traces mix congestion controllers. With
    ``quiet``, only the problems: files skipped and problem records, named with file and line."""
    lines = report.summary().splitlines()
    if quiet:
        for line in lines[1:]:
            click.echo(line, err=True)
        return
    click.echo("\n".join(lines), err=True)
    if len(ccs) > 1:
        click.echo(
            f"warning: traces mix congestion controllers ({terminal(', '.join(sorted(ccs)))}); "
            "use --where cc=NAME to pick one",
            err=True,
        )


def load_inputs(kw: dict[str, Any], dask: str | None = None) -> ParseResult:
    """The parse stage (:func:`quicsm.parse`) with the options of :func:`input_options` (popped from ``kw``)."""
    parse_kw, quiet, where = pop_parse_options(kw)
    with dask_workers(dask):
        result = parse_inputs(pop_inputs(kw), where=where or None, dask=dask, **parse_kw)
    echo_parse_summary(result.report, {t.cc for t in result.traces}, quiet)
    write_report(kw.pop("report_path", None), result.report)
    return result


def load_summary(kw: dict[str, Any], view: StateView) -> Summary:
    """The inputs folded into one summary (:func:`quicsm.summarize`), with :func:`input_options` and ``--dask``."""
    from quicsm.traces.summary import summarize

    parse_kw, quiet, where = pop_parse_options(kw)
    dask = kw.pop("dask")
    with dask_workers(dask):
        summary = summarize(pop_inputs(kw), view=view, where=where or None, dask=dask, **parse_kw)
    echo_parse_summary(summary.report, set(summary.ccs), quiet)
    write_report(kw.pop("report_path", None), summary.report)
    return summary


report_option = click.option(
    "--report", "report_path", type=click.Path(dir_okay=False), help="Also write the parse report as JSON."
)


def write_report(path: str | None, report: ParseReport) -> None:
    """The parse report as JSON (``--report``): counts, problems with file and line, skipped files."""
    if path:
        import json

        from quicsm.files import atomic_output

        with atomic_output(path, binary=False) as fh:
            json.dump(report.to_json(), fh, indent=2)


@contextmanager
def dask_workers(dask: str | None) -> Iterator[None]:
    """The block that reads the files; on leaving it, the local worker processes (or the Dask client)
    are shut down, whether the read finished or failed (a later run in this process, a test's, must not
    meet workers with an old environment)."""
    try:
        yield
    finally:
        if dask not in (None, OFF, AUTO):  # "auto" closes the workers it started itself
            from quicsm.fleet.cluster import close_clients

            close_clients()


def dask_option(f: F, default: str = OFF) -> F:
    """``--dask``, passed to the library as given (``off`` and ``auto`` included); its default is the
    library call's (``auto`` for ``parse`` and the verbs that learn a model: :func:`quicsm.summarize`)."""
    return click.option(
        "--dask",
        metavar="SCHEDULER",
        default=default,
        show_default=True,
        help="Read batches of input files as parallel tasks: local[:N] runs them on N worker processes of this "
        "machine (default 2; forked from this one, no scheduler), or give a Dask scheduler address such as "
        "tcp://host:8786 (needs quicsm[fleet]); off: one process; auto: local:2 for 1,000 local files or more, "
        "or 1 GiB in 16 files or more, when a second core is usable and idle, else one process (2,000 small "
        "qlogs: 0.68x the time of one process). Results equal the one-process run.",
    )(f)


def view_options(f: F) -> F:
    f = click.option(
        "--recovery-states",
        is_flag=True,
        help="Make BBR's recovery sub-state part of the state (ProbeBw/Conservation).",
    )(f)
    return click.option(
        "--phases/--no-phases", default=True, help="Keep PROBE_BW phases (Up/Down/Cruise/Refill) as separate states."
    )(f)


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
        help="Refinement of --engine synoptic: stitch (Synoptic's split selection, a fixed order where it draws "
        "at random) or consistent (split by invariant-automaton state: faster, further from Synoptic's models). "
        "Default: Synoptic's own choices for seed 1, replayed, where affordable, else stitch. See docs/inference.md.",
    )(f)
    f = click.option(
        "--synoptic-seed",
        type=int,
        help="Synoptic's --randomSeed: for --engine synoptic-jar (default 1; recorded in the model); with "
        "--engine synoptic, replay the original's choices for that seed (the model the jar draws with it; slower).",
    )(f)
    f = click.option(
        "--java",
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
        help="Seconds --engine synoptic-jar may run before it is stopped (default 3600).",
    )(f)
    f = click.option(
        "-k",
        "k",
        type=click.IntRange(1, 50),
        help="k of k-Tails, as in Synoptic: the length of the k-strings compared, the node itself included "
        "(k=1: same state; k=2: same state and same next states). Defaults: synoptic coarsening 1, ktails 2.",
    )(f)
    from quicsm.inference import ENGINES  # here: parse and compare learn nothing

    return click.option("--engine", default="synoptic", type=click.Choice(sorted(ENGINES)), help="Inference engine.")(f)


ENGINE_FLAGS = {
    "engine": "--engine",
    "k": "-k",
    "refine": "--refine",
    "seed": "--synoptic-seed",
    "synoptic_jar": "--synoptic-jar",
    "java": "--java",
    "java_options": "--java-option",
    "timeout": "--timeout",
}
"""Engine option -> the flag of :func:`engine_options` that gives it (the engine's errors name the flag)."""


def engine_opts(kw: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The engine and the options given for it, checked by its :class:`~quicsm.inference.EngineSpec`
    (exit 2 for options that do not fit it) and ready to run (a missing jar is said before any input
    is read)."""
    from quicsm.inference import ENGINES

    engine = kw.pop("engine")
    params = {"k": "k", "refine": "refine", "seed": "synoptic_seed", "java": "java", "timeout": "timeout"}
    opts = {name: kw.pop(param) for name, param in params.items()}
    opts["java_options"] = list(kw.pop("java_options")) or None
    opts["synoptic_jar"] = jar = kw.pop("synoptic_jar")
    if jar is not None and engine != "synoptic-jar" and _from_environment("synoptic_jar"):
        opts["synoptic_jar"] = None  # $QUICSM_SYNOPTIC_JAR names the jar for when that engine is chosen
    given = {k: v for k, v in opts.items() if v is not None}
    return engine, ENGINES[engine].prepare(given, lambda name: ENGINE_FLAGS.get(name, name))


def _from_environment(param: str) -> bool:
    ctx = click.get_current_context(silent=True)
    return ctx is not None and ctx.get_parameter_source(param) is click.core.ParameterSource.ENVIRONMENT


def model_options(f: F) -> F:
    """Everything a verb that learns a model from inputs takes: inputs, --dask, --report, engine, view."""
    for option in (view_options, engine_options, report_option, partial(dask_option, default=AUTO), input_options):
        f = option(f)
    return f


def learn_model(kw: dict[str, Any]) -> tuple[str, AnnotatedModel]:
    """The engine's name and the annotated model learnt from the inputs of :func:`model_options`."""
    from quicsm.pipeline import learn

    view = view_from(kw)
    engine, opts = engine_opts(kw)  # first: a missing jar or Java is said before any input is read
    summary = load_summary(kw, view)  # one summary of every input (here, or Dask tasks merged)
    am = learn(summary, engine, **opts)
    if am.model.params.get("replay_over_budget"):
        click.echo(
            "note: synoptic: replaying Synoptic's seed-1 choices would take too long on these inputs; "
            "used the stitch refinement instead (docs/inference.md)",
            err=True,
        )
    return engine, am
