"""Compare two or more trace sets: occupancy and transition tests, model differences, warnings.

:func:`compare` is the library entry point behind ``quicsm compare``; everything it finds is in the
returned :class:`Comparison`, which the writers in :mod:`quicsm.compare.report` turn into text,
JSON, CSV, Markdown and HTML. Problems (too few connections, a state one set never visits, mixed
congestion controllers) become ``warnings`` and per-row notes, never exceptions or NaN.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Literal

import msgspec
import numpy as np

from quicsm.compare.modeldiff import ModelDiff, diff_models
from quicsm.compare.occupancy import OccupancyTable, StateSummary, occupancy_table, summarise, test_states
from quicsm.compare.sets import TraceSet
from quicsm.compare.stats import CORRECTIONS, EDGE_TESTS, MIN_SAMPLE, SAMPLE_TESTS, TestResult, correct
from quicsm.compare.stays import Connection, rows_summary
from quicsm.compare.svg import rate_logs_for
from quicsm.compare.transitions import Edge2, EdgeTable, edge_counts, edge_table, test_edge
from quicsm.errors import InferenceError, InputError, OptionError
from quicsm.inference.annotate import AnnotatedModel
from quicsm.pipeline import learn
from quicsm.traces.events import StateView, Trace
from quicsm.traces.metric_states import INFERRED_LABEL

__all__ = [
    "CompareOptions",
    "Comparison",
    "EdgeRow",
    "PairComparison",
    "SetInfo",
    "StateRow",
    "compare",
    "learn_connections",
    "pairs_for",
    "test_pairs",
]


class OptionsRecord(msgspec.Struct):
    """The compare JSON's ``options``."""

    test: Literal["welch", "mwu"]
    alpha: float
    correction: Literal["holm", "bonferroni", "bh"]
    edge_test: Literal["cluster", "z", "chi2"]
    bootstrap_resamples: int
    confidence: float
    seed: int
    engine: str
    k: int | None
    phases: bool
    recovery_states: bool
    pairs: Literal["all", "baseline"]


@dataclass(frozen=True, slots=True)
class CompareOptions:
    """Every knob of a comparison; recorded in the outputs so a result can be reproduced.

    Attributes
    ----------
    view : StateView
        How events became states (the sets must be read for the same view).
    test : {"welch", "mwu"}
        Per-state test on per-connection shares.
    alpha : float
        Significance threshold after correction.
    correction : {"holm", "bonferroni", "bh", "none"}
        Multiple-comparison correction (states and edges are two families).
    edge_test : {"cluster", "z", "chi2"}
        Per-edge test; ``cluster`` treats connections as the units.
    resamples, confidence, seed
        The bootstrap of each mean's CI (0 resamples: none).
    engine, k
        The per-set models' engine and its ``k``.
    witnesses : int
        Shortest sequences shown per direction that one model accepts and the other rejects.
    all_pairs : bool
        Test every pair, not every set against the first.
    models : bool
        Learn the per-set models (model differences, diagrams) and each pair's union model (the diff
        diagram).
    timelines : int
        Connections per set whose events the result keeps for timelines (the HTML report), spread over
        the durations; ``quicsm compare`` sets ``--timelines`` when it writes ``--html``.

    Examples
    --------
    >>> import quicsm
    >>> o = quicsm.CompareOptions(test="mwu", alpha=0.05)
    >>> o.to_json()["test"], o.to_json()["pairs"]
    ('mwu', 'baseline')
    """

    view: StateView = field(default_factory=StateView)
    test: str = "welch"
    alpha: float = 0.01
    correction: str = "holm"
    edge_test: str = "cluster"
    resamples: int = 2000
    confidence: float = 0.95
    seed: int = 0
    engine: str = "synoptic"
    k: int | None = None
    """Tail length for the ``ktails`` engine / Synoptic coarsening (``-k``); engine default if None."""
    witnesses: int = 3
    all_pairs: bool = False
    models: bool = True
    """Learn per-set models (for model differences and diagrams); calibration runs turn it off."""
    timelines: int = 0

    def check(self) -> None:
        """Refuse an unknown test, correction, engine or an out-of-range value (:class:`OptionError`: a
        usage error, exit 2 at the CLI), before any work."""
        from quicsm.inference import ENGINES

        for what, value, known in (
            ("test", self.test, SAMPLE_TESTS),
            ("edge test", self.edge_test, EDGE_TESTS),
            ("correction", self.correction, CORRECTIONS),
            ("engine", self.engine, ENGINES),
        ):
            if value not in known:
                raise OptionError(f"unknown {what} {value!r}; choose one of {', '.join(sorted(known))}")
        ENGINES[self.engine].check({} if self.k is None else {"k": self.k})
        if not 0 < self.alpha < 1:
            raise OptionError(f"alpha must be between 0 and 1, not {self.alpha}")
        if not 0 < self.confidence < 1:
            raise OptionError(f"confidence must be between 0 and 1, not {self.confidence}")
        if self.timelines < 0:
            raise OptionError(f"timelines must be 0 or more, not {self.timelines}")

    def to_json(self) -> dict[str, object]:
        """The options as the compare JSON holds them (:class:`OptionsRecord`)."""
        view, pairs = self.view, "all" if self.all_pairs else "baseline"
        o = (self.test, self.alpha, self.correction, self.edge_test, self.resamples, self.confidence, self.seed)
        return msgspec.to_builtins(OptionsRecord(*o, self.engine, self.k, view.phases, view.recovery, pairs))  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class SetInfo:
    """What one set held."""

    name: str
    origin: str
    traces: int
    connections: int
    """Connections used for occupancy (traces with some time in some state)."""
    dropped: int
    controllers: tuple[str, ...]
    implementations: tuple[str, ...]
    versions: tuple[str, ...]
    sources: int
    skipped_records: int = 0
    """Problem records skipped while reading the set's inputs (the parse report's total)."""
    skipped_files: tuple[str, ...] = ()
    inferred: int = 0
    """Traces whose states were read from metrics (:mod:`quicsm.traces.metric_states`), not logged."""


@dataclass(frozen=True, slots=True)
class StateRow:
    """The occupancy test of one state between sets ``a`` and ``b``: the per-connection shares of time
    in the state, tested with :attr:`CompareOptions.test`; ``result`` holds the raw p-value, statistic
    and effect size (Hedges' g for Welch, rank-biserial r for Mann-Whitney), ``p_corrected`` the
    p-value corrected over every state test of every pair (one family), ``significant`` whether it is
    below :attr:`CompareOptions.alpha`."""

    a: str
    b: str
    state: str
    mean_a: float
    mean_b: float
    difference: float
    """mean_b - mean_a (share of connection time)."""
    result: TestResult
    p_corrected: float | None
    significant: bool
    visited_a: int
    visited_b: int
    n_a: int
    n_b: int


@dataclass(frozen=True, slots=True)
class EdgeRow:
    """The probability test of one edge of the directly-follows model between sets ``a`` and ``b``:
    ``prob_*`` = times taken / times its source was left (``count_*`` / ``out_*``), tested with
    :attr:`CompareOptions.edge_test` (``cluster``: connections as units); ``p_corrected`` over every
    edge test of every pair (a family apart from the states')."""

    a: str
    b: str
    src: str
    dst: str
    prob_a: float | None
    prob_b: float | None
    count_a: int
    count_b: int
    out_a: int
    out_b: int
    result: TestResult
    p_corrected: float | None
    significant: bool

    @property
    def only_in(self) -> str | None:
        if self.count_a and not self.count_b:
            return self.a
        if self.count_b and not self.count_a:
            return self.b
        return None

    @property
    def difference(self) -> float | None:
        if self.prob_a is None or self.prob_b is None:
            return None
        return self.prob_b - self.prob_a


@dataclass(frozen=True, slots=True)
class PairComparison:
    """Set ``b`` against set ``a`` (the baseline): every state's and edge's test, and the difference
    of their models (None when either has no model)."""

    a: str
    b: str
    states: tuple[StateRow, ...]
    edges: tuple[EdgeRow, ...]
    models: ModelDiff | None


@dataclass(slots=True)
class Comparison:
    """Everything :func:`compare` found; :mod:`quicsm.compare.report` writes it as JSON (docs/compare.md),
    CSV, Markdown or text, :mod:`quicsm.compare.html` as a report.

    Examples
    --------
    >>> import quicsm
    >>> from quicsm.compare.report import to_json
    >>> sets = quicsm.build_sets([TRACES / "fig13/desktop", TRACES / "fig13/mobile"])
    >>> c = quicsm.compare_sets(sets, quicsm.CompareOptions(resamples=0))
    >>> [s.name for s in c.sets], c.states[:2]
    (['desktop', 'mobile'], ('ApplicationLimited', 'CongestionAvoidance'))
    >>> to_json(c)["format"]
    'quicsm-compare'
    """

    options: CompareOptions
    sets: list[SetInfo]
    states: tuple[str, ...]
    """Every state some connection of some set spent time in, sorted."""
    summaries: dict[str, list[StateSummary]]
    """Per set, per state of :attr:`states`: mean, median, bootstrap CI and pooled share."""
    pairs: list[PairComparison]
    """Every set against the first (or every pair with ``all_pairs``)."""
    warnings: list[str]
    models: dict[str, AnnotatedModel] = field(default_factory=dict)
    """Per set, its annotated model (``options.engine``), when ``options.models``."""
    trace_sets: list[TraceSet] = field(default_factory=list)
    occupancy: dict[str, OccupancyTable] = field(default_factory=dict)
    """Per set, per connection: shares of time, microseconds and visit counts per state."""
    edge_tables: dict[str, EdgeTable] = field(default_factory=dict)
    """Per set, per connection: times each edge was taken and each state left."""
    unions: dict[tuple[str, str], AnnotatedModel] = field(default_factory=dict)
    """Per pair ``(a, b)``, the ``dfg`` model of both sets' connections together (the diff diagram's
    shape), when ``options.models``."""
    timelines: dict[str, list[Trace]] = field(default_factory=dict)
    """Per set, ``options.timelines`` connections with their events (:meth:`TraceSet.timeline_traces`)."""
    rate_logs: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    """Per connection of :attr:`timelines` made by a testbed run under a rate schedule, the schedule
    (:func:`quicsm.compare.svg.rate_logs_for`)."""

    def pair(self, a: str, b: str) -> PairComparison:
        return next(p for p in self.pairs if p.a == a and p.b == b)


def pairs_for(n: int, all_pairs: bool) -> list[tuple[int, int]]:
    """Baseline mode compares every set with the first; ``all_pairs`` compares every pair."""
    return list(combinations(range(n), 2)) if all_pairs else [(0, i) for i in range(1, n)]


def _set_info(ts: TraceSet, occ: OccupancyTable) -> SetInfo:
    metas = ts.traces

    def distinct(attr: str) -> tuple[str, ...]:
        return tuple(sorted({str(getattr(t, attr)) for t in metas if getattr(t, attr)}))

    return SetInfo(
        ts.name,
        ts.origin,
        len(metas),
        occ.n,
        len(occ.dropped),
        distinct("cc"),
        distinct("implementation"),
        distinct("version"),
        len({s for t in metas for s in t.sources}),
        ts.report.total_issues if ts.report else 0,
        tuple(ts.report.skipped_files) if ts.report else (),
        sum(t.labels.get("states") == INFERRED_LABEL["states"] for t in metas),
    )


def _set_warnings(infos: list[SetInfo]) -> list[str]:
    out = []
    for s in infos:
        if s.dropped:
            out.append(
                f"set {s.name}: {s.dropped} connection(s) spent no time in any state and were left out of occupancy"
            )
        if s.connections < MIN_SAMPLE:
            out.append(
                f"set {s.name}: only {s.connections} connection(s); per-state tests need at least {MIN_SAMPLE} "
                "per set and are not run (did the shell expand a glob? quote it, or give a directory)"
            )
        elif s.connections < 5:
            out.append(f"set {s.name}: only {s.connections} connections; tests have little power")
        if s.inferred:
            some = "" if s.inferred == s.traces else f"{s.inferred} of {s.traces} connections: "
            out.append(
                f"set {s.name}: {some}states inferred from qlog metrics, not logged by the stack "
                "(docs/metric-states.md: rules and measured accuracy)"
            )
        if len(s.controllers) > 1:
            out.append(
                f"set {s.name} mixes congestion controllers ({', '.join(s.controllers)}); "
                "select one with --where cc=NAME"
            )
    ccs = {s.name: s.controllers for s in infos}
    if len(set(ccs.values())) > 1:
        listing = "; ".join(f"{n}: {', '.join(c) or 'unknown'}" for n, c in ccs.items())
        out.append(f"sets use different congestion controllers ({listing}); their states differ by design")
    return out


def _edges_of(a: EdgeTable, b: EdgeTable) -> list[Edge2]:
    return sorted(set(a.edges) | set(b.edges))


def test_pairs(
    occ: dict[str, OccupancyTable],
    edges: dict[str, EdgeTable],
    states: Sequence[str],
    index: Sequence[tuple[int, int]],
    names: Sequence[str],
    options: CompareOptions,
) -> tuple[list[PairComparison], int]:
    """Per-state and per-edge tests of every pair, corrected as one family each; (pairs, untested)."""
    raw_states = [
        (names[i], names[j], test_states(occ[names[i]], occ[names[j]], states, options.test)) for i, j in index
    ]
    raw_edges = []
    for i, j in index:
        a, b = edges[names[i]], edges[names[j]]
        es = _edges_of(a, b)
        raw_edges.append((es, [test_edge(a, b, e, options.edge_test) for e in es]))
    q_states = iter(correct([r.p_value for _, _, rs in raw_states for r in rs], options.correction))
    q_edges = iter(correct([r.p_value for _, rs in raw_edges for r in rs], options.correction))
    pairs: list[PairComparison] = []
    untested = 0
    for (na, nb, results), (es, eresults) in zip(raw_states, raw_edges):
        oa, ob = occ[na], occ[nb]
        srows = []
        for st, r in zip(states, results):
            q = next(q_states)
            untested += r.p_value is None
            ma = float(oa.column(st).mean()) if oa.n else 0.0
            mb = float(ob.column(st).mean()) if ob.n else 0.0
            srows.append(
                StateRow(
                    na,
                    nb,
                    st,
                    ma,
                    mb,
                    mb - ma,
                    r,
                    q,
                    q is not None and q < options.alpha,
                    oa.visited(st),
                    ob.visited(st),
                    oa.n,
                    ob.n,
                )
            )
        erows = []
        for e, r in zip(es, eresults):
            q = next(q_edges)
            ka, sa = edge_counts(edges[na], e)
            kb, sb = edge_counts(edges[nb], e)
            erows.append(
                EdgeRow(
                    na,
                    nb,
                    e[0],
                    e[1],
                    ka / sa if sa else None,
                    kb / sb if sb else None,
                    ka,
                    kb,
                    sa,
                    sb,
                    r,
                    q,
                    q is not None and q < options.alpha,
                )
            )
        pairs.append(PairComparison(na, nb, tuple(srows), tuple(erows), None))
    return pairs, untested


test_pairs.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


def learn_connections(rows: Sequence[Connection], engine: str, view: StateView, **opts: Any) -> AnnotatedModel:
    """:func:`quicsm.pipeline.learn` from connection rows (the same model as from their traces)."""
    return learn(rows_summary(rows, view), engine, **opts)


def compare(sets: Sequence[TraceSet], options: CompareOptions = CompareOptions()) -> Comparison:
    """Compare two or more trace sets: the whole analysis of ``quicsm compare``.

    Per state, the per-connection shares of time are tested between sets (Welch's t or Mann-Whitney U,
    corrected over all states of all pairs); per edge of the directly-follows model, the probabilities
    (connections as units); per set, a model is learnt and the models' differences are listed.

    Parameters
    ----------
    sets : sequence of TraceSet
        What :func:`quicsm.build_sets` read, for ``options.view``; the first is the baseline.
    options : CompareOptions
        Tests, correction, bootstrap, model engine, pairs.

    Returns
    -------
    Comparison
        Every test with raw and corrected p-values and effect sizes, the occupancy summaries with
        bootstrap CIs, the models and their differences, and warnings (never NaN or an exception for
        a state one set never visits or a set too small to test).

    Raises
    ------
    quicsm.errors.InputError
        Fewer than two sets, equal names, an empty set, a set read for another view, or bad options.

    See Also
    --------
    quicsm.compare.report : the writers (text, JSON, CSV, Markdown); :mod:`quicsm.compare.html`.

    Examples
    --------
    >>> import quicsm
    >>> sets = quicsm.build_sets([TRACES / "fig13/desktop", TRACES / "fig13/mobile"])
    >>> c = quicsm.compare_sets(sets, quicsm.CompareOptions(resamples=0))
    >>> r = next(r for r in c.pairs[0].states if r.state == "ApplicationLimited")
    >>> (round(r.difference, 3), r.significant, r.result.effect_measure)
    (0.374, True, 'hedges_g')
    """
    options.check()
    if len(sets) < 2:
        raise InputError(f"need at least two trace sets to compare, got {len(sets)}")
    names = [s.name for s in sets]
    if len(set(names)) != len(names):
        raise InputError(f"set names must differ: {', '.join(names)}")
    view = options.view
    for s in sets:
        if not s.rows:
            raise InputError(f"set {s.name} ({s.origin or 'no origin'}) holds no connection; nothing to compare")
        if s.view != view:
            raise InputError(f"set {s.name} was read for another state view ({s.view}) than the comparison's ({view})")
    rows = {s.name: s.rows for s in sets}
    occ = {s.name: occupancy_table(rows[s.name]) for s in sets}
    infos = [_set_info(s, occ[s.name]) for s in sets]
    warnings = _set_warnings(infos)
    states = tuple(sorted({st for o in occ.values() for st in o.states}))
    summaries = {
        s.name: summarise(
            occ[s.name],
            states,
            resamples=options.resamples,
            confidence=options.confidence,
            rng=np.random.default_rng([options.seed, i]),
        )
        for i, s in enumerate(sets)
    }
    for st in states:
        missing = [n for n in names if occ[n].visited(st) == 0]
        if missing and len(missing) < len(names):
            warnings.append(f"state {st} never visited in set(s) {', '.join(missing)} (share 0 there)")
    edges = {s.name: edge_table(rows[s.name]) for s in sets}
    pairs, untested = test_pairs(occ, edges, states, pairs_for(len(sets), options.all_pairs), names, options)
    if untested:
        warnings.append(f"{untested} state test(s) could not be run; see the notes column")

    models: dict[str, AnnotatedModel] = {}
    if options.models:
        opts = {} if options.k is None else {"k": options.k}
        for s in sets:
            try:
                models[s.name] = learn_connections(rows[s.name], options.engine, view, **opts)
            except InferenceError as exc:
                warnings.append(
                    f"set {s.name}: no {options.engine} model ({exc}); no model difference or diagram for it"
                )
        for k, p in enumerate(pairs):
            if p.a not in models or p.b not in models:
                continue
            md = diff_models(
                models[p.a].model,
                models[p.b].model,
                names=(p.a, p.b),
                rows=(rows[p.a], rows[p.b]),
                limit=options.witnesses,
            )
            pairs[k] = PairComparison(p.a, p.b, p.states, p.edges, md)
    unions: dict[tuple[str, str], AnnotatedModel] = {}
    for p in pairs if options.models else ():
        try:
            unions[(p.a, p.b)] = learn_connections([*rows[p.a], *rows[p.b]], "dfg", view)
        except InferenceError as exc:
            warnings.append(f"sets {p.a} and {p.b}: no union model ({exc}); no diff diagram for them")
    timelines = {s.name: s.timeline_traces(options.timelines) for s in sets} if options.timelines > 0 else {}
    rate_logs = rate_logs_for(t for ts in timelines.values() for t in ts)
    return Comparison(
        options, infos, states, summaries, pairs, warnings, models, list(sets), occ, edges, unions, timelines, rate_logs
    )
