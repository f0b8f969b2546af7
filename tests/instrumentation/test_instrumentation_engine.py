"""Engine guarantees on small synthetic trees: all or nothing, idempotence, byte-identical revert, safety."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from instr_fixtures import cubic_edits, make_set, one_file_set, snapshot, write_tree

from quicsm.errors import PatchError
from quicsm.instrumentation import engine
from quicsm.instrumentation.appliers import APPLIERS, CheckResult, GitApplier
from quicsm.instrumentation.patchset import load_patch_set

APPLIER_NAMES = [n for n, a in APPLIERS.items() if a.available()]


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "src"
    paths = write_tree(root, "E")
    return root, paths


@pytest.fixture
def cubic_set(tmp_path: Path, tree):
    root, paths = tree
    return load_patch_set(make_set(tmp_path / "sets", root, cubic_edits(paths)))


@pytest.mark.parametrize("applier", APPLIER_NAMES)
def test_apply_then_revert_is_byte_identical(tree, cubic_set, applier):
    root, paths = tree
    before = snapshot(root)
    res = engine.apply(root, sets=[cubic_set], applier=APPLIERS[applier])
    assert res.applied == (cubic_set.name,)
    text = (root / paths["tcp_cubic_sender_bytes.cc"]).read_text()
    assert "to=CongestionAvoidance" in text and "to=Recovery" in text
    assert "to=ProbeTimeout" in (root / paths["quic_sent_packet_manager.cc"]).read_text()
    assert (root / engine.STATE_FILE).exists()
    res = engine.revert(root, sets=[cubic_set], applier=APPLIERS[applier])
    assert res.applied == (cubic_set.name,)
    assert snapshot(root) == before  # state record gone too


def test_apply_twice_says_already_applied(tree, cubic_set):
    root, _ = tree
    engine.apply(root, sets=[cubic_set])
    after_first = snapshot(root)
    res = engine.apply(root, sets=[cubic_set])
    assert res.applied == () and res.already == (cubic_set.name,)
    assert snapshot(root) == after_first
    checks = engine.check(root, sets=[cubic_set])
    assert [c.state for c in checks] == ["applied"]


@pytest.mark.parametrize("by_name", [True, False])
@pytest.mark.parametrize("applier", APPLIER_NAMES)
def test_second_file_fails_first_file_untouched(tmp_path, tree, applier, by_name):
    root, paths = tree
    d = make_set(tmp_path / "sets", root, cubic_edits(paths))
    # break the second file's hunk: its context no longer matches the tree
    sentpm = root / paths["quic_sent_packet_manager.cc"]
    sentpm.write_text(sentpm.read_text().replace("pending_timer_transmission_count_ = 1;", "pending_ = 2;"))
    before = snapshot(root)
    ps = load_patch_set(d)
    with pytest.raises(PatchError, match="quic_sent_packet_manager.cc"):
        engine.apply(root, sets=[ps], set_name=ps.name if by_name else None, applier=APPLIERS[applier])
    assert snapshot(root) == before


class FailsAfterFirstFile:
    """Applies the first file of a diff for real, then reports failure (a tool dying half-way)."""

    name = "flaky"

    def __init__(self) -> None:
        self.git = GitApplier()

    def available(self) -> bool:
        return True

    def check(self, root, diff, *, reverse=False):
        return self.git.check(root, diff, reverse=reverse)

    def apply(self, root, diff, *, reverse=False):
        first = "diff --git" + diff.split("diff --git")[1]
        assert self.git.apply(root, first, reverse=reverse).ok
        return CheckResult(False, "simulated crash after the first file")


def test_failure_half_way_is_rolled_back_and_verified(tree, cubic_set):
    root, _ = tree
    before = snapshot(root)
    with pytest.raises(PatchError, match="simulated crash.*nothing was changed"):
        engine.apply(root, sets=[cubic_set], applier=FailsAfterFirstFile())
    assert snapshot(root) == before


def test_revert_failure_half_way_restores_patched_state(tree, cubic_set):
    root, _ = tree
    engine.apply(root, sets=[cubic_set])
    patched = snapshot(root)
    with pytest.raises(PatchError, match="simulated crash"):
        engine.revert(root, sets=[cubic_set], applier=FailsAfterFirstFile())
    assert snapshot(root) == patched


def test_status_reports_each_file(tree, cubic_set):
    root, paths = tree
    st = {s.path: s.status for s in engine.status(root, sets=[cubic_set])}
    assert set(st.values()) == {"pristine"}
    engine.apply(root, sets=[cubic_set])
    st = {s.path: s.status for s in engine.status(root, sets=[cubic_set])}
    assert set(st.values()) == {"patched"}
    sentpm = root / paths["quic_sent_packet_manager.cc"]
    sentpm.write_text(sentpm.read_text().replace("++consecutive_pto_count_;", "consecutive_pto_count_ += 2;"))
    st = {s.path: s.status for s in engine.status(root, sets=[cubic_set])}
    assert st[paths["quic_sent_packet_manager.cc"]] == "modified-otherwise"
    assert st[paths["tcp_cubic_sender_bytes.cc"]] == "patched"
    with pytest.raises(PatchError, match="modified after patching"):
        engine.revert(root, sets=[cubic_set])


def test_revert_without_record_uses_reverse_check(tree, cubic_set):
    root, _ = tree
    before = snapshot(root)
    engine.apply(root, sets=[cubic_set])
    (root / engine.STATE_FILE).unlink()
    engine.revert(root, sets=[cubic_set])
    assert snapshot(root) == before


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (b'{"format": 1,\n "applied": [', ":2: not a quicsm apply record: not valid JSON (Input data was truncated)"),
        (b"\n\n{,}", ":3: not a quicsm apply record: not valid JSON (JSON is malformed: "),
        (b'{"format": 1}', ": not a quicsm apply record: applied: required key missing"),
        (b'{"applied": {}}', ": not a quicsm apply record: applied: expected `array`, got `object`"),
        (b"[]", ": not a quicsm apply record: expected `object`, got `array`"),
    ],
)
def test_a_damaged_apply_record_is_one_line_at_its_place(tree, cubic_set, record: bytes, message: str) -> None:
    """The record decodes through formats.checked: the file, its line or the key, and why; nothing changes."""
    root, _ = tree
    (root / engine.STATE_FILE).write_bytes(record)
    before = snapshot(root)
    for verb in (engine.apply, engine.revert, engine.status):
        with pytest.raises(PatchError) as err:
            verb(root, sets=[cubic_set])
        assert str(err.value).startswith(str(root.resolve() / engine.STATE_FILE) + message), str(err.value)
    assert snapshot(root) == before


def test_refuses_path_through_symlink_pointing_outside(tmp_path, tree, cubic_set):
    root, paths = tree
    outside = tmp_path / "outside.cc"
    rel = paths["tcp_cubic_sender_bytes.cc"]
    outside.write_bytes((root / rel).read_bytes())
    (root / rel).unlink()
    os.symlink(outside, root / rel)
    before = outside.read_bytes()
    with pytest.raises(PatchError, match="symlink.*outside"):
        engine.apply(root, set_name=cubic_set.name, sets=[cubic_set])
    assert outside.read_bytes() == before


def test_refuses_symlinked_directory_pointing_outside(tmp_path, tree, cubic_set):
    root, paths = tree
    cc_dir = (root / paths["tcp_cubic_sender_bytes.cc"]).parent
    moved = tmp_path / "elsewhere"
    cc_dir.rename(moved)
    os.symlink(moved, cc_dir)
    before = snapshot(moved)
    with pytest.raises(PatchError, match="symlink"):
        engine.apply(root, set_name=cubic_set.name, sets=[cubic_set])
    assert snapshot(moved) == before


@pytest.mark.parametrize("bad", ["../escape.cc", "/etc/passwd", "quic/../../escape.cc"])
def test_refuses_escaping_paths_in_diff(tmp_path, tree, bad):
    root, _ = tree
    diff = f"diff --git a/{bad} b/{bad}\n--- a/{bad}\n+++ b/{bad}\n@@ -1,1 +1,2 @@\n x\n+y\n"
    d = make_set(
        tmp_path / "sets",
        root,
        {},
        diff_override=diff,
        manifest_patch={"files": [{"path": "quic/x.cc", "sha256": "a" * 64}]},
    )
    with pytest.raises(PatchError, match="source root|a/ or b/ prefix"):
        load_patch_set(d)
    assert not (tmp_path / "escape.cc").exists()


def test_check_inside_refuses_dotdot_and_absolute(tmp_path):
    for bad in ("../x", "/x", "a/../../x", "a//b"):
        with pytest.raises(PatchError):
            engine.check_inside(tmp_path, bad, "test")
    assert engine.check_inside(tmp_path, "a/b.cc", "test") == tmp_path.resolve() / "a/b.cc"


def test_loose_directory_is_patched_by_file_name(tmp_path, tree, cubic_set):
    root, paths = tree
    loose = tmp_path / "loose"
    loose.mkdir()
    for name in ("tcp_cubic_sender_bytes.cc", "quic_sent_packet_manager.cc"):
        (loose / name).write_bytes((root / paths[name]).read_bytes())
    before = snapshot(loose)
    det = engine.detect(loose, sets=[cubic_set])
    assert det.located.layout == "loose" and det.identity.era == "E"
    assert det.best("cubic").kind == "exact"
    engine.apply(loose, sets=[cubic_set])
    assert "to=Recovery" in (loose / "tcp_cubic_sender_bytes.cc").read_text()
    engine.revert(loose, sets=[cubic_set])
    assert snapshot(loose) == before


def test_automatic_choice_prefers_exact_and_reports_missing(tmp_path, tree, cubic_set):
    root, paths = tree
    other = make_set(tmp_path / "sets2", root, cubic_edits(paths), name="older-cubic", date="2019-05-01")
    # make "older-cubic" not apply: its context mentions a line this tree lacks
    text = (other / "changes.diff").read_text().replace(" ExitSlowstart();", " ExitSlowStartNow();")
    (other / "changes.diff").write_text(text)
    older = load_patch_set(other)
    det, plans, notes = engine.choose(root, sets=[older, cubic_set])
    assert [p.name for p in plans] == [cubic_set.name]
    assert any(n.startswith("bbr:") for n in notes)  # bbr_sender.cc exists but no bbr set
    kinds = {c.patch_set.name: c.kind for c in det.candidates}
    assert kinds == {cubic_set.name: "exact", "older-cubic": "similar"}


def test_nothing_found_is_a_clear_error(tmp_path):
    (tmp_path / "readme.txt").write_text("nothing here")
    with pytest.raises(PatchError, match="no congestion-control sender files"):
        engine.detect(tmp_path, sets=[])


def test_tree_inside_unrelated_git_repo_is_patched(tmp_path):
    """git apply run in a sub-directory of a repository would silently skip the files; we must not."""
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    root = tmp_path / "vendor" / "quiche"
    paths = write_tree(root, "E")
    ps = load_patch_set(make_set(tmp_path / "sets", root, cubic_edits(paths)))
    before = snapshot(root)
    engine.apply(root, sets=[ps])
    assert "to=Recovery" in (root / paths["tcp_cubic_sender_bytes.cc"]).read_text()
    engine.revert(root, sets=[ps])
    assert snapshot(root) == before


def test_tree_that_is_a_git_checkout_is_patched(tmp_path):
    import subprocess

    root = tmp_path / "quiche"
    paths = write_tree(root, "E")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    ps = load_patch_set(make_set(tmp_path / "sets", root, cubic_edits(paths)))
    engine.apply(root, sets=[ps])
    assert "to=ProbeTimeout" in (root / paths["quic_sent_packet_manager.cc"]).read_text()


def test_status_without_usable_set_reports_against_the_closest(tree, cubic_set):
    """Another upstream version (no set applies) is pristine: it holds no instrumentation. A file with
    quicsm lines that no set reverses is modified otherwise."""
    root, paths = tree
    p = root / paths["tcp_cubic_sender_bytes.cc"]
    p.write_text(p.read_text().replace("ExitSlowstart();", "LeaveSlowStart();"))
    rows = engine.status(root, sets=[cubic_set])
    st = {s.path: s for s in rows}
    assert st[paths["tcp_cubic_sender_bytes.cc"]].status == "pristine"
    assert "no quicsm lines" in st[paths["tcp_cubic_sender_bytes.cc"]].detail
    assert st[paths["quic_sent_packet_manager.cc"]].status == "pristine"
    assert engine.tree_state(rows) == "pristine"
    p.write_text(p.read_text() + "// QUICSM v=1 cc=cubic from=A to=B (added by hand)\n")
    rows = engine.status(root, sets=[cubic_set])
    assert {s.path: s.status for s in rows}[paths["tcp_cubic_sender_bytes.cc"]] == "modified-otherwise"
    assert engine.tree_state(rows) == "mixed"


def test_apply_with_port_instruments_an_unpinned_version_and_reverts(tmp_path, tree, cubic_set):
    root, paths = tree
    p = root / paths["tcp_cubic_sender_bytes.cc"]
    p.write_text(
        p.read_text().replace("  for (const LostPacket& lost", "  UpdateStats();\n  for (const LostPacket& lost")
    )
    before = snapshot(root)
    with pytest.raises(PatchError, match="no patch set applies"):
        engine.apply(root, sets=[cubic_set])
    res = engine.apply(root, sets=[cubic_set], port_missing=True)
    assert len(res.applied) == 1 and res.applied[0].startswith("test-cubic-port-")
    assert any("ported test-cubic as test-cubic-port-" in n for n in res.ported) and res.notes == ()
    assert "to=CongestionAvoidance" in p.read_text()
    again = engine.apply(root, sets=[cubic_set], port_missing=True)
    assert again.applied == () and again.already == res.applied  # never instrumented twice
    engine.revert(root, sets=[cubic_set])
    assert snapshot(root) == before


def test_symlink_refused_in_all_sets_mode_names_the_reason(tmp_path, tree, cubic_set):
    root, paths = tree
    rel = paths["tcp_cubic_sender_bytes.cc"]
    real = root / "real_cubic.cc"
    (root / rel).rename(real)
    os.symlink(real, root / rel)
    with pytest.raises(PatchError) as err:
        engine.apply(root, sets=[cubic_set])
    msg = str(err.value)
    assert "symlink" in msg and "patching through symlinks is refused" in msg
    assert "try `quicsm patch port" not in msg


@pytest.mark.parametrize("applier", APPLIER_NAMES)
def test_apply_and_revert_keep_file_modes(tree, cubic_set, applier):
    root, paths = tree
    modes = {paths["tcp_cubic_sender_bytes.cc"]: 0o664, paths["quic_sent_packet_manager.cc"]: 0o444}
    for rel, mode in modes.items():
        os.chmod(root / rel, mode)
    before = snapshot(root)
    engine.apply(root, sets=[cubic_set], applier=APPLIERS[applier])
    assert {rel: (root / rel).stat().st_mode & 0o7777 for rel in modes} == modes
    os.chmod(root / paths["quic_sent_packet_manager.cc"], 0o755)  # changed while patched: revert restores 444
    engine.revert(root, sets=[cubic_set], applier=APPLIERS[applier])
    assert snapshot(root) == before
    assert {rel: (root / rel).stat().st_mode & 0o7777 for rel in modes} == modes


def test_half_patched_tree_is_completed_recorded_and_reverted_whole(tmp_path, tree, cubic_set):
    """One set patched without a record (a kill under an older quicsm, or by hand), another not."""
    root, paths = tree
    bbr_rel = paths["bbr_sender.cc"]
    old = (root / bbr_rel).read_text()
    bbr = load_patch_set(
        one_file_set(
            tmp_path / "sets", bbr_rel, old, old.replace("    mode_ = DRAIN;\n", "    mode_ = DRAIN;\n    X();\n")
        )
    )
    before = snapshot(root)
    assert GitApplier().apply(root, (Path(cubic_set.origin) / "changes.diff").read_text()).ok  # by hand: no record
    res = engine.apply(root, sets=[cubic_set, bbr])
    assert res.applied == (bbr.name,) and res.already == (cubic_set.name,)
    record = json.loads((root / engine.STATE_FILE).read_text())
    assert sorted(r["set"] for r in record["applied"]) == sorted([cubic_set.name, bbr.name])
    rows = engine.status(root, sets=[cubic_set, bbr])
    assert len(rows) == 3 and {r.status for r in rows} == {"patched"}
    engine.revert(root, sets=[cubic_set, bbr])
    assert snapshot(root) == before
