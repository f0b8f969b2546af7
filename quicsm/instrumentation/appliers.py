"""The tools that really apply diffs: ``git apply`` (default) and GNU ``patch`` (fallback).

Both run exact (no fuzz, no offset guessing beyond what the tool does for line numbers), never ask
questions, and never leave ``.orig``/``.rej`` files. ``git apply`` is run with the source root as its
working directory and ``GIT_CEILING_DIRECTORIES`` set to the root's parent, so a tree that is not a git
repository (or is a sub-directory of an unrelated one) is patched as plain files; paths were checked
by the engine before, so ``--unsafe-paths`` is never needed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from quicsm.errors import PatchError

__all__ = ["APPLIERS", "Applier", "CheckResult", "GitApplier", "GnuPatchApplier", "default_applier", "get_applier"]


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    output: str


class Applier(Protocol):
    name: str

    def available(self) -> bool: ...

    def check(self, root: Path, diff: str, *, reverse: bool = False) -> CheckResult: ...

    def apply(self, root: Path, diff: str, *, reverse: bool = False) -> CheckResult: ...


def _run(cmd: list[str], root: Path, diff: str) -> CheckResult:
    env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(Path(root).resolve().parent), LC_ALL="C")
    env.pop("GIT_DIR", None)
    env.pop("GIT_WORK_TREE", None)
    with tempfile.NamedTemporaryFile("w", suffix=".diff", delete=False, encoding="utf-8") as fh:
        fh.write(diff)
        name = fh.name
    try:
        proc = subprocess.run(
            cmd + [name],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=120,
            check=False,
        )
    except FileNotFoundError as exc:
        raise PatchError(f"{cmd[0]} is not installed: {exc}") from None
    finally:
        os.unlink(name)
    out = (proc.stdout + proc.stderr).replace(name, "<diff>").strip()
    return CheckResult(proc.returncode == 0, out)


class _ToolApplier:
    """Runs ``tool`` on the diff, with ``check_flag`` to only check it and ``-R`` to reverse it."""

    name: str
    tool: tuple[str, ...]
    check_flag: str
    last: tuple[str, ...] = ()

    def available(self) -> bool:
        return shutil.which(self.tool[0]) is not None

    def _cmd(self, check: bool, reverse: bool) -> list[str]:
        return [*self.tool, *([self.check_flag] if check else []), *(["-R"] if reverse else []), *self.last]

    def check(self, root: Path, diff: str, *, reverse: bool = False) -> CheckResult:
        return _run(self._cmd(True, reverse), root, diff)

    def apply(self, root: Path, diff: str, *, reverse: bool = False) -> CheckResult:
        return _run(self._cmd(False, reverse), root, diff)


class GitApplier(_ToolApplier):
    """``git apply``: checks every hunk of every file before writing anything."""

    name = "git"
    tool = ("git", "apply", "-p1", "--whitespace=nowarn")
    check_flag = "--check"


class GnuPatchApplier(_ToolApplier):
    """GNU ``patch`` with ``--fuzz=0 -f``: writes file by file, so the engine's rollback matters here."""

    name = "patch"
    tool = ("patch", "-p1", "-f", "-s", "--fuzz=0", "--no-backup-if-mismatch", "--reject-file=-")
    check_flag = "--dry-run"
    last = ("-i",)


APPLIERS: dict[str, Applier] = {"git": GitApplier(), "patch": GnuPatchApplier()}


def get_applier(name: str) -> Applier:
    try:
        a = APPLIERS[name]
    except KeyError:
        raise PatchError(f"unknown applier {name!r} (known: {', '.join(APPLIERS)})") from None
    if not a.available():
        raise PatchError(f"applier {name!r} is not installed")
    return a


def default_applier() -> Applier:
    for a in APPLIERS.values():
        if a.available():
            return a
    raise PatchError("neither git nor GNU patch is installed; install one (apt-get install git)")
