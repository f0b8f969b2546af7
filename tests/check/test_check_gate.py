"""The gate's decision on synthetic connections whose change is known by construction."""

from __future__ import annotations

import pytest
from check_fixtures import make_rows

from quicsm.check import check, make_baseline, parse_config
from quicsm.check.gate import witness_text
from quicsm.errors import InputError


@pytest.fixture(scope="module")
def base():
    return make_baseline([("s", "synthetic", make_rows("base", 20, seed=1))])


def test_same_behaviour_passes(base) -> None:
    res = check(base, make_rows("new", 20, seed=2), models=False)
    assert not res.changed and res.exit_code == 0
    assert any(f.p_corrected is not None for f in res.findings), "tests ran"
    kinds = {(f.kind, f.check) for f in res.findings}
    assert {("state", "occupancy"), ("state", "visits"), ("edge", "probability"), ("controller", "controller")} <= kinds


def test_extra_recovery_entry_fails_naming_recovery_with_a_witness(base) -> None:
    res = check(base, make_rows("new", 20, seed=2, extra_recovery=True), models=False)
    assert res.changed and res.exit_code == 1
    failed = {(f.kind, f.item, f.check) for f in res.failures}
    assert ("state", "Recovery", "occupancy") in failed  # 1.9% -> 6.7% of the time
    new_edge = next(f for f in res.failures if f.item == "SlowStart -> Recovery")
    assert new_edge.check == "new" and new_edge.support == (0, 20)
    w = new_edge.witness
    assert w is not None and w.connection.startswith("new-") and w.path[-2:] == ("SlowStart", "Recovery")
    assert "SlowStart Recovery" in witness_text(w)


def test_tolerances_ignore_and_min_effect(base) -> None:
    changed = make_rows("new", 20, seed=2, extra_recovery=True)
    cfg = parse_config(
        """
        [states.Recovery]
        ignore = true
        [edges."SlowStart -> *"]
        ignore = true
        [edges."Recovery -> *"]
        ignore = true
        [states.SlowStart]
        min_effect = 0.9
        min_visits_effect = 9
        [states.CongestionAvoidance]
        min_effect = 0.9
        min_visits_effect = 9
        [states.ApplicationLimited]
        min_effect = 0.9
        min_visits_effect = 9
        [edges."* -> *"]
        min_effect = 0.9
        [paths."* -> * -> *"]
        ignore = true
        """
    )
    res = check(base, changed, cfg, models=False)
    assert not res.changed, [f.reason() for f in res.failures]
    rec = [f for f in res.findings if f.item == "Recovery"]
    assert rec and all(f.ignored and not f.failed for f in rec)


def test_controller_change_fails_or_warns(base) -> None:
    cubic = make_rows("new", 20, seed=2, cc="cubic")
    res = check(base, cubic, models=False)
    (f,) = [f for f in res.failures if f.kind == "controller"]
    assert "reno -> cubic" in f.reason()
    res = check(base, cubic, parse_config('controller = "warn"'), models=False)
    assert not res.changed


def test_one_family_over_scenarios_and_matching_by_label() -> None:
    a = make_rows("a", 12, seed=1, labels={"scenario": "x"}) + make_rows("b", 12, seed=3, labels={"scenario": "y"})
    base = make_baseline([("x", "", a[:12]), ("y", "", a[12:])], split_by="scenario")
    new = make_rows("c", 12, seed=4, labels={"scenario": "x"}) + make_rows(
        "d", 12, seed=5, labels={"scenario": "y"}, extra_recovery=True
    )
    res = check(base, new, models=False)
    assert [s.name for s in res.scenarios] == ["x", "y"]
    assert {f.scenario for f in res.failures} == {"y"}
    tested = [f for f in res.findings if f.p_corrected is not None]
    assert {f.scenario for f in tested} == {"x", "y"}
    with pytest.raises(InputError, match="no new connection has scenario=y"):
        check(base, new[:12], models=False)


def test_few_connections_new_or_gone_is_reported_but_not_failed(base) -> None:
    # one new connection with an extra Recovery: the new edge is shown by 1 of 20 (below support, not significant)
    new = make_rows("new", 19, seed=2) + make_rows("odd", 1, seed=9, extra_recovery=True)
    res = check(base, new, models=False)
    f = next(f for f in res.findings if f.item == "SlowStart -> Recovery" and f.check == "new")
    assert not f.failed and f.support == (0, 1) and f.witness is not None
    assert not res.changed


def test_no_new_connection_is_an_input_error(base) -> None:
    with pytest.raises(InputError, match="no connection to check"):
        check(base, [])


def test_a_change_of_order_alone_is_caught_as_a_new_path() -> None:
    """The injected-recovery experiment's shape: the same states, edges and counts, but Recovery comes
    right after slow start instead of later. Only the three-state paths tell the versions apart."""
    import random

    from check_fixtures import trace_from_plan

    from quicsm.compare.stays import connections

    def rows(name: str, early: bool, seed: int) -> list:
        rng = random.Random(seed)
        out = []
        for i in range(12):
            d = [int(rng.uniform(0.8, 1.2) * x) for x in (100_000, 300_000, 50_000, 400_000, 60_000, 300_000)]
            body = [("CongestionAvoidance", d[1]), ("ApplicationLimited", d[2])]
            rec = [("CongestionAvoidance", d[3]), ("Recovery", d[4])]
            mid = rec + body if early else body + rec
            plan = [("SlowStart", d[0]), *mid, ("CongestionAvoidance", d[5]), ("ApplicationLimited", d[2])]
            out.append(trace_from_plan(f"{name}-{i}", plan, cc="reno", rng=rng))
        return connections(out)

    base = make_baseline([("s", "", rows("b", False, 1))])
    same = check(base, rows("s", False, 2), models=False)
    assert not same.changed, [f.reason() for f in same.failures]
    res = check(base, rows("n", True, 2), models=False)
    assert not any(f.kind == "edge" and f.check in ("new", "gone") for f in res.findings), "no edge is new or gone"
    paths = {f.item: f for f in res.failures if f.kind == "path"}
    assert "SlowStart -> CongestionAvoidance -> Recovery" in paths
    f = paths["SlowStart -> CongestionAvoidance -> Recovery"]
    assert f.check == "new" and f.support == (0, 12) and f.witness is not None
    assert f.witness.path[-3:] == ("SlowStart", "CongestionAvoidance", "Recovery")
    off = check(base, rows("n", True, 2), parse_config("path_length = 0"), models=False)
    assert not any(f.kind == "path" for f in off.findings)
