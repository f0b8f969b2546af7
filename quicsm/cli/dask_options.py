"""``--dask SCHEDULER`` and the summary-based input stage shared by ``infer``, ``diagram`` and ``compare``.

Kept apart from :mod:`quicsm.cli.options` so the fleet path stays one obvious switch-over point.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from quicsm.fleet.summary import Summary
from quicsm.traces.events import StateView, Trace

if TYPE_CHECKING:
    from quicsm.traces.parse import ParseResult

__all__ = ["dask_option", "load_summary", "load_dask_inputs", "dask_loader"]

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
    from quicsm.fleet.run import summarize_inputs

    progress = kw.pop("progress")
    if progress is None:
        progress = sys.stderr.isatty() and not os.environ.get("CI")
    quiet = kw.pop("quiet")
    where = kw.pop("where")
    summary = summarize_inputs(
        list(kw.pop("inputs")),
        view=view,
        labels=kw.pop("labels"),
        implementation=kw.pop("implementation"),
        version=kw.pop("impl_version"),
        cc=kw.pop("cc"),
        strict=kw.pop("strict"),
        where=where,
        dask=kw.pop("dask", None),
        progress=bool(progress),
    )
    _close()
    if where and not summary.traces:
        raise click.ClickException(f"no trace matches --where {' '.join(f'{k}={v}' for k, v in where.items())}")
    if not quiet:
        click.echo(summary.report.summary(), err=True)
    ccs = sorted(summary.ccs)
    if len(ccs) > 1 and not quiet:
        click.echo(
            f"warning: traces mix congestion controllers ({', '.join(ccs)}); use --where cc=NAME to pick one", err=True
        )
    return summary


def load_dask_inputs(kw: dict[str, Any], dask: str) -> ParseResult:
    """:func:`quicsm.cli.options.load_inputs` with one Dask task per input file (same traces, same order)."""
    from quicsm.fleet.run import parse_files

    progress = kw.pop("progress")
    if progress is None:
        progress = sys.stderr.isatty() and not os.environ.get("CI")
    quiet = kw.pop("quiet")
    where = kw.pop("where")
    result = parse_files(
        list(kw.pop("inputs")),
        dask=dask,
        labels=kw.pop("labels"),
        implementation=kw.pop("implementation"),
        version=kw.pop("impl_version"),
        cc=kw.pop("cc"),
        strict=kw.pop("strict"),
        progress=bool(progress),
    )
    _close()
    if where:
        from quicsm.compare.sets import trace_matches

        result.traces = [t for t in result.traces if trace_matches(t, where)]
        if not result.traces:
            raise click.ClickException(f"no trace matches --where {' '.join(f'{k}={v}' for k, v in where.items())}")
    if not quiet:
        click.echo(result.report.summary(), err=True)
    return result


def dask_loader(dask: str) -> Callable[[list[str]], list[Trace]]:
    """A ``compare`` set loader (``paths -> traces``) that parses each file as a Dask task."""
    from quicsm.fleet.run import parse_files

    def load(paths: list[str], labels: dict[str, str] | None = None) -> list[Trace]:
        return parse_files(paths, dask=dask, labels=labels or None).traces

    return load


def _close() -> None:
    """Shut down a LocalCluster as soon as the files are reduced (it holds worker processes)."""
    import sys as _sys

    cluster = _sys.modules.get("quicsm.fleet.cluster")
    if cluster is not None:
        cluster.close_clients()
