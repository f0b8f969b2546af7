"""Reading the connections a baseline is made of, and the new runs a check reads, as compare's rows."""

from __future__ import annotations

import os
from collections.abc import Sequence

from quicsm.check.bundle import BUNDLE_SUFFIX, Baseline, load_baseline, make_baseline
from quicsm.check.config import CheckConfig, load_config
from quicsm.check.gate import CheckResult, check
from quicsm.compare.sets import TraceSet, expand_set, group_by_label, load_rows
from quicsm.compare.stays import Connection
from quicsm.errors import InputError
from quicsm.traces.events import StateView
from quicsm.traces.select import Selector, selector_text, trace_matches

__all__ = ["baseline_from_inputs", "check_runs", "read_rows"]


def read_rows(
    inputs: Sequence[str], view: StateView = StateView(), where: Selector | None = None
) -> tuple[list[Connection], list[TraceSet]]:
    """The connections of ``inputs`` (logs, qlogs, trace files, quoted globs, directories, or ``.qsb``
    bundles) read for ``view``, those matching ``where``; also the sets read (for their parse reports)."""
    rows: list[Connection] = []
    read: list[TraceSet] = []
    paths: list[str] = []
    for arg in map(os.fspath, inputs):
        if arg.endswith(BUNDLE_SUFFIX):
            b = load_baseline(arg)
            if b.view != view:
                raise InputError(f"{arg}: read with state view {b.view}, the baseline with {view}")
            rows += [r for s in b.sets for r in s.rows]
        else:
            paths += expand_set(arg)
    if paths:
        ts = load_rows(paths, view)
        read.append(ts)
        rows += ts.rows
    if where:
        rows = [r for r in rows if trace_matches(r.trace, where)]
        if not rows:
            raise InputError(f"no connection of {' '.join(inputs)} matches {selector_text(where)}")
    return rows, read


def baseline_from_inputs(
    inputs: Sequence[str],
    *,
    by: str | None = None,
    where: Selector | None = None,
    name: str | None = None,
    engine: str = "dfg",
    view: StateView = StateView(),
) -> tuple[Baseline, list[TraceSet]]:
    """A baseline of ``inputs``: one set (named ``name``, default the first input's last path part), or one
    per value of label ``by`` (``scenario`` for a testbed matrix), each with its ``engine`` model."""
    rows, read = read_rows(inputs, view, where)
    origin = " ".join(inputs) + (f" where {selector_text(where)}" if where else "")
    if by is None:
        label = name or inputs[0].rstrip("/").rsplit("/", 1)[-1] or "baseline"
        return make_baseline([(label, origin, rows)], view=view, engine=engine), read
    groups = group_by_label(rows, by)
    if not groups:
        raise InputError(f"no connection of {' '.join(inputs)} has label {by!r} (the testbed writes 'scenario')")
    sets = [(v, f"{origin} where {by}={v}", groups[v]) for v in sorted(groups)]
    return make_baseline(sets, view=view, engine=engine, split_by=by), read


def check_runs(
    baseline: str | Baseline,
    inputs: Sequence[str],
    *,
    config: str | CheckConfig | None = None,
    where: Selector | None = None,
    models: bool = False,
) -> CheckResult:
    """Check new runs against a baseline: the regression gate of ``quicsm check``.

    Parameters
    ----------
    baseline : str or Baseline
        A bundle written by ``quicsm baseline save`` (``.qsb``), or one already loaded.
    inputs : sequence of str or path-like
        The new runs: logs, qlogs, trace files, quoted globs, directories or ``.qsb`` bundles.
    config : str, CheckConfig or None
        Tolerances (a TOML file, docs/check.md); None: the defaults.
    where : dict of str to str, optional
        Check only the new connections whose labels match.
    models : bool
        Also learn both sides' models (for the model difference and the HTML report's diagram); the
        verdict does not depend on them.

    Returns
    -------
    CheckResult
        The verdict (``exit_code`` 0: same behaviour, 1: changed) with every test and finding.

    Raises
    ------
    quicsm.errors.QuicsmError
        A bad baseline, config or input (``quicsm check`` exits 2).

    See Also
    --------
    quicsm.check.make_baseline, quicsm.check.report : bundles, and the writers of the verdict.

    Examples
    --------
    >>> import quicsm, tempfile
    >>> from quicsm.check import make_baseline, save_baseline
    >>> from quicsm.check.inputs import read_rows
    >>> rows, _ = read_rows([TRACES / "check/reno-a"])
    >>> qsb = tempfile.mkdtemp() + "/reno.qsb"
    >>> size = save_baseline(make_baseline([("reno", "reno-a", rows)]), qsb)
    >>> quicsm.check_runs(qsb, [TRACES / "check/reno-b"]).exit_code
    0
    >>> quicsm.check_runs(qsb, [TRACES / "check/cubic-a"]).exit_code
    1
    """
    cfg = config if isinstance(config, CheckConfig) else load_config(config)  # said before any input is read
    base = baseline if isinstance(baseline, Baseline) else load_baseline(baseline)
    rows, _ = read_rows(inputs, base.view, where)
    return check(base, rows, cfg, origin=" ".join(map(str, inputs)), models=models)
