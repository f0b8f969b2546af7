"""Canonical congestion-control state names and the mapping from each stack's own spelling.

Patch sets emit canonical names directly; qlog producers (quic-go, Cloudflare quiche, mvfst, neqo) and
Chromium's enum names are mapped here. A name that is not known is kept as written, never dropped.
"""

from __future__ import annotations

import re

__all__ = [
    "INIT",
    "is_known_state",
    "numeric_state",
    "CUBIC_STATES",
    "BBR_STATES",
    "BBR2_PHASES",
    "CONTROLLERS",
    "canonical_state",
    "split_state",
    "state_family",
    "FAMILIES",
]

INIT = "Init"

CUBIC_STATES: tuple[str, ...] = (
    "Init",
    "SlowStart",
    "CongestionAvoidance",
    "CongestionAvoidanceMaxed",
    "ApplicationLimited",
    "Recovery",
    "TailLossProbe",
    "RetransmissionTimeout",
    "ProbeTimeout",
)
BBR_STATES: tuple[str, ...] = ("Init", "Startup", "Drain", "ProbeBw", "ProbeRtt")
BBR2_PHASES: tuple[str, ...] = ("Down", "Cruise", "Refill", "Up")
BBR_RECOVERY: tuple[str, ...] = ("NotInRecovery", "Conservation", "Growth")
CONTROLLERS: tuple[str, ...] = ("cubic", "reno", "bbr", "bbr2", "bbr3")

_KEY = re.compile(r"[^a-z0-9]")


def _norm(name: str) -> str:
    return _KEY.sub("", name.lower())


# Spellings seen in the wild, normalised (lower case, no separators) -> canonical "State[.Phase]".
_ALIASES: dict[str, str] = {}


def _alias(canonical: str, *names: str) -> None:
    for n in (canonical, *names):
        _ALIASES[_norm(n)] = canonical


for _s in CUBIC_STATES + BBR_STATES:
    _alias(_s)
_alias("Init", "initial", "init_state", "start")
# quic-go, Cloudflare quiche, neqo (qlog strings), mvfst (Cubic state enum)
# quiche's HyStart++ logs its conservative phase as its own state; it is still slow start
_alias("SlowStart", "slow_start", "hystart", "SLOW_START", "conservative_slow_start", "css")
_alias("CongestionAvoidance", "congestion_avoidance", "steady", "avoidance")
_alias("CongestionAvoidanceMaxed", "congestion_avoidance_maxed", "max_cwnd", "cwnd_maxed")
_alias("ApplicationLimited", "application_limited", "app_limited", "applimited")
_alias(
    "Recovery",
    "recovery",
    "fast_recovery",
    "FastRecovery",
    "recovery_start",
    "RecoveryStart",
    "recovery_period",
    "conservative_recovery",
)
_alias("TailLossProbe", "tail_loss_probe", "tlp", "TLP_MODE")
_alias("RetransmissionTimeout", "retransmission_timeout", "rto", "RTO_MODE", "persistent_congestion")
_alias("ProbeTimeout", "probe_timeout", "pto", "PTO_MODE")
# Chromium / quiche BBR enums and Cloudflare quiche's bbr_* strings
_alias("Startup", "STARTUP", "bbr_startup", "bbr2_startup")
_alias("Drain", "DRAIN", "bbr_drain", "bbr2_drain")
_alias("ProbeBw", "PROBE_BW", "bbr_probe_bw", "bbr2_probe_bw", "probebw")
_alias("ProbeRtt", "PROBE_RTT", "bbr_probe_rtt", "bbr2_probe_rtt", "probertt")
for _p in BBR2_PHASES:
    _alias(
        f"ProbeBw.{_p}",
        f"bbr_probe_bw_{_p}",
        f"bbr2_probe_bw_{_p}",
        f"PROBE_{_p}",
        f"probe_bw_{_p}",
        f"ProbeBw{_p}",
    )

# picoquic logs its controllers' numeric alg_state (cc_common.h, newreno.c, cubic.c, bbr.c).
_PICOQUIC_NUMERIC: dict[str, tuple[str, ...]] = {
    "reno": ("SlowStart", "CongestionAvoidance"),
    "cubic": ("SlowStart", "Recovery", "CongestionAvoidance"),
    "bbr": ("Startup", "Drain", "ProbeBw", "ProbeRtt"),
}
_PICOQUIC_NUMERIC["newreno"] = _PICOQUIC_NUMERIC["reno"]
_PICOQUIC_NUMERIC["bbr2"] = _PICOQUIC_NUMERIC["bbr"]
_PICOQUIC_NUMERIC["bbr3"] = _PICOQUIC_NUMERIC["bbr"]


def numeric_state(value: str, cc: str | None) -> str | None:
    """A picoquic numeric ``cc_state`` under controller ``cc`` (NewReno, picoquic's default, if unknown)."""
    table = _PICOQUIC_NUMERIC.get((cc or "reno").lower())
    if table is None or not value.isdigit() or int(value) >= len(table):
        return None
    return table[int(value)]


_KNOWN = frozenset(CUBIC_STATES + BBR_STATES)


def is_known_state(name: str) -> bool:
    """Whether a canonical name is one quicsm knows (unknown ones are kept verbatim and listed)."""
    return split_state(name)[0] in _KNOWN


FAMILIES: dict[str, str] = {
    "Init": "init",
    "SlowStart": "startup",
    "Startup": "startup",
    "CongestionAvoidance": "steady",
    "CongestionAvoidanceMaxed": "steady",
    "ProbeBw": "steady",
    "Drain": "drain",
    "ApplicationLimited": "limited",
    "Recovery": "recovery",
    "TailLossProbe": "timeout",
    "RetransmissionTimeout": "timeout",
    "ProbeTimeout": "timeout",
    "ProbeRtt": "probe_rtt",
    "INITIAL": "terminal",
    "TERMINAL": "terminal",
}


_CACHE: dict[str, str] = {}


def canonical_state(name: str) -> str:
    """Return the canonical ``State`` or ``State.Phase`` for a stack's state name; unknown names as is."""
    hit = _CACHE.get(name)
    if hit is None:
        hit = _canonical(name)
        if len(_CACHE) < 4096:
            _CACHE[name] = hit
    return hit


def _canonical(name: str) -> str:
    if not name:
        return name
    hit = _ALIASES.get(_norm(name))
    if hit is not None:
        return hit
    if "." in name:  # canonical state with a phase we don't list (e.g. ProbeBw.Cycle3): map the state part
        state, _, phase = name.partition(".")
        base = _ALIASES.get(_norm(state))
        if base is not None and "." not in base:
            return f"{base}.{phase}"
    return name


def split_state(name: str) -> tuple[str, str | None]:
    """``"ProbeBw.Up"`` -> ``("ProbeBw", "Up")``; ``"SlowStart"`` -> ``("SlowStart", None)``."""
    state, dot, phase = name.partition(".")
    return (state, phase) if dot else (state, None)


def state_family(name: str) -> str:
    """Colour family of a state (startup, steady, limited, recovery, timeout, ...), ``other`` if unknown."""
    return FAMILIES.get(split_state(name)[0], "other")
