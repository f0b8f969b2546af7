"""The journal on its own: refusals that keep a tree safe when something else touched it."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner
from instr_fixtures import cubic_edits, killed_at_step, make_set, snapshot, write_tree

from quicsm.cli.main import cli
from quicsm.errors import PatchError
from quicsm.instrumentation import journal
from quicsm.instrumentation.journal import JOURNAL_DIR, Change
from quicsm.instrumentation.patchset import load_patch_set


def test_commit_refuses_a_file_changed_while_preparing(tmp_path: Path) -> None:
    (tmp_path / "a.cc").write_bytes(b"edited meanwhile\n")
    (tmp_path / "b.cc").write_bytes(b"b\n")
    before = snapshot(tmp_path)
    changes = [Change("b.cc", b"b\n", b"B\n", 0o644), Change("a.cc", b"a\n", b"A\n", 0o644)]
    with pytest.raises(PatchError, match=r"a\.cc: changed while the apply was being prepared; nothing was changed"):
        journal.commit(tmp_path, changes, "apply")
    assert snapshot(tmp_path) == before and not (tmp_path / JOURNAL_DIR).exists()


def test_commit_creates_and_removes_files_with_modes(tmp_path: Path) -> None:
    (tmp_path / "old.cc").write_bytes(b"x\n")
    journal.commit(
        tmp_path,
        [Change("old.cc", b"x\n", None, 0o644), Change("sub/new.cc", None, b"n\n", 0o640)],
        "apply",
    )
    assert not (tmp_path / "old.cc").exists()
    assert (tmp_path / "sub/new.cc").read_bytes() == b"n\n"
    assert (tmp_path / "sub/new.cc").stat().st_mode & 0o777 == 0o640
    assert sorted(os.listdir(tmp_path)) == ["sub"]


def _killed_apply(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A tree whose apply was killed with one file replaced and the journal in place."""
    root = tmp_path / "src"
    paths = write_tree(root, "E")
    d = make_set(tmp_path / "sets", root, cubic_edits(paths))
    sets = [load_patch_set(d)]
    cubic, sentpm = (root / paths[n] for n in ("tcp_cubic_sender_bytes.cc", "quic_sent_packet_manager.cc"))
    pristine = snapshot(root)
    for n in range(1, 40):
        assert killed_at_step("apply", root, sets, n)[0] == -signal.SIGKILL
        if (root / JOURNAL_DIR).exists() and ("QUICSM" in cubic.read_text()) != ("QUICSM" in sentpm.read_text()):
            return root, d, paths
        journal.recover(root)
        CliRunner().invoke(cli, ["patch", "revert", str(root)])
        assert snapshot(root) == pristine
    raise AssertionError("no kill point left one file replaced")


def test_check_notes_a_pending_journal_and_recovery_refuses_an_edited_file(tmp_path: Path) -> None:
    root, d, paths = _killed_apply(tmp_path)
    res = CliRunner().invoke(cli, ["patch", "check", str(root), "--set", str(d)])
    assert "interrupted `apply`" in res.output and "is pending" in res.output
    assert (root / JOURNAL_DIR).exists()  # check changes nothing
    # a file the journal has not replaced yet is edited by someone: recovery must not overwrite it
    sentpm, cubic = (root / paths[n] for n in ("quic_sent_packet_manager.cc", "tcp_cubic_sender_bytes.cc"))
    victim = sentpm if "QUICSM" not in sentpm.read_text() else cubic
    victim.write_text(victim.read_text() + "// local edit\n")
    res = CliRunner().invoke(cli, ["patch", "status", str(root), "--set", str(d)])
    assert res.exit_code != 0 and "changed since the interrupted apply began" in res.output
    assert victim.name in res.output and "Traceback" not in res.output
    assert victim.read_text().endswith("// local edit\n") and (root / JOURNAL_DIR).exists()
