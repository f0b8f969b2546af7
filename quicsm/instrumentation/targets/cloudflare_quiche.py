"""Cloudflare quiche: the Rust crate ``quiche`` (a copy of its crate root, e.g. the crates.io registry source).

Not to be confused with the ``quiche`` target (Google's C++ QUICHE inside Chromium). Since 0.24.0 its
``src/recovery/gcongestion/`` holds a Rust port of Chromium's BBRv2 sender next to the older
``src/recovery/congestion/`` (Reno, Cubic). Eras follow the layout:

* ``cfq-0``: Reno and Cubic keep their state in ``src/recovery/mod.rs``'s ``Recovery`` (0.20, 0.21);
* ``cfq-1``: that state moved to ``src/recovery/congestion/mod.rs``, loss detection still in
  ``src/recovery/mod.rs`` (0.22, from 2024-06-25; 0.23.0-0.23.5 add ``congestion/recovery.rs``, no gcongestion);
* ``cfq-a``: ``gcongestion/bandwidth.rs`` (0.24.x, from 2025-04);
* ``cfq-b``: ``Bandwidth`` moved up to ``src/recovery/bandwidth.rs`` (0.26 onwards).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from quicsm.instrumentation.targets import Identity, Located, Release, Target, read_source_file, register
from quicsm.instrumentation.targets._rust import cargo_crate_version

__all__ = ["ERA_DATES", "FEATURES", "CloudflareQuicheTarget", "crate_version"]

FEATURES = ["boringssl-boring-crate"]
"""The crate features the testbed's server builds quiche with (testbed/quiche-server/Cargo.toml)."""

ERA_DATES: dict[str, tuple[str, str]] = {
    "cfq-0": ("2020-03-25", "2024-06-25"),
    "cfq-1": ("2024-06-25", "2025-04-03"),
    "cfq-a": ("2025-04-03", "2025-12-31"),
    "cfq-b": ("2025-06-01", "9999-12-31"),
}
_ERA_EVIDENCE = (
    ("src/recovery/gcongestion/bandwidth.rs", "cfq-a", "bandwidth"),
    ("src/recovery/bandwidth.rs", "cfq-b", "bandwidth"),
    ("src/recovery/congestion/mod.rs", "cfq-1", "congestion"),  # no gcongestion yet
    ("src/recovery/cubic.rs", "cfq-0", "senders beside Recovery"),  # no congestion/ yet
)
"""The first of these files a crate has tells its era (newest layout first)."""


def crate_version(located: Located) -> str | None:
    """The ``version`` of the crate's Cargo.toml, when the tree is a quiche crate root."""
    return cargo_crate_version(located, "quiche")


def _crate_checksum(root: Path, version: str) -> str | None:
    """sha256 of the ``.crate`` file cargo downloaded (= the registry's checksum), for a registry source
    directory ``~/.cargo/registry/src/<index>/quiche-V``."""
    crate = root.parent.parent.parent / "cache" / root.parent.name / f"quiche-{version}.crate"
    try:
        return hashlib.sha256(crate.read_bytes()).hexdigest()
    except OSError:
        return None


class CloudflareQuicheTarget(Target):
    name: ClassVar[str] = "cloudflare-quiche"
    description: ClassVar[str] = "Cloudflare quiche crate root (src/recovery/gcongestion, src/recovery/congestion)"
    eras: ClassVar[tuple[str, ...]] = ("cfq-0", "cfq-1", "cfq-a", "cfq-b")
    algorithm_files: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "bbr2": ("bbr2.rs", "mode.rs", "probe_bw.rs"),
        "reno": ("reno.rs", "recovery.rs"),
        "cubic": ("cubic.rs", "recovery.rs"),
    }
    classes: ClassVar[Mapping[str, str]] = {
        "bbr2.rs": "BBRv2",
        "mode.rs": "Mode",
        "probe_bw.rs": "ProbeBW",
        "reno.rs": "Reno",
        "cubic.rs": "Cubic",
    }
    layout_names: ClassVar[frozenset[str]] = frozenset({"mod.rs"})
    """The 0.20-0.22 sets change ``src/recovery/mod.rs`` and ``src/recovery/congestion/mod.rs``."""
    roots: ClassVar[tuple[str, ...]] = ("", "quiche")
    dirs: ClassVar[tuple[str, ...]] = (
        "src/recovery/gcongestion",
        "src/recovery/gcongestion/bbr2",
        "src/recovery/congestion",
        "src/recovery",
    )
    """Newest layout first: a file name found in two of them is the newer one (``mod.rs`` of
    ``congestion/`` from 0.22 on); ``src/recovery`` itself holds the senders of 0.20 and 0.21."""
    extensions: ClassVar[tuple[str, ...]] = (".rs",)

    def identify(self, located: Located) -> Identity:
        """Era from the layout (see the module docstring); the crate version as evidence."""
        features: dict[str, str] = {}
        notes: list[str] = []
        if "bbr2.rs" in located.files:
            features["gcongestion"] = located.files["bbr2.rs"]
        found = next((e for e in _ERA_EVIDENCE if (located.root / e[0]).is_file()), None)
        if found is not None:
            era = found[1]
            features[found[2]] = found[0]
        else:
            era = self.eras[-1]
            notes.append("no bandwidth.rs, congestion/mod.rs or recovery/cubic.rs found; era guessed as the newest")
        bbr2 = located.read("bbr2.rs") or ""
        if "quicsm_log" in bbr2:
            features["quicsm_instrumented"] = "bbr2.rs: quicsm_log"
        elif "quicsm_log" in (located.read("mod.rs") or ""):
            features["quicsm_instrumented"] = f"{located.files['mod.rs']}: quicsm_log"
        version = crate_version(located)
        if version:
            features["version"] = version
        lo, hi = ERA_DATES[era]
        return Identity(era, self.algorithms(located), features, lo, hi, tuple(notes))

    def release(self, located: Located) -> Release | None:
        """The crate release: version from Cargo.toml, the git commit it was packaged from
        (``.cargo_vcs_info.json``), the registry checksum (fetched file or cargo's download cache)."""
        version = crate_version(located)
        if version is None:
            return None
        crate: dict[str, object] = {"name": "quiche", "version": version}
        fetched = read_source_file(located.root) or {}
        given = fetched.get("crate")
        checksum = given.get("checksum") if isinstance(given, dict) else None
        crate["checksum"] = checksum or _crate_checksum(located.root, version)
        commit = None
        try:
            vcs = json.loads((located.root / ".cargo_vcs_info.json").read_text(encoding="utf-8"))
            commit = vcs.get("git", {}).get("sha1")
            if vcs.get("path_in_vcs") is not None:
                crate["path_in_vcs"] = vcs["path_in_vcs"]
        except (OSError, ValueError, AttributeError):
            pass
        crate["features"] = list(FEATURES)
        if not crate["checksum"]:
            del crate["checksum"]
        how = "quicsm patch fetch" if fetched else "Cargo.toml"
        return Release(version, {"crate": crate}, commit if isinstance(commit, str) else None, None, how)


register(CloudflareQuicheTarget())
