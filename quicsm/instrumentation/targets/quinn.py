"""quinn: the Rust crate ``quinn-proto`` (a copy of its crate root, e.g. the crates.io registry source).

Its ``src/congestion/bbr/mod.rs`` is a port of Chromium's BBR v1 ``BbrSender`` (Startup, Drain, ProbeBw with
the eight-step gain cycle, ProbeRtt, and the Conservation/Growth recovery sub-states), beside
``cubic.rs`` and ``new_reno.rs``; it has been there since quinn-proto 0.8 (2021-10). Eras follow the
controller file's API:

* ``qp-a``: 0.8 .. 0.9, no ``on_mtu_update`` (to 2023-05-02);
* ``qp-b``: ``on_mtu_update`` (0.10 .. 0.11.9), rand 0.8 (``StdRng::from_entropy``, ``gen_range``);
* ``qp-c``: rand 0.9 (``from_os_rng``, ``random_range``; 0.11.10 .. 0.11.15, from 2025-01-30);
* ``qp-d``: the gain-cycle RNG is ``Pcg32`` (rand 0.10; 0.11.16 on, from 2026-06-04).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from quicsm.instrumentation.targets import Identity, Located, register
from quicsm.instrumentation.targets._rust import RustFunctions, cargo_crate_version

__all__ = ["ERA_DATES", "QuinnTarget", "crate_version"]

ERA_DATES: dict[str, tuple[str, str]] = {
    "qp-a": ("2021-10-30", "2023-05-02"),
    "qp-b": ("2023-05-03", "2025-01-29"),
    "qp-c": ("2025-01-30", "2026-06-03"),
    "qp-d": ("2026-06-04", "9999-12-31"),
}
"""Era -> dates it can cover (quinn history: BBR added 2021-10-30, ``on_mtu_update`` 2023-05-03, rand 0.9
on 2025-01-30, the PCG gain-cycle RNG on 2026-06-04)."""

# (feature, regex) looked for in bbr/mod.rs, newest evidence last.
_FEATURES: tuple[tuple[str, str], ...] = (
    ("on_mtu_update", r"\bfn on_mtu_update\("),
    ("metrics", r"\bfn metrics\(&self\) -> ControllerMetrics"),
    ("rand_0_8", r"\bStdRng::from_entropy\(\)"),
    ("rand_0_9", r"\bStdRng::from_os_rng\(\)"),
    ("pcg32", r"\bPcg32::from_rng\("),
    ("quicsm_instrumented", r"\bquicsm_log\b"),
)


def crate_version(located: Located) -> str | None:
    """The ``version`` of the crate's Cargo.toml, when the tree is a quinn-proto crate root."""
    return cargo_crate_version(located, "quinn-proto")


class QuinnTarget(RustFunctions):
    name: ClassVar[str] = "quinn"
    description: ClassVar[str] = "quinn-proto crate root (src/congestion/bbr, src/congestion)"
    eras: ClassVar[tuple[str, ...]] = tuple(ERA_DATES)
    algorithm_files: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "bbr": ("mod.rs", "bw_estimation.rs", "min_max.rs"),
        "cubic": ("cubic.rs",),
        "reno": ("new_reno.rs",),
    }
    classes: ClassVar[Mapping[str, str]] = {
        "mod.rs": "Bbr",
        "bw_estimation.rs": "BandwidthEstimation",
        "min_max.rs": "MinMax",
        "cubic.rs": "Cubic",
        "new_reno.rs": "NewReno",
    }
    roots: ClassVar[tuple[str, ...]] = ("", "quinn-proto")
    dirs: ClassVar[tuple[str, ...]] = ("src/congestion/bbr", "src/congestion")
    extensions: ClassVar[tuple[str, ...]] = (".rs",)

    def locate(self, src: Path, *, loose: bool = True) -> Located | None:
        """Only a tree with ``src/congestion/bbr/bw_estimation.rs`` is quinn (``mod.rs`` alone says nothing)."""
        found = super().locate(src, loose=loose)
        if found is None or "bw_estimation.rs" not in found.files:
            return None
        return found

    def identify(self, located: Located) -> Identity:
        """Era from the controller file's API (module docstring); the crate version as evidence."""
        text = located.read("mod.rs") or ""
        features: dict[str, str] = {}
        for feature, pattern in _FEATURES:
            m = re.search(pattern, text)
            if m:
                features[feature] = f"mod.rs: {m.group(0)}"
        notes: list[str] = []
        if "pcg32" in features:
            era = "qp-d"
        elif "rand_0_9" in features:
            era = "qp-c"
        elif "on_mtu_update" in features:
            era = "qp-b"
        elif text:
            era = "qp-a"
        else:
            era = self.eras[-1]
            notes.append("no bbr/mod.rs readable; era guessed as the newest")
        version = crate_version(located)
        if version:
            features["version"] = version
        lo, hi = ERA_DATES[era]
        return Identity(era, self.algorithms(located), features, lo, hi, tuple(notes))


register(QuinnTarget())
