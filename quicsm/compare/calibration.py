"""How often ``quicsm compare`` flags a difference where there is none.

Split connections of ONE scenario at random into two halves many times and compare the halves with
the same tests and correction ``compare`` uses. Every flag is then a false positive: per test its
rate should be about alpha, and after Holm the share of splits with any flag (family-wise) at most
alpha. Run it on real traces::

    python -m quicsm.compare.calibration traces/fig13/desktop --splits 1000
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from quicsm.compare.comparison import CompareOptions, test_pairs
from quicsm.compare.occupancy import occupancy_table
from quicsm.compare.stays import Connection
from quicsm.compare.transitions import edge_table
from quicsm.errors import InputError

__all__ = ["Calibration", "Rates", "calibrate", "main"]


@dataclass(frozen=True, slots=True)
class Rates:
    """False-positive rates of one family (states or edges) over all splits."""

    tests: int
    """Tests run over all splits (those that could run)."""
    raw: float
    """Share of tests with raw p < alpha (about alpha if the test is calibrated)."""
    corrected: float
    """Share of tests with corrected p < alpha."""
    familywise: float
    """Share of splits with at least one flag after correction (at most alpha with Holm)."""
    flagged_splits: int


@dataclass(frozen=True, slots=True)
class Calibration:
    connections: int
    splits: int
    alpha: float
    test: str
    correction: str
    states: Rates
    edges: dict[str, Rates]
    """Per edge test (cluster, z, chi2)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _rates(flags_raw: list[int], flags_corr: list[int], tests: list[int], splits: int) -> Rates:
    total = sum(tests)
    any_flag = sum(1 for f in flags_corr if f)
    return Rates(
        total,
        sum(flags_raw) / total if total else 0.0,
        sum(flags_corr) / total if total else 0.0,
        any_flag / splits if splits else 0.0,
        any_flag,
    )


def calibrate(
    rows: Sequence[Connection],
    *,
    splits: int = 500,
    options: CompareOptions = CompareOptions(),
    edge_tests: Sequence[str] = ("cluster", "z"),
    seed: int = 0,
) -> Calibration:
    """Random half/half splits of one scenario's connections (their rows for ``options.view``); count
    what ``compare`` would flag."""
    options.check()
    if len(rows) < 4:
        raise InputError(f"calibration needs at least 4 connections of one scenario, got {len(rows)}")
    occ = occupancy_table(rows)
    kept = set(occ.trace_ids)
    edges = edge_table([r for r in rows if r.id in kept])
    n = occ.n
    rng = np.random.default_rng(seed)
    names = ("half1", "half2")
    s_raw: list[int] = []
    s_corr: list[int] = []
    s_tests: list[int] = []
    e_acc: dict[str, tuple[list[int], list[int], list[int]]] = {t: ([], [], []) for t in edge_tests}
    for _ in range(splits):
        perm = rng.permutation(n)
        a, b = np.sort(perm[: n // 2]), np.sort(perm[n // 2 :])
        oa, ob = occ.subset(a), occ.subset(b)
        states = [s for s in occ.states if oa.visited(s) or ob.visited(s)]
        tables = {names[0]: edges.subset(a), names[1]: edges.subset(b)}
        for k, et in enumerate(edge_tests):
            opts = replace(options, edge_test=et)
            pairs, _ = test_pairs({names[0]: oa, names[1]: ob}, tables, states, [(0, 1)], names, opts)
            p = pairs[0]
            if k == 0:
                run = [r for r in p.states if r.result.p_value is not None]
                s_tests.append(len(run))
                s_raw.append(sum(r.result.p_value < options.alpha for r in run))  # type: ignore[operator]
                s_corr.append(sum(r.significant for r in run))
            erun = [e for e in p.edges if e.result.p_value is not None]
            raw, corr, tests = e_acc[et]
            tests.append(len(erun))
            raw.append(sum(e.result.p_value < options.alpha for e in erun))  # type: ignore[operator]
            corr.append(sum(e.significant for e in erun))
    return Calibration(
        n,
        splits,
        options.alpha,
        options.test,
        options.correction,
        _rates(s_raw, s_corr, s_tests, splits),
        {et: _rates(r, c, t, splits) for et, (r, c, t) in e_acc.items()},
    )


def main(argv: Sequence[str] | None = None) -> int:
    from quicsm.compare.sets import expand_set, load_rows, parse_selector, trace_matches
    from quicsm.traces.events import StateView

    ap = argparse.ArgumentParser(prog="python -m quicsm.compare.calibration", description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", help="logs, qlogs, trace files, quoted globs or directories of ONE scenario")
    ap.add_argument("--where", help="K=V[,K=V]: keep only matching traces")
    ap.add_argument("--splits", type=int, default=500)
    ap.add_argument("--alpha", type=float, default=0.01)
    ap.add_argument("--test", default="welch", choices=["welch", "mwu"])
    ap.add_argument("--correction", default="holm")
    ap.add_argument("--edge-tests", default="cluster,z,chi2")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-phases", action="store_true")
    args = ap.parse_args(argv)
    view = StateView(phases=not args.no_phases)
    rows = load_rows([p for pat in args.inputs for p in expand_set(pat)], view).rows
    if args.where:
        sel = parse_selector(args.where)
        rows = tuple(r for r in rows if trace_matches(r.trace, sel))
    opts = CompareOptions(view=view, test=args.test, alpha=args.alpha, correction=args.correction, models=False)
    cal = calibrate(rows, splits=args.splits, options=opts, edge_tests=args.edge_tests.split(","), seed=args.seed)
    json.dump(cal.to_json(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
