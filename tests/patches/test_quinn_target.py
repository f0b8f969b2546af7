"""The quinn target (quinn-proto crate root): finds the BBR controller, tells the era from its API, knows
Rust function boundaries, and its shipped BBR sets apply to and port onto a tree holding their context."""

from __future__ import annotations

from pathlib import Path

import pytest

from quicsm.instrumentation.appliers import default_applier
from quicsm.instrumentation.patchset import PatchSet, shipped_patch_sets
from quicsm.instrumentation.porter import plan_port
from quicsm.instrumentation.targets import get_target, iter_located

BBR = "src/congestion/bbr/mod.rs"


def _sets() -> dict[str, PatchSet]:
    return {ps.name: ps for ps in shipped_patch_sets("quinn")}


def _crate(root: Path, version: str, bbr_text: str) -> Path:
    (root / "src/congestion/bbr").mkdir(parents=True)
    (root / "Cargo.toml").write_text(f'[package]\nname = "quinn-proto"\nversion = "{version}"\n')
    (root / BBR).write_text(bbr_text)
    (root / "src/congestion/bbr/bw_estimation.rs").write_text("pub(crate) struct BandwidthEstimation {}\n")
    (root / "src/congestion/bbr/min_max.rs").write_text("pub(super) struct MinMax {}\n")
    (root / "src/congestion/cubic.rs").write_text("")
    (root / "src/congestion/new_reno.rs").write_text("")
    return root


def _pristine_from(ps: PatchSet, filler: int = 3) -> str:
    """A file holding the set's context and removed lines hunk by hunk, ``filler`` unrelated lines between."""
    out: list[str] = []
    for fp in ps.file_patches:
        for k, h in enumerate(fp.hunks):
            out += [f"// filler {k}.{i}" for i in range(filler)]
            out += [text for tag, text in h.lines if tag != "+"]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize(
    ("snippet", "era"),
    [
        ("fn on_end_acks(\n", "qp-a"),
        ("    fn on_mtu_update(&mut self, new_mtu: u16) {\n    }\nrand::rngs::StdRng::from_entropy()\n", "qp-b"),
        ("    fn on_mtu_update(&mut self, new_mtu: u16) {\n    }\nrand::rngs::StdRng::from_os_rng()\n", "qp-c"),
        ("    fn on_mtu_update(&mut self, new_mtu: u16) {\n    }\nPcg32::from_rng(&mut rand::rng())\n", "qp-d"),
    ],
)
def test_era_from_the_controller_api(tmp_path: Path, snippet: str, era: str) -> None:
    target = get_target("quinn")
    found = target.locate(_crate(tmp_path, "0.11.7", snippet))
    assert found is not None and found.files["mod.rs"] == BBR
    ident = target.identify(found)
    assert ident.era == era and ident.features["version"] == "0.11.7"
    assert "bbr" in ident.algorithms


def test_a_lone_mod_rs_is_not_quinn(tmp_path: Path) -> None:
    (tmp_path / "src/congestion/bbr").mkdir(parents=True)
    (tmp_path / BBR).write_text("fn x() {}\n")
    assert [t.name for t, _ in iter_located(tmp_path)] == []


def test_rust_function_spans_inside_impl_blocks() -> None:
    target = get_target("quinn")
    lines = [
        "impl Controller for Bbr {",
        "    fn on_sent(&mut self, now: Instant) {",
        "        if x {",
        "        }",
        "    }",
        "",
        "    pub(crate) fn window(&self) -> u64 { self.cwnd }",
        "}",
        "fn free() -> u8 {",
        "    1",
        "}",
    ]
    assert [(n, a, c) for n, a, _, c in target.functions(lines)] == [
        ("on_sent", 1, 4),
        ("window", 6, 6),
        ("free", 8, 10),
    ]
    assert target.function_at(lines, 3) == "on_sent"
    assert target.function_at(lines, 5) is None
    assert target.header_name("    fn on_end_acks(") == "on_end_acks"


def test_shipped_sets_span_three_versions_and_three_eras() -> None:
    sets = _sets()
    versions = sorted(
        (ps.extra["crate"]["version"] for ps in sets.values()), key=lambda v: tuple(map(int, v.split(".")))
    )
    assert versions == ["0.11.9", "0.11.14", "0.11.19"]
    assert {ps.era for ps in sets.values()} == {"qp-b", "qp-c", "qp-d"}
    for ps in sets.values():
        assert ps.algorithm == "bbr" and [f.path for f in ps.files] == [BBR]
        assert "cc=bbr" in ps.diff_text and "ev=close" in ps.diff_text


def test_set_applies_to_its_context_and_ports_onto_a_shifted_tree(tmp_path: Path) -> None:
    ps = _sets()["quinn-0.11.19-bbr"]
    exact = _crate(tmp_path / "a", "0.11.19", _pristine_from(ps))
    assert default_applier().check(exact, ps.diff_text).ok
    # More unrelated lines between the anchors: the unchanged set no longer applies at its line numbers
    # with zero fuzz everywhere, but the porter places every change by its anchors.
    shifted = _crate(tmp_path / "b", "0.11.20", _pristine_from(ps, filler=40))
    res = plan_port(ps, shifted)
    assert res.ok, [f.reason for f in res.failures]
    placed = res.placed[BBR].decode()
    assert placed.count("quicsm_log(") == 3 and "impl Drop for Bbr" in placed
