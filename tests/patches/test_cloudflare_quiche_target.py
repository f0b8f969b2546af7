"""The cloudflare-quiche target: finds a crate root's senders, tells the era from the layout, and its
shipped BBR2 sets are offered for the right versions."""

from __future__ import annotations

from pathlib import Path

from quicsm.instrumentation.patchset import shipped_patch_sets
from quicsm.instrumentation.targets import get_target, iter_located


def _crate(root: Path, version: str, bandwidth_in_gcongestion: bool) -> Path:
    (root / "src/recovery/gcongestion/bbr2").mkdir(parents=True)
    (root / "src/recovery/congestion").mkdir(parents=True)
    (root / "Cargo.toml").write_text(f'[package]\nname = "quiche"\nversion = "{version}"\n')
    (root / "src/recovery/gcongestion/bbr2.rs").write_text("pub(crate) struct BBRv2 {}\n")
    (root / "src/recovery/gcongestion/bbr2/mode.rs").write_text("pub(super) enum Mode {}\n")
    (root / "src/recovery/gcongestion/bbr2/probe_bw.rs").write_text("pub(super) struct ProbeBW {}\n")
    (root / "src/recovery/congestion/cubic.rs").write_text("")
    bw = root / ("src/recovery/gcongestion/bandwidth.rs" if bandwidth_in_gcongestion else "src/recovery/bandwidth.rs")
    bw.write_text("pub struct Bandwidth {}\n")
    return root


def test_era_and_version_from_the_layout(tmp_path: Path) -> None:
    target = get_target("cloudflare-quiche")
    old = target.locate(_crate(tmp_path / "a", "0.24.0", True))
    new = target.locate(_crate(tmp_path / "b", "0.30.0", False))
    assert old is not None and new is not None
    a, b = target.identify(old), target.identify(new)
    assert (a.era, b.era) == ("cfq-a", "cfq-b")
    assert a.features["version"] == "0.24.0" and b.features["version"] == "0.30.0"
    assert "bbr2" in a.algorithms and old.files["bbr2.rs"] == "src/recovery/gcongestion/bbr2.rs"


def test_not_confused_with_chromium_quiche(tmp_path: Path) -> None:
    found = [t.name for t, _ in iter_located(_crate(tmp_path / "c", "0.26.0", False))]
    assert found == ["cloudflare-quiche"]


def test_shipped_sets_span_three_versions() -> None:
    sets = shipped_patch_sets("cloudflare-quiche")
    versions = sorted(ps.name.split("-")[2] for ps in sets if ps.algorithm == "bbr2")
    assert len(versions) >= 3 and versions[0] == "0.24.0" and versions[-1] == "0.30.0"
    assert {ps.era for ps in sets} == {"cfq-a", "cfq-b"}
