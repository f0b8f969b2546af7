"""The bundled testbed traces (quic-go v0.65 server, 50 Mbit/s, 36 ms RTT; desktop vs 10 % CPU client).

The paper's Fig. 13 direction must come out of ``quicsm compare`` with statistics, and random splits
of one scenario must not be flagged beyond chance.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from quicsm.compare import CompareOptions, compare, sets_from_inputs
from quicsm.compare.calibration import calibrate

FIG13 = Path(__file__).resolve().parents[2] / "traces" / "fig13"
pytestmark = pytest.mark.skipif(
    not (FIG13 / "desktop").is_dir() or not (FIG13 / "mobile").is_dir(), reason="bundled traces/fig13 not present"
)


@pytest.fixture(scope="module")
def sets():
    return sets_from_inputs([str(FIG13 / "desktop"), str(FIG13 / "mobile")])


def test_throttled_client_is_application_limited_significantly_more(sets) -> None:
    assert all(len(s) >= 10 for s in sets)
    for test in ("welch", "mwu"):
        c = compare(sets, CompareOptions(test=test, resamples=500, models=False))
        al = next(r for r in c.pairs[0].states if r.state == "ApplicationLimited")
        assert al.significant and al.p_corrected < 0.01, test
        assert al.mean_b > 2 * al.mean_a and al.difference > 0.2
        assert not any("different congestion controllers" in w for w in c.warnings)


@pytest.mark.parametrize("scenario", ["desktop", "mobile"])
def test_random_splits_of_one_scenario_are_not_flagged_beyond_chance(sets, scenario: str) -> None:
    rows = next(s for s in sets if s.name == scenario).rows
    cal = calibrate(rows, splits=150, options=CompareOptions(models=False), edge_tests=("cluster",), seed=3)
    # at alpha = 0.01 after Holm; 150 splits: more than 6 flagged splits has probability < 0.1 % if calibrated
    assert cal.states.familywise <= 0.04
    assert cal.edges["cluster"].familywise <= 0.04
