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
    assert {ps.era for ps in sets} == {"cfq-0", "cfq-1", "cfq-a", "cfq-b"}
    old = sorted(ps.name for ps in sets if ps.era in ("cfq-0", "cfq-1"))
    assert old == [f"cloudflare-quiche-{v}-{cc}" for v in ("0.20.1", "0.22.0") for cc in ("cubic", "reno")]


def test_eras_before_gcongestion(tmp_path: Path) -> None:
    """0.20/0.21 keep Reno and Cubic beside src/recovery/mod.rs (cfq-0); 0.22 has src/recovery/congestion/
    without gcongestion (cfq-1). Both are found through the upstream layout: mod.rs is named in several
    directories of the crate, so a search by file name alone would stop at "mod.rs found twice"."""
    target = get_target("cloudflare-quiche")
    a, b = tmp_path / "a", tmp_path / "b"
    for root, version, sub in ((a, "0.21.0", "src/recovery"), (b, "0.22.0", "src/recovery/congestion")):
        (root / sub).mkdir(parents=True, exist_ok=True)
        (root / "Cargo.toml").write_text(f'[package]\nname = "quiche"\nversion = "{version}"\n')
        for name in ("cubic.rs", "reno.rs", "mod.rs"):
            (root / sub / name).write_text("")
        (root / "src/recovery/mod.rs").write_text("pub struct Recovery {}\n")
        for other in ("src/h3/mod.rs", "src/h3/qpack/mod.rs", "src/crypto/mod.rs"):
            (root / other).parent.mkdir(parents=True, exist_ok=True)
            (root / other).write_text("")
    old, new = target.locate(a), target.locate(b)
    assert old is not None and new is not None and old.layout == new.layout == "checkout"
    assert (target.identify(old).era, target.identify(new).era) == ("cfq-0", "cfq-1")
    assert old.files["mod.rs"] == "src/recovery/mod.rs" and old.files["cubic.rs"] == "src/recovery/cubic.rs"
    assert new.files["mod.rs"] == "src/recovery/congestion/mod.rs"  # the newer layout's file wins
    assert set(target.identify(old).algorithms) == {"reno", "cubic"}


def test_loose_trees_are_not_searched_for_mod_rs(tmp_path: Path) -> None:
    """Outside the upstream layout (copied files, another Rust crate such as quinn) mod.rs is not looked for
    by name: several of them are no error, and the named sender files are still found."""
    for rel in ("x/mod.rs", "y/mod.rs", "x/cubic.rs"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    loc = get_target("cloudflare-quiche").locate(tmp_path)
    assert loc is not None and loc.layout == "loose" and dict(loc.files) == {"cubic.rs": "x/cubic.rs"}
