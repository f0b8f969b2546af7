"""The gate's tolerances (``check.toml``): what to ignore, how large a change must be, alpha.

Declared once as msgspec structs and decoded from TOML with them, so a wrong key or type is an
error naming the file and the field. Per-state and per-edge sections override the defaults; their
keys may be glob patterns (``"ProbeBw.*"``, ``"* -> TERMINAL"``), the first matching section in file
order wins after an exact name::

    alpha = 0.01
    [states.ApplicationLimited]
    min_effect = 0.05            # share of connection time, absolute
    [states."ProbeBw.*"]
    ignore = true
    [edges."CongestionAvoidance -> ApplicationLimited"]
    alpha = 0.001
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Annotated, Literal

import msgspec

from quicsm.formats import checked

__all__ = ["CheckConfig", "Tolerance", "Resolved", "load_config", "parse_config", "edge_key"]

Alpha = Annotated[float, msgspec.Meta(gt=0, lt=1)]
Effect = Annotated[float, msgspec.Meta(ge=0)]
Support = Annotated[int, msgspec.Meta(ge=1)]
MAX_CONFIG_BYTES = 1 << 20
EDGE_KEY = re.compile(r"^\s*(\S+)\s*->\s*(\S+)\s*$")


def edge_key(src: str, dst: str) -> str:
    """How an edge is named in the config and the outputs: ``"SlowStart -> Recovery"``."""
    return f"{src} -> {dst}"


class Tolerance(msgspec.Struct, forbid_unknown_fields=True):
    """One state's or edge's overrides; unset fields take the top-level value."""

    ignore: bool = False
    """Neither tested nor reported as a failure (still listed, marked ignored)."""
    alpha: Alpha | None = None
    min_effect: Effect | None = None
    """States: absolute change of the mean time share (0.02 = 2 points); edges: of the probability; paths:
    of the share of connections showing it."""
    min_visits_effect: Effect | None = None
    """States only: change of the mean entries per connection, relative to the baseline's mean (at least 1)."""
    min_support: Support | None = None
    """Connections that must show a new (or have shown a gone) state or edge for it to count."""


class CheckConfig(msgspec.Struct, forbid_unknown_fields=True):
    """Top-level defaults (chosen from the calibration in experiments/check_calibration.md)."""

    alpha: Alpha = 0.01
    """Family-wise level: every test of one check (occupancy, visits, edges, all scenarios) is one family."""
    correction: Literal["holm", "bonferroni", "bh", "none"] = "holm"
    test: Literal["welch", "mwu"] = "welch"
    """Per-connection test of time shares and of visit counts."""
    edge_test: Literal["cluster", "z", "chi2"] = "cluster"
    min_effect: Effect = 0.03
    min_edge_effect: Effect = 0.05
    min_visits_effect: Effect = 0.5
    min_path_effect: Effect = 0.5
    """Paths both sets show: change of the share of connections showing it."""
    min_support: Support = 3
    path_length: Annotated[int, msgspec.Meta(ge=0, le=6)] = 3
    """Runs of this many consecutive states (with INITIAL/TERMINAL) are tested by the share of connections showing them
    (new, gone or moved), e.g. ``SlowStart -> CongestionAvoidance -> Recovery``; below 3 turns it off."""
    controller: Literal["fail", "warn"] = "fail"
    """A different congestion controller name in the new runs (reno -> cubic) fails the check, or only warns."""
    states: dict[str, Tolerance] = {}
    edges: dict[str, Tolerance] = {}
    paths: dict[str, Tolerance] = {}

    def __post_init__(self) -> None:
        for key in self.edges:
            if not EDGE_KEY.match(key):
                raise msgspec.ValidationError(f"edge key {key!r} is not of the form 'SOURCE -> DESTINATION'")
        for key in self.paths:
            if "->" not in key:
                raise msgspec.ValidationError(f"path key {key!r} is not of the form 'A -> B -> C'")

    def for_state(self, state: str) -> Resolved:
        return self._resolve(_lookup(self.states, state), self.min_effect)

    def for_edge(self, src: str, dst: str) -> Resolved:
        normal = {_norm(k): v for k, v in self.edges.items()}
        return self._resolve(_lookup(normal, edge_key(src, dst)), self.min_edge_effect)

    def for_path(self, path: str) -> Resolved:
        normal = {" -> ".join(p.strip() for p in k.split("->")): v for k, v in self.paths.items()}
        return self._resolve(_lookup(normal, path), self.min_path_effect)

    def _resolve(self, t: Tolerance | None, min_effect: float) -> Resolved:
        t = t or Tolerance()
        return Resolved(
            t.ignore,
            self.alpha if t.alpha is None else t.alpha,
            min_effect if t.min_effect is None else t.min_effect,
            self.min_visits_effect if t.min_visits_effect is None else t.min_visits_effect,
            self.min_support if t.min_support is None else t.min_support,
        )

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = msgspec.to_builtins(self)
        return out


@dataclass(frozen=True, slots=True)
class Resolved:
    """The tolerances that apply to one state or edge."""

    ignore: bool
    alpha: float
    min_effect: float
    min_visits_effect: float
    min_support: int


def _norm(key: str) -> str:
    m = EDGE_KEY.match(key)
    return edge_key(m.group(1), m.group(2)) if m else key


def _lookup(table: dict[str, Tolerance], name: str) -> Tolerance | None:
    if name in table:
        return table[name]
    return next((t for k, t in table.items() if fnmatchcase(name, k)), None)


def parse_config(text: str | bytes | bytearray, source: str = "<config>") -> CheckConfig:
    """A check config (TOML) as :class:`CheckConfig`; errors name the source, the line and why."""
    return checked(text, CheckConfig, source, what="TOML")


def load_config(path: str | None) -> CheckConfig:
    """The config at ``path``, or the defaults when ``path`` is None."""
    if path is None:
        return CheckConfig()
    from quicsm.files import read_limited

    return parse_config(read_limited(path, MAX_CONFIG_BYTES, "a check config (TOML)"), path)
