"""compare() on trace sets whose differences are known by construction."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace

import numpy as np
import pytest
from compare_fixtures import make_set, make_traces, trace_from_plan

from quicsm.compare import CompareOptions, TraceSet, compare
from quicsm.compare.calibration import calibrate
from quicsm.compare.html import to_html
from quicsm.compare.occupancy import occupancy_table
from quicsm.compare.report import to_json, to_text
from quicsm.compare.stays import connections
from quicsm.errors import InputError, OptionError

FAST = CompareOptions(resamples=200)


def row(c, state, pair=0):
    return next(r for r in c.pairs[pair].states if r.state == state)


def test_occupancy_shares_are_the_constructed_ones() -> None:
    plan = [
        ("SlowStart", 100_000),
        ("CongestionAvoidance", 300_000),
        ("ApplicationLimited", 500_000),
        ("CongestionAvoidance", 100_000),
    ]
    occ = occupancy_table(connections([trace_from_plan("t", plan)]))
    shares = dict(zip(occ.states, occ.shares[0]))
    assert shares == pytest.approx({"SlowStart": 0.1, "CongestionAvoidance": 0.4, "ApplicationLimited": 0.5})
    assert "Init" not in occ.states  # instantaneous: no share, not tested


def test_more_application_limited_in_b_is_detected() -> None:
    a = make_set("desktop", 12, 0.08, seed=1)
    b = make_set("throttled", 12, 0.55, seed=2)
    c = compare([a, b], FAST)
    al = row(c, "ApplicationLimited")
    assert al.significant and al.difference > 0.35 and al.p_corrected < 1e-6
    assert al.result.effect_size > 2 and al.result.effect_measure == "hedges_g"
    ca = row(c, "CongestionAvoidance")
    assert ca.significant and ca.difference < 0
    ss = row(c, "SlowStart")
    assert not ss.significant  # slow start is drawn the same way in both sets
    summary = {s.state: s for s in c.summaries["throttled"]}["ApplicationLimited"]
    assert summary.ci_low < summary.mean < summary.ci_high
    assert abs(summary.mean - al.mean_b) < 1e-12


def test_mann_whitney_option_reports_rank_biserial() -> None:
    c = compare(
        [make_set("a", 10, 0.1, seed=3), make_set("b", 10, 0.6, seed=4)], CompareOptions(test="mwu", resamples=0)
    )
    al = row(c, "ApplicationLimited")
    assert al.result.test == "mwu" and al.result.effect_measure == "rank_biserial"
    assert al.result.effect_size == pytest.approx(1.0) and al.significant


def test_identical_distributions_are_not_flagged_beyond_chance() -> None:
    flagged = 0
    runs = 25
    for seed in range(runs):
        c = compare(
            [make_set("a", 10, 0.3, seed=100 + seed, spread=0.1), make_set("b", 10, 0.3, seed=500 + seed, spread=0.1)],
            CompareOptions(resamples=0, models=False),
        )
        flagged += any(r.significant for r in c.pairs[0].states) or any(e.significant for e in c.pairs[0].edges)
    # P(>= 3 of 25 | familywise rate 0.02) < 1.5 %: a miscalibrated test fails this, a calibrated one passes
    assert flagged <= 2


def test_random_splits_of_one_scenario_keep_the_false_positive_rate() -> None:
    pool = make_set("same", 30, 0.3, seed=9, spread=0.1)
    cal = calibrate(pool.rows, splits=120, options=CompareOptions(models=False), edge_tests=("cluster",), seed=1)
    assert cal.states.tests > 300
    assert cal.states.familywise <= 0.05  # binomial(120, 0.01): P(> 6) < 0.1 %
    assert cal.states.raw <= 0.03
    assert cal.edges["cluster"].familywise <= 0.05


def test_same_seed_same_numbers() -> None:
    sets = [make_set("a", 8, 0.1, seed=1), make_set("b", 8, 0.5, seed=2)]
    one = json.dumps(to_json(compare(sets, CompareOptions(resamples=300, seed=4))))
    two = json.dumps(to_json(compare(sets, CompareOptions(resamples=300, seed=4))))
    assert one == two


def test_state_missing_in_one_set_is_said_and_still_tested() -> None:
    a = make_set("a", 8, 0.2, seed=1, recovery=True)
    b = make_set("b", 8, 0.2, seed=2, recovery=False)
    c = compare([a, b], FAST)
    assert any("Recovery never visited in set(s) b" in w for w in c.warnings)
    rec = row(c, "Recovery")
    assert rec.visited_b == 0 and rec.mean_b == 0.0 and rec.result.p_value is not None
    edges_only = [e for e in c.pairs[0].edges if e.only_in == "a"]
    assert any(e.dst == "Recovery" for e in edges_only)
    back = [e for e in c.pairs[0].edges if e.src == "Recovery"]
    assert back and all(e.result.p_value is None and "never left" in e.result.note for e in back)
    assert c.pairs[0].models.states_only_in_a == ("Recovery",)


def test_too_few_connections_is_said_not_crashed() -> None:
    a = make_set("a", 1, 0.2, seed=1)
    b = make_set("b", 6, 0.5, seed=2)
    c = compare([a, b], FAST)
    assert any("only 1 connection" in w for w in c.warnings)
    assert all(r.result.p_value is None and "too few connections" in r.result.note for r in c.pairs[0].states)
    assert not any(r.significant for r in c.pairs[0].states)
    text = to_text(c)
    assert "too few connections" in text and "nan" not in text.lower()
    json.dumps(to_json(c), allow_nan=False)
    assert all(s.ci_low is None for s in c.summaries["a"])  # one connection: no interval


def test_different_controllers_are_said() -> None:
    a = make_set("a", 5, 0.2, seed=1, cc="cubic")
    b = make_set("b", 5, 0.2, seed=2, cc="reno")
    c = compare([a, b], FAST)
    assert any("different congestion controllers" in w and "reno" in w for w in c.warnings)


def test_zero_length_connection_is_dropped_with_a_warning() -> None:
    a = make_set("a", 5, 0.2, seed=1)
    lone = trace_from_plan("lone", [("SlowStart", 0)])
    a = TraceSet.from_traces("a", (*make_traces("a", 5, 0.2, seed=1), lone))
    c = compare([a, make_set("b", 5, 0.2, seed=2)], FAST)
    assert c.sets[0].dropped == 1 and c.sets[0].connections == 5
    assert any("spent no time" in w for w in c.warnings)


def test_empty_set_and_single_set_are_errors() -> None:
    with pytest.raises(InputError, match="holds no connection"):
        compare([TraceSet("a", ()), make_set("b", 3, 0.2, seed=1)])
    with pytest.raises(InputError, match="at least two"):
        compare([make_set("b", 3, 0.2, seed=1)])
    with pytest.raises(OptionError, match="unknown test"):
        compare([make_set("a", 3, 0.2, seed=1), make_set("b", 3, 0.2, seed=2)], CompareOptions(test="t"))


def test_n_way_baseline_and_all_pairs() -> None:
    sets = [make_set("v1", 8, 0.1, seed=1), make_set("v2", 8, 0.1, seed=2), make_set("v3", 8, 0.6, seed=3)]
    base = compare(sets, FAST)
    assert [(p.a, p.b) for p in base.pairs] == [("v1", "v2"), ("v1", "v3")]
    assert not row(base, "ApplicationLimited", 0).significant
    assert row(base, "ApplicationLimited", 1).significant
    every = compare(sets, CompareOptions(resamples=200, all_pairs=True))
    assert [(p.a, p.b) for p in every.pairs] == [("v1", "v2"), ("v1", "v3"), ("v2", "v3")]
    # Holm over all 3 x states tests: corrected p is at least the raw p times 1
    for p in every.pairs:
        for r in p.states:
            if r.result.p_value is not None:
                assert r.p_corrected >= r.result.p_value


def test_edge_probability_difference_known_by_construction() -> None:
    rng = random.Random(5)

    def conn(i: int, p_rec: float) -> object:
        plan = [("SlowStart", 50_000)]
        for _ in range(20):
            plan.append(("CongestionAvoidance", 40_000))
            plan.append(("Recovery" if rng.random() < p_rec else "ApplicationLimited", 10_000))
        return trace_from_plan(f"c{i}", plan, rng=rng)

    a = TraceSet.from_traces("a", [conn(i, 0.1) for i in range(15)])
    b = TraceSet.from_traces("b", [conn(100 + i, 0.6) for i in range(15)])
    c = compare([a, b], FAST)
    e = next(e for e in c.pairs[0].edges if (e.src, e.dst) == ("CongestionAvoidance", "Recovery"))
    assert e.significant and e.difference == pytest.approx(e.prob_b - e.prob_a) and 0.35 < e.difference < 0.65
    assert math.isclose(e.prob_a, e.count_a / e.out_a)
    assert np.isfinite(e.result.statistic)


def test_set_without_any_state_is_said_not_crashed() -> None:
    from quicsm.traces.events import Trace, TraceEvent

    blank = TraceSet.from_traces("blank", [Trace("b0", "cubic", [TraceEvent(5, "SlowStart", kind="metrics", cwnd=1)])])
    c = compare([make_set("a", 4, 0.2, seed=1), blank], replace(FAST, timelines=1))
    assert any("blank" in w and f"no {FAST.engine} model" in w for w in c.warnings)
    assert any("spent no time" in w for w in c.warnings)
    assert c.pairs[0].models is None
    assert all(r.result.p_value is None for r in c.pairs[0].states)
    json.dumps(to_json(c), allow_nan=False)
    html = to_html(c)
    assert "blank" in html and 'class="heatmap"' in html
