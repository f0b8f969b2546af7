from __future__ import annotations

import pytest

from quicsm.traces.states import BBR_STATES, CUBIC_STATES, canonical_state, split_state, state_family


@pytest.mark.parametrize(
    "name, canonical",
    [
        ("slow_start", "SlowStart"),  # quic-go / Cloudflare quiche / neqo
        ("congestion_avoidance", "CongestionAvoidance"),
        ("application_limited", "ApplicationLimited"),
        ("recovery", "Recovery"),
        ("bbr_startup", "Startup"),  # Cloudflare quiche gcongestion
        ("bbr_probe_bw_up", "ProbeBw.Up"),
        ("bbr_probe_bw_cruise", "ProbeBw.Cruise"),
        ("bbr_probe_rtt", "ProbeRtt"),
        ("PROBE_BW", "ProbeBw"),  # Chromium enums
        ("PROBE_REFILL", "ProbeBw.Refill"),
        ("Steady", "CongestionAvoidance"),  # mvfst
        ("FastRecovery", "Recovery"),
    ],
)
def test_stack_names_map_to_canonical(name: str, canonical: str) -> None:
    assert canonical_state(name) == canonical


def test_canonical_names_are_fixed_points() -> None:
    for s in CUBIC_STATES + BBR_STATES:
        assert canonical_state(s) == s


def test_unknown_names_are_kept() -> None:
    assert canonical_state("my_new_state") == "my_new_state"
    assert state_family("my_new_state") == "other"


def test_phase_split() -> None:
    assert split_state("ProbeBw.Up") == ("ProbeBw", "Up")
    assert split_state("Recovery") == ("Recovery", None)
    assert state_family("ProbeBw.Down") == state_family("ProbeBw")
