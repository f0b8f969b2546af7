"""A failed apply or revert undoes itself.

An error the running process catches (EPERM on an immutable file, EACCES in a read-only directory, EROFS,
ENOSPC) is not a crash: the files it touched get their bytes and modes back, and no journal, staging
directory or temporary file is left, before the command exits with an error naming the file and the
reason. Each case is a real failure of the kernel's, not a mocked one.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from instr_fixtures import cubic_edits, make_set, write_tree

import quicsm
from quicsm.instrumentation.journal import JOURNAL_DIR

REPO = Path(quicsm.__file__).resolve().parent.parent
MODES = {"tcp_cubic_sender_bytes.cc": 0o640, "quic_sent_packet_manager.cc": 0o444, "bbr_sender.cc": 0o755}
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (chattr, mount, dropping capabilities)")


def tree_state(root: Path) -> dict[str, tuple[bytes | None, int]]:
    """Every entry under ``root`` (hidden ones too) with its bytes (None for a directory) and mode."""
    out: dict[str, tuple[bytes | None, int]] = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        out[p.relative_to(root).as_posix()] = (None if p.is_dir() else p.read_bytes(), st.st_mode & 0o7777)
    return out


def _world(base: Path) -> tuple[Path, Path, dict[str, str]]:
    root = base / "src"
    paths = write_tree(root, "E")
    for name, mode in MODES.items():
        (root / paths[name]).chmod(mode)
    sets = make_set(base / "sets", root, cubic_edits(paths))
    return root, sets, paths


def _quicsm(*args: str, preexec: Callable[[], None] | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "quicsm", "patch", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=preexec,
    )


def _assert_failed_cleanly(res: subprocess.CompletedProcess[str], reason: str, names: str, *, op: str) -> None:
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert reason in out and names in out, out
    assert "Traceback" not in out and "interrupted" not in out, out
    assert f"the {op} was undone" in out or f"the {op} changed nothing" in out, out


@contextlib.contextmanager
def immutable(path: Path) -> Iterator[None]:
    subprocess.run(["chattr", "+i", str(path)], check=True)
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@root_only
@pytest.mark.parametrize("victim", ["tcp_cubic_sender_bytes.cc", "quic_sent_packet_manager.cc"])
def test_apply_onto_an_immutable_file_undoes_itself(tmp_path: Path, victim: str) -> None:
    """Each changed file in turn is the one that cannot be replaced: those before it were, and are put back."""
    root, sets, paths = _world(tmp_path)
    pristine = tree_state(root)
    with immutable(root / paths[victim]):
        res = _quicsm("apply", str(root), "--set", str(sets))
        _assert_failed_cleanly(res, "Operation not permitted (EPERM)", victim, op="apply")
        assert tree_state(root) == pristine


@root_only
def test_revert_onto_an_immutable_file_undoes_itself(tmp_path: Path) -> None:
    root, sets, paths = _world(tmp_path)
    assert _quicsm("apply", str(root), "--set", str(sets)).returncode == 0
    patched = tree_state(root)
    for victim in ("tcp_cubic_sender_bytes.cc", "quic_sent_packet_manager.cc"):
        with immutable(root / paths[victim]):
            res = _quicsm("revert", str(root))
            _assert_failed_cleanly(res, "Operation not permitted (EPERM)", victim, op="revert")
            assert tree_state(root) == patched
    assert _quicsm("revert", str(root)).returncode == 0


def _without_dac_override() -> None:
    """Root keeps its uid but loses the right to write where the mode bits say no (as a plain user)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def test_apply_into_a_read_only_directory_undoes_itself(tmp_path: Path) -> None:
    """The sent-packet manager's directory is read-only: the Cubic file beside it was already replaced."""
    root, sets, paths = _world(tmp_path)
    ro = (root / paths["quic_sent_packet_manager.cc"]).parent
    cc_dir = (root / paths["tcp_cubic_sender_bytes.cc"]).parent
    assert ro != cc_dir
    pristine = tree_state(root)
    ro.chmod(0o555)
    try:
        res = _quicsm(
            "apply", str(root), "--set", str(sets), preexec=_without_dac_override if os.geteuid() == 0 else None
        )
        _assert_failed_cleanly(res, "Permission denied (EACCES)", "quic_sent_packet_manager.cc", op="apply")
    finally:
        ro.chmod(0o755)
    assert tree_state(root) == pristine


@contextlib.contextmanager
def mounted(args: list[str], where: Path) -> Iterator[Path]:
    subprocess.run(["mount", *args, str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


@root_only
def test_apply_on_a_read_only_mount_undoes_itself(tmp_path: Path) -> None:
    root, sets, paths = _world(tmp_path)
    ro = (root / paths["tcp_cubic_sender_bytes.cc"]).parent
    pristine = tree_state(root)
    with mounted(["--bind", str(ro)], ro):
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True)
        res = _quicsm("apply", str(root), "--set", str(sets))
        _assert_failed_cleanly(res, "Read-only file system (EROFS)", "tcp_cubic_sender_bytes.cc", op="apply")
        assert tree_state(root) == pristine


@root_only
def test_apply_on_a_full_disk_leaves_the_tree_as_it_was_or_patched(tmp_path: Path) -> None:
    """A small tmpfs filled to a little less than the change needs, over a range of free space: every run
    ends pristine (with ENOSPC named) or completely patched, and never leaves a journal behind."""
    from quicsm.errors import PatchError
    from quicsm.instrumentation import engine
    from quicsm.instrumentation.patchset import load_patch_set

    page = os.sysconf("SC_PAGE_SIZE")
    outcomes: list[str] = []
    for spare in range(0, 16):
        disk = tmp_path / f"disk{spare}"
        disk.mkdir()
        with mounted(["-t", "tmpfs", "-o", f"size={48 * page}", "tmpfs"], disk):
            root, sets, _ = _world(disk)
            pristine = tree_state(root)
            st = os.statvfs(disk)
            (disk / "filler").write_bytes(b"\0" * max(0, (st.f_bavail - spare) * st.f_frsize))
            try:
                engine.apply(root, sets=[load_patch_set(sets)])
                outcomes.append("patched")
                assert "QUICSM" in "".join(str(v[0]) for v in tree_state(root).values())
            except PatchError as exc:
                assert "No space left on device (ENOSPC)" in str(exc), exc
                assert "was undone" in str(exc) or "changed nothing" in str(exc), exc
                assert tree_state(root) == pristine
                outcomes.append("as it was")
            assert not any(n.startswith(JOURNAL_DIR) for n in os.listdir(root))
        if outcomes[-1] == "patched":
            break
    assert outcomes[0] == "as it was" and outcomes[-1] == "patched", outcomes


def test_a_failed_undo_keeps_the_journal_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """When even the undo cannot write, the journal stays for the next command (which rolls forward)."""
    from quicsm.errors import PatchError
    from quicsm.instrumentation import engine, journal
    from quicsm.instrumentation.patchset import load_patch_set

    root, sets, paths = _world(tmp_path)
    victim = root / paths["quic_sent_packet_manager.cc"]
    real_replace, real_os_replace = journal._replace, os.replace

    def failing_replace(path: Path, data: bytes | None, mode: int) -> None:
        if path == victim:
            raise OSError(28, "No space left on device")
        real_replace(path, data, mode)

    def failing_undo(src: str | Path, dst: str | Path) -> None:
        if Path(src).name.endswith(".before"):
            raise OSError(30, "Read-only file system")
        real_os_replace(src, dst)

    monkeypatch.setattr(journal, "_replace", failing_replace)
    monkeypatch.setattr(journal.os, "replace", failing_undo)
    with pytest.raises(PatchError, match=r"undoing the apply failed too .* keeps the change"):
        engine.apply(root, sets=[load_patch_set(sets)])
    assert (root / JOURNAL_DIR).is_dir()
    monkeypatch.undo()
    assert engine.recover(root) and not (root / JOURNAL_DIR).exists()
    assert "QUICSM" in victim.read_text()  # rolled forward: the tree is patched, as the command asked
    shutil.rmtree(root)
