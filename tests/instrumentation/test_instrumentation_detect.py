"""Era and version identification from file content, in checkouts and loose directories."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import pytest
from instr_fixtures import PREFIX, bbr_source, cubic_edits, cubic_source, make_set, write_tree

from quicsm.instrumentation import engine
from quicsm.instrumentation.patchset import load_patch_set
from quicsm.instrumentation.targets import Target, all_targets, get_target


@pytest.mark.parametrize(
    "era,target",
    [("E", "quiche"), ("D", "quiche"), ("D-early", "quiche"), ("C", "chromium"), ("B", "chromium"), ("A", "chromium")],
)
def test_checkout_era_and_target(tmp_path: Path, era: str, target: str) -> None:
    write_tree(tmp_path, era)
    det = engine.detect(tmp_path, sets=[])
    assert det.target.name == target
    assert det.identity.era == era.split("-")[0]
    assert det.located.layout == "checkout"
    assert {"cubic", "bbr"} <= set(det.identity.algorithms)


@pytest.mark.parametrize("era", ["E", "D", "D-early", "C", "B", "A"])
def test_loose_directory_era_comes_from_content(tmp_path: Path, era: str) -> None:
    _, inc, ns = PREFIX[era]
    (tmp_path / "tcp_cubic_sender_bytes.cc").write_text(cubic_source(inc, ns))
    (tmp_path / "bbr_sender.cc").write_text(bbr_source(inc, ns))
    det = engine.detect(tmp_path, sets=[])
    assert det.located.layout == "loose"
    assert det.identity.era == era.split("-")[0]
    assert det.target.name == ("quiche" if era in ("D", "D-early", "E") else "chromium")


def test_early_and_late_era_d_have_disjoint_dates(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_tree(a, "D-early")
    write_tree(b, "D")
    da, db = engine.detect(a, sets=[]).identity, engine.detect(b, sets=[]).identity
    assert da.date_to <= db.date_from


def test_probe_phase_spelling_narrows_the_date(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    for root, phase in ((old, "CyclePhase"), (new, "ProbePhase")):
        write_tree(root, "E", phase=phase)
        rel = "quiche/quic/core/congestion_control/bbr2_probe_bw.cc"
        (root / rel).write_text(bbr_source("quiche/quic/core/", "quic", phase))
    io, inew = engine.detect(old, sets=[]).identity, engine.detect(new, sets=[]).identity
    assert "cycle_phase_enum" in io.features and io.date_to < "2026-04-16"
    assert "probe_phase_enum" in inew.features and inew.date_from >= "2026-04-16"


def test_exact_version_found_by_sha256_and_nearest_by_date(tmp_path: Path) -> None:
    root = tmp_path / "src"
    paths = write_tree(root, "E")
    exact = load_patch_set(make_set(tmp_path / "s1", root, cubic_edits(paths), name="exact-one"))
    # same diff, other pristine hashes: "applies" but not exact
    other = load_patch_set(
        make_set(
            tmp_path / "s2",
            root,
            cubic_edits(paths),
            name="applies-one",
            manifest_patch={"files": [{"path": f.path, "sha256": "b" * 64} for f in exact.files]},
        )
    )
    det = engine.detect(root, sets=[other, exact])
    assert [(c.patch_set.name, c.kind) for c in det.candidates] == [("exact-one", "exact"), ("applies-one", "applies")]


def test_era_mismatch_lowers_similarity(tmp_path: Path) -> None:
    e_root, d_root = tmp_path / "e", tmp_path / "d"
    pe, pd = write_tree(e_root, "E"), write_tree(d_root, "D")
    set_e = load_patch_set(make_set(tmp_path / "se", e_root, cubic_edits(pe), name="set-e", era="E"))
    set_d = load_patch_set(make_set(tmp_path / "sd", d_root, cubic_edits(pd), name="set-d", era="D", date="2021-01-01"))
    # a tree of era E with a changed line so that neither applies: the era-E set must rank first
    rel = pe["tcp_cubic_sender_bytes.cc"]
    (e_root / rel).write_text((e_root / rel).read_text().replace("  slowstart_threshold_ = congestion_window_;\n", ""))
    det = engine.detect(e_root, sets=[set_d, set_e])
    assert det.candidates[0].patch_set.name == "set-e"


def test_registry_takes_new_targets_without_core_changes(tmp_path: Path) -> None:
    from quicsm.instrumentation import targets as reg

    class GoLike(Target):
        name = "golike-test"
        eras = ("2024",)
        algorithm_files: ClassVar[Mapping[str, tuple[str, ...]]] = {"cubic": ("cubic_sender.go",)}
        dirs = ("internal/congestion",)
        extensions = (".go",)

    reg.register(GoLike())
    try:
        (tmp_path / "internal/congestion").mkdir(parents=True)
        src = "package congestion\n\nfunc (c *cubicSender) OnPacketLost() {\n\tc.cwnd /= 2\n}\n"
        (tmp_path / "internal/congestion/cubic_sender.go").write_text(src)
        det = engine.detect(tmp_path, sets=[], target="golike-test")
        assert det.target.name == "golike-test" and det.identity.algorithms == ("cubic",)
        assert get_target("golike-test").function_at(src.splitlines(), 3) == "OnPacketLost"
        assert "golike-test" in {t.name for t in all_targets()}
    finally:
        reg._REGISTRY.items.pop("golike-test")


def test_modern_chromium_checkout_uses_its_quiche_copy(tmp_path: Path) -> None:
    chromium = tmp_path / "src"
    (chromium / "net/quic").mkdir(parents=True)
    (chromium / "net/quic/quic_chromium_client_session.cc").write_text("// not a sender\n")
    write_tree(chromium / "net/third_party/quiche/src", "E")
    det = engine.detect(chromium, sets=[])
    assert det.target.name == "quiche" and det.located.layout == "checkout"
    assert det.root == (chromium / "net/third_party/quiche/src").resolve()
    assert det.located.files["bbr_sender.cc"] == "quiche/quic/core/congestion_control/bbr_sender.cc"
