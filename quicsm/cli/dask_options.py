"""``--dask SCHEDULER`` and the summary-based input stage shared by ``infer``, ``diagram`` and ``compare``.

Kept apart from :mod:`quicsm.cli.options` so the fleet path stays one obvious switch-over point.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from quicsm.fleet.summary import Summary
from quicsm.traces.events import StateView, Trace

if TYPE_CHECKING:
    from quicsm.traces.parse import ParseResult

__all__ = ["dask_option", "load_summary", "load_dask_inputs", "dask_loader", "close_dask"]

F = Callable[..., Any]


def dask_option(f: F) -> F:
    return click.option(
        "--dask",
        "dask",
        metavar="SCHEDULER",
        help="Reduce each input file as a Dask task: local[:N] starts N local workers, or a scheduler "
        "address such as tcp://host:8786 (needs quicsm[fleet]). Results equal the local run.",
    )(f)


def load_summary(kw: dict[str, Any], view: StateView) -> Summary:
    """The parse stage of :func:`quicsm.cli.options.load_inputs`, reduced to a :class:`Summary` per file and merged."""
    from quicsm.cli.options import echo_parse_summary, no_trace_matches, pop_parse_options
    from quicsm.fleet.run import summarize_inputs

    parse_kw, quiet, where = pop_parse_options(kw)
    summary = summarize_inputs(list(kw.pop("inputs")), view=view, where=where, dask=kw.pop("dask", None), **parse_kw)
    close_dask()
    if where and not summary.traces:
        raise no_trace_matches(where)
    echo_parse_summary(summary.report.summary(), set(summary.ccs), quiet)
    return summary


def load_dask_inputs(kw: dict[str, Any], dask: str | None) -> ParseResult:
    """:func:`quicsm.cli.options.load_inputs` with one Dask task per input file (same traces, same order);
    ``dask`` None reads the files one by one here, as workers would (inputs that are URLs)."""
    from quicsm.cli.options import echo_parse_summary, no_trace_matches, pop_parse_options
    from quicsm.fleet.run import parse_files
    from quicsm.traces.select import trace_matches

    parse_kw, quiet, where = pop_parse_options(kw)
    result = parse_files(list(kw.pop("inputs")), dask=dask, **parse_kw)
    close_dask()
    if where:
        result.traces = [t for t in result.traces if trace_matches(t, where)]
        if not result.traces:
            raise no_trace_matches(where)
    echo_parse_summary(result.report.summary(), set(), quiet)
    return result


def dask_loader(dask: str) -> Callable[[list[str]], list[Trace]]:
    """A ``compare`` set loader (``paths -> traces``) that parses each file as a Dask task."""
    from quicsm.fleet.run import parse_files

    def load(paths: list[str], labels: dict[str, str] | None = None) -> list[Trace]:
        return parse_files(paths, dask=dask, labels=labels or None).traces

    return load


def close_dask() -> None:
    """Shut down a LocalCluster as soon as the files are reduced (it holds worker processes)."""
    import sys as _sys

    cluster = _sys.modules.get("quicsm.fleet.cluster")
    if cluster is not None:
        cluster.close_clients()
