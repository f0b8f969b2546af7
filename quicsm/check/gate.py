"""The gate's decision: does a new set of runs behave like the baseline?

For each scenario the baseline and the new connections go through :func:`quicsm.compare.compare`
(the same rows, tests and model difference as ``quicsm compare``). On top of its results the gate
adds what a CI verdict needs:

* **new / gone** states and edges, counted in connections (``min_support``), each with a witness:
  a connection that shows it and its state path up to there;
* **occupancy** (per-connection time share per state) and **edge probability** shifts, from
  compare's tests, and **visit-count** shifts (entries per connection, e.g. Recovery episodes, the
  Fig. 10 signal) with compare's per-connection test on the occupancy table's visit counts;
* one multiple-testing family for the whole check (every test of every scenario, compare's
  correction), so the chance that an unchanged stack fails the build is at most ``alpha``; a shift
  fails only when it is significant *and* at least ``min_effect`` large.
"""

from __future__ import annotations

import warnings as warnings_module
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quicsm.check.bundle import Baseline, BaselineSet
from quicsm.check.config import CheckConfig, Resolved, edge_key
from quicsm.compare.comparison import CompareOptions, Comparison, compare
from quicsm.compare.occupancy import OccupancyTable
from quicsm.compare.sets import TraceSet
from quicsm.compare.stats import SAMPLE_TESTS, TestResult, correct, fisher_exact
from quicsm.compare.stays import Connection
from quicsm.errors import InputError
from quicsm.traces.select import label_value

__all__ = ["CheckResult", "Finding", "ScenarioResult", "Witness", "check", "match_scenarios", "witness_text"]

WITNESS_CONTEXT = 6
"""States of a witness path shown before the new state or edge."""


@dataclass(frozen=True, slots=True)
class Witness:
    """A connection that shows a new or gone state/edge, and its state path up to it (the edge's destination)."""

    connection: str
    path: tuple[str, ...]
    """States from ``start`` on (the whole path if short)."""
    start: int
    """Index of ``path[0]`` in the connection's path (0: from its first state)."""
    length: int
    """Length of the connection's whole path."""


def witness_text(w: Witness | Any) -> str:
    """A witness (or its record) as one line: the connection and its path, ``...`` where it is cut."""
    head = "... " if w.start else ""
    tail = " ..." if w.start + len(w.path) < w.length else ""
    return f"{w.connection}: {head}{' '.join(w.path)}{tail}"


def fmt_value(f: Finding | Any, x: float | None) -> str:
    """A finding's (or its record's) baseline or new value: entries per connection, else a percentage."""
    if x is None:
        return "n/a"
    return f"{x:.2f}" if f.check == "visits" else f"{100 * x:.1f}%"


@dataclass(slots=True)
class Finding:
    """One test of one state or edge in one scenario; ``failed`` is the verdict on it."""

    scenario: str
    kind: str
    """``state``, ``edge``, ``path`` (consecutive states) or ``controller``."""
    item: str
    """State name, ``"A -> B"``, ``"A -> B -> C"``, or ``cc``."""
    check: str
    """``new``, ``gone``, ``share`` (paths), ``occupancy``, ``visits``, ``probability`` or ``controller``."""
    baseline: float | None = None
    new: float | None = None
    """Mean share / mean entries per connection / probability (``None``: undefined in that set)."""
    p_value: float | None = None
    p_corrected: float | None = None
    effect_size: float | None = None
    effect_measure: str = ""
    alpha: float | None = None
    min_effect: float | None = None
    min_support: int | None = None
    support: tuple[int, int] = (0, 0)
    """Connections showing the state/edge in the baseline and in the new runs."""
    witness: Witness | None = None
    failed: bool = False
    ignored: bool = False
    note: str = ""

    @property
    def difference(self) -> float | None:
        if self.baseline is None or self.new is None:
            return None
        return self.new - self.baseline

    @property
    def effect(self) -> float | None:
        """What ``min_effect`` is compared with: the absolute difference, relative for visit counts."""
        d = self.difference
        if d is None or self.baseline is None:
            return None
        return abs(d) / max(self.baseline, 1.0) if self.check == "visits" else abs(d)

    def reason(self) -> str:
        """One line saying what changed (failed findings) or why it passed."""
        if self.check == "new":
            return f"new: in {self.support[1]} of the new connections, in no baseline one"
        if self.check == "gone":
            return f"gone: in {self.support[0]} of the baseline connections, in no new one"
        if self.check == "controller":
            return self.note
        what = {
            "occupancy": "time share",
            "visits": "entries per connection",
            "probability": "probability",
            "share": "share of connections showing it",
        }[self.check]
        if self.baseline is None or self.new is None:
            return f"{what}: {self.note or 'not tested'}"
        p = "n/a" if self.p_corrected is None else f"{self.p_corrected:.2g}"
        es = "" if self.effect_size is None else f", {self.effect_measure} {self.effect_size:+.2f}"
        return f"{what} {fmt_value(self, self.baseline)} -> {fmt_value(self, self.new)} (p adj {p}{es})"


@dataclass(slots=True)
class ScenarioResult:
    name: str
    baseline: BaselineSet
    new: TraceSet
    comparison: Comparison
    findings: list[Finding] = field(default_factory=list)


@dataclass(slots=True)
class CheckResult:
    """The verdict of :func:`quicsm.check_runs`: per scenario, the comparison and what failed.

    Attributes
    ----------
    baseline : Baseline
        The bundle checked against.
    config : CheckConfig
        The tolerances used.
    scenarios : list of ScenarioResult
        Per baseline set, its new connections, the comparison and the findings.
    warnings : list of str
        What the comparisons warned of (small sets, mixed controllers).

    Examples
    --------
    >>> import quicsm, tempfile
    >>> from quicsm.check import make_baseline, save_baseline
    >>> from quicsm.check.inputs import read_rows
    >>> qsb = tempfile.mkdtemp() + "/reno.qsb"
    >>> size = save_baseline(make_baseline([("reno", "reno-a", read_rows([TRACES / "check/reno-a"])[0])]), qsb)
    >>> result = quicsm.check_runs(qsb, [TRACES / "check/cubic-a"])
    >>> result.changed, result.exit_code, len(result.failures) > 0
    (True, 1, True)
    """

    baseline: Baseline
    config: CheckConfig
    scenarios: list[ScenarioResult]
    warnings: list[str]

    @property
    def findings(self) -> list[Finding]:
        return [f for s in self.scenarios for f in s.findings]

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.failed]

    @property
    def changed(self) -> bool:
        return bool(self.failures)

    @property
    def exit_code(self) -> int:
        """0: behaves the same; 1: changed (2, bad input, is raised as an error before a result exists)."""
        return 1 if self.changed else 0


def match_scenarios(baseline: Baseline, new: Sequence[Connection], origin: str) -> list[tuple[BaselineSet, TraceSet]]:
    """Pair each baseline set with the new connections of its scenario (by the bundle's ``split_by``
    label), every new connection when the bundle holds one set without a label."""
    view = baseline.view
    if baseline.split_by is None:
        if len(baseline.sets) != 1:
            raise InputError(f"{baseline.source}: {len(baseline.sets)} sets but no split_by label to match them by")
        b = baseline.sets[0]
        return [(b, TraceSet("new", tuple(new), origin, view=view))]
    key = baseline.split_by
    groups: dict[str, list[Connection]] = {}
    for r in new:
        v = label_value(r.trace, key)
        if v is not None:
            groups.setdefault(v, []).append(r)
    missing = [b.name for b in baseline.sets if b.name not in groups]
    if missing:
        have = ", ".join(sorted(groups)) or "none"
        raise InputError(
            f"no new connection has {key}={missing[0]} (the baseline's scenario{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)}; new runs have {key}: {have})"
        )
    return [
        (b, TraceSet(f"new {b.name}", tuple(groups[b.name]), f"{origin} where {key}={b.name}", view=view))
        for b in baseline.sets
    ]


Item = str | tuple[str, ...]
"""A state name, or a run of consecutive states (an edge: two, a path: three) with INITIAL/TERMINAL at the ends."""


@dataclass(slots=True)
class Shown:
    """How many connections of a set show each state and each run of 2 (edges) and ``k`` (paths) consecutive
    states, with INITIAL/TERMINAL at the ends, and the first connection that does: one pass over the rows."""

    count: dict[Item, int]
    first: dict[Item, Connection]

    @classmethod
    def of(cls, rows: Sequence[Connection], k: int) -> Shown:
        count: dict[Item, int] = {}
        first: dict[Item, Connection] = {}
        lengths = (2, k) if k >= 3 else (2,)
        for r in rows:
            path = ("INITIAL", *r.states, "TERMINAL")
            items: set[Item] = set(r.states)
            for n in lengths:
                items.update(path[i : i + n] for i in range(len(path) - n + 1))
            for it in items:
                if it not in count:
                    count[it] = 0
                    first[it] = r
                count[it] += 1
        return cls(count, first)

    def runs(self, k: int) -> set[tuple[str, ...]]:
        return {it for it in self.count if isinstance(it, tuple) and len(it) == k}


def _run_at(states: Sequence[str], run: tuple[str, ...]) -> int | None:
    """Index in ``states`` of the last state of the first occurrence of ``run`` (INITIAL/TERMINAL are the
    path's ends, so a run ending in TERMINAL gives ``len(states)``)."""
    path = ("INITIAL", *states, "TERMINAL")
    k = len(run)
    for i in range(len(path) - k + 1):
        if path[i : i + k] == run:
            return i + k - 2
    return None


def _witness(r: Connection, item: Item) -> Witness:
    at = r.states.index(item) if isinstance(item, str) else (_run_at(r.states, item) or 0)
    start = max(0, at - WITNESS_CONTEXT)
    return Witness(r.id, tuple(r.states[start : at + 1]), start, len(r.states))


def _presence(
    scenario: str,
    kind: str,
    name: str,
    item: Item,
    a: Shown,
    b: Shown,
    sizes: tuple[int, int],
    support: int,
    *,
    share: bool = False,
) -> tuple[Finding, TestResult] | None:
    """A new or gone state/edge/path, with Fisher's exact test of how many connections show it (a gone edge
    that only 2 of 5 baseline runs took is chance, not a change); with ``share``, also a path both sets
    show, by different shares of their connections. ``None``: nothing to test."""
    ka, kb = a.count.get(item, 0), b.count.get(item, 0)
    na, nb = sizes
    if not ka and not kb or (ka and kb and not share) or ka * nb == kb * na:
        return None
    res = fisher_exact(ka, na, kb, nb)
    check = "share" if ka and kb else "new" if kb else "gone"
    f = _shift(scenario, kind, name, check, ka / na, kb / nb, res, (ka, kb))
    f.witness = _witness((b if kb >= ka * nb / na else a).first[item], item)
    f.min_support = support
    return f, res


def _scenario_findings(sr: ScenarioResult, config: CheckConfig) -> list[tuple[Finding, TestResult | None]]:
    """Every finding of one scenario, with the raw test whose p-value joins the family."""
    c = sr.comparison
    pair = c.pairs[0]
    a_name, b_name = pair.a, pair.b
    a_rows, b_rows = sr.baseline.rows, sr.new.rows
    k = config.path_length
    shown_a, shown_b = Shown.of(a_rows, k), Shown.of(b_rows, k)
    sizes = (len(a_rows), len(b_rows))
    out: list[tuple[Finding, TestResult | None]] = []
    sample_test = SAMPLE_TESTS[config.test]
    occ_a, occ_b = c.occupancy[a_name], c.occupancy[b_name]
    by_state = {r.state: r for r in pair.states}
    all_states = sorted({s for r in (*a_rows, *b_rows) for s in r.states})
    for st in all_states:
        tol = config.for_state(st)
        pres = _presence(sr.name, "state", st, st, shown_a, shown_b, sizes, tol.min_support)
        if pres is not None:
            out.append(_tested(pres[0], pres[1], tol))
        row = by_state.get(st)
        if row is not None:
            shown = (row.visited_a, row.visited_b)
            f = _shift(sr.name, "state", st, "occupancy", row.mean_a, row.mean_b, row.result, shown)
            out.append(_tested(f, row.result, tol))
            va, vb = _visits(occ_a, st), _visits(occ_b, st)
            with warnings_module.catch_warnings():
                warnings_module.simplefilter("ignore", RuntimeWarning)
                res = sample_test(va, vb)
            means = (float(va.mean()) if len(va) else None, float(vb.mean()) if len(vb) else None)
            f = _shift(sr.name, "state", st, "visits", *means, res, (int((va > 0).sum()), int((vb > 0).sum())))
            out.append(_tested(f, res, tol))
    for e in pair.edges:
        tol = config.for_edge(e.src, e.dst)
        name = edge_key(e.src, e.dst)
        pres = _presence(sr.name, "edge", name, (e.src, e.dst), shown_a, shown_b, sizes, tol.min_support)
        if pres is not None:
            out.append(_tested(pres[0], pres[1], tol))
        ea, eb = c.edge_tables[a_name], c.edge_tables[b_name]
        support = (int((ea.edge_column((e.src, e.dst)) > 0).sum()), int((eb.edge_column((e.src, e.dst)) > 0).sum()))
        f = _shift(sr.name, "edge", name, "probability", e.prob_a, e.prob_b, e.result, support)
        out.append(_tested(f, e.result, tol))
    if k >= 3:  # behaviour a state diagram cannot show: what follows what (k-Tails, k = 2)
        for run in sorted(shown_a.runs(k) | shown_b.runs(k)):
            name = " -> ".join(run)
            tol = config.for_path(name)
            pres = _presence(sr.name, "path", name, run, shown_a, shown_b, sizes, tol.min_support, share=True)
            if pres is not None:
                out.append(_tested(pres[0], pres[1], tol))
    out.extend((f, None) for f in _controller(sr, config))
    return out


def _shift(
    scenario: str,
    kind: str,
    item: str,
    check: str,
    a: float | None,
    b: float | None,
    res: TestResult,
    support: tuple[int, int],
) -> Finding:
    return Finding(
        scenario,
        kind,
        item,
        check,
        baseline=a,
        new=b,
        p_value=res.p_value,
        effect_size=res.effect_size,
        effect_measure=res.effect_measure,
        support=support,
        note=res.note,
    )


def _controller(sr: ScenarioResult, config: CheckConfig) -> list[Finding]:
    a = sorted({r.trace.cc for r in sr.baseline.rows if r.trace.cc})
    b = sorted({r.trace.cc for r in sr.new.rows if r.trace.cc})
    f = Finding(sr.name, "controller", "cc", "controller", support=(len(sr.baseline.rows), len(sr.new.rows)))
    if a == b:
        f.note = f"congestion controller {', '.join(a) or 'unknown'} in both"
    else:
        f.note = f"congestion controller changed: {', '.join(a) or 'unknown'} -> {', '.join(b) or 'unknown'}"
        f.failed = config.controller == "fail"
    return [f]


def _visits(occ: OccupancyTable, state: str) -> np.ndarray:
    """Entries into ``state`` per connection (the occupancy table's visit counts; 0 where never visited)."""
    if state in occ.states:
        return occ.visits[:, occ.states.index(state)].astype(float)
    return np.zeros(occ.n)


def _tested(f: Finding, res: TestResult, tol: Resolved) -> tuple[Finding, TestResult | None]:
    """The finding with its item's tolerances, and the test that joins the family (none when ignored)."""
    f.alpha = tol.alpha
    if f.check == "share" or f.check not in ("new", "gone"):
        f.min_effect = tol.min_visits_effect if f.check == "visits" else tol.min_effect
    if tol.ignore:
        f.ignored = True
        f.note = "ignored by the config" + (f"; {f.note}" if f.note else "")
        return f, None
    return f, res


def _decide(f: Finding) -> None:
    """Failed: significant after correction, and large enough (effect, or connections for new/gone)."""
    significant = f.p_corrected is not None and f.alpha is not None and f.p_corrected < f.alpha
    if f.check in ("new", "gone"):
        large = max(f.support) >= (f.min_support or 1)
        small = f"shown by fewer connections than the minimum support {f.min_support}"
    else:
        effect = f.effect
        large = effect is not None and effect >= (f.min_effect or 0.0)
        small = f"smaller than the minimum effect {f.min_effect:g}"
    f.failed = significant and large
    if significant and not large:
        f.note = (f.note + "; " if f.note else "") + f"significant but {small}"


def check(
    baseline: Baseline,
    new: Sequence[Connection],
    config: CheckConfig = CheckConfig(),
    *,
    origin: str = "new runs",
    models: bool = True,
) -> CheckResult:
    """Check ``new`` connections (rows read for ``baseline.view``) against ``baseline``.

    ``models``: learn both sets' models (for the model difference and the HTML diagrams); the
    decision does not depend on them.
    """
    if not new:
        raise InputError(f"{origin}: no connection to check")
    options = CompareOptions(
        view=baseline.view,
        test=config.test,
        alpha=config.alpha,
        correction=config.correction,
        edge_test=config.edge_test,
        engine=baseline.engine,
        models=models,
        resamples=0,  # the gate reads tests, not the bootstrap CIs of means
    )
    scenarios: list[ScenarioResult] = []
    warnings: list[str] = []
    for b, n in match_scenarios(baseline, new, origin):
        base = TraceSet(
            "baseline" if len(baseline.sets) == 1 else f"baseline {b.name}", b.rows, b.origin, view=baseline.view
        )
        with warnings_module.catch_warnings():  # scipy's precision note on near-identical samples: the
            warnings_module.simplefilter("ignore", RuntimeWarning)  # test result says what it means
            comparison = compare([base, n], options)
        scenarios.append(ScenarioResult(b.name, b, n, comparison))
        warnings += [w if len(baseline.sets) == 1 else f"{b.name}: {w}" for w in comparison.warnings]
    tested: list[tuple[Finding, TestResult | None]] = []
    for sr in scenarios:
        found = _scenario_findings(sr, config)
        sr.findings = [f for f, _ in found]
        tested += found
    family = [(f, r) for f, r in tested if r is not None and r.p_value is not None]
    for (f, _), q in zip(family, correct([r.p_value for _, r in family], config.correction)):
        f.p_corrected = q
        _decide(f)
    return CheckResult(baseline, config, scenarios, warnings)
