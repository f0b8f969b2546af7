"""Crash-safe replacement of several files of a source tree: a journal written before the first change.

``commit`` first stages, beside the tree's files, a journal directory holding every file's bytes and
mode before and after, fsyncs it and renames it into place (``.quicsm-journal`` in the source root):
that rename is the point of no return. Then each file is replaced atomically (temporary file, fsync,
``os.replace``, mode set before the rename), and the journal is removed last. A process killed at any
moment leaves either no journal (the tree is as before, stray staging files aside) or a complete one;
``recover`` finishes the interrupted change from the journal (roll forward), so the tree ends in the
state the command asked for, and refuses if a file is neither its before nor its after version.

``QUICSM_FAULT_AFTER=N`` makes the process SIGKILL itself after the N-th step (a staged blob, the
journal rename, a temporary file, a replace, the journal removal): the fault-injection tests use it.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quicsm.errors import PatchError
from quicsm.instrumentation.detection import check_inside, sha256_bytes

__all__ = ["FAULT_ENV", "JOURNAL_DIR", "Change", "commit", "fault_step", "pending", "recover"]

JOURNAL_DIR = ".quicsm-journal"
_JOURNAL = "journal.json"
_STAGING = ".quicsm-journal.staging-"
_TMP = ".quicsm-tmp-"
FAULT_ENV = "QUICSM_FAULT_AFTER"

_steps = 0


def fault_step() -> None:
    """Count one step; SIGKILL ourselves when the fault-injection budget is spent."""
    global _steps
    limit = os.environ.get(FAULT_ENV)
    if not limit:
        return
    _steps += 1
    if _steps >= int(limit):
        os.kill(os.getpid(), signal.SIGKILL)


@dataclass(frozen=True)
class Change:
    """One file of a transaction; ``None`` bytes mean the file does not exist on that side."""

    path: str
    """Relative to the source root."""
    before: bytes | None
    after: bytes | None
    mode: int
    """Permission bits the file has after the change (the original ones for a patched file)."""


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_blob(path: Path, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _replace(path: Path, data: bytes | None, mode: int) -> None:
    """Put ``data`` at ``path`` atomically with permission bits ``mode`` (``None``: remove the file)."""
    if data is None:
        if path.exists() or path.is_symlink():
            path.unlink()
            fault_step()
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f"{_TMP}{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        fault_step()
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)
    fault_step()


def _state(path: Path) -> tuple[str | None, int | None]:
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None, None
    return sha256_bytes(path.read_bytes()), st.st_mode & 0o7777


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the source root directory itself (no lock file is left in the tree),
    so two quicsm processes never interleave their changes."""
    fd = os.open(root, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def commit(root: Path, changes: list[Change], op: str) -> None:
    """Replace the files of ``changes`` under ``root`` as one crash-safe transaction.

    Refuses (changing nothing) if a file is no longer what ``before`` says: another process or an editor
    changed it while the new contents were being worked out.
    """
    root = Path(root)
    with _locked(root):
        _recover(root)
        for ch in changes:
            sha, _ = _state(check_inside(root, ch.path, op))
            if sha != (None if ch.before is None else sha256_bytes(ch.before)):
                raise PatchError(f"{root / ch.path}: changed while the {op} was being prepared; nothing was changed")
        if changes:
            _commit(root, changes, op)


def _commit(root: Path, changes: list[Change], op: str) -> None:
    staging = Path(tempfile.mkdtemp(prefix=_STAGING, dir=root))
    entries: list[dict[str, Any]] = []
    for i, ch in enumerate(changes):
        entry: dict[str, Any] = {
            "path": ch.path,
            "mode": ch.mode,
            "before_sha256": None if ch.before is None else sha256_bytes(ch.before),
            "after_sha256": None if ch.after is None else sha256_bytes(ch.after),
        }
        for side, data in (("before", ch.before), ("after", ch.after)):
            if data is not None:
                _write_blob(staging / f"{i}.{side}", data)
                fault_step()
        entries.append(entry)
    doc = {
        "format": 1,
        "op": op,
        "at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "files": entries,
    }
    _write_blob(staging / _JOURNAL, (json.dumps(doc, indent=1) + "\n").encode())
    _fsync_dir(staging)
    os.rename(staging, root / JOURNAL_DIR)  # the point of no return
    _fsync_dir(root)
    fault_step()
    _roll_forward(root)


def _load(root: Path) -> dict[str, Any] | None:
    p = root / JOURNAL_DIR / _JOURNAL
    if not p.exists():
        return None
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
        if not isinstance(doc, dict) or not isinstance(doc.get("files"), list):
            raise ValueError("field 'files' missing")
        return doc
    except (OSError, ValueError) as exc:
        raise PatchError(f"{p}: unreadable patch journal ({exc}); restore the tree from version control") from None


def pending(root: Path) -> dict[str, Any] | None:
    """The journal of an interrupted change under ``root``, if there is one (nothing is modified)."""
    return _load(Path(root))


def _roll_forward(root: Path) -> None:
    jdir = root / JOURNAL_DIR
    doc = _load(root)
    assert doc is not None
    todo = []
    for i, e in enumerate(doc["files"]):
        p = check_inside(root, e["path"], str(jdir / _JOURNAL))
        sha, mode = _state(p)
        if sha == e["after_sha256"] and (sha is None or mode == e["mode"]):
            continue
        if sha != e["before_sha256"]:
            raise PatchError(
                f"{p}: changed since the interrupted {doc.get('op', 'change')} began (sha256 {sha}); "
                f"the journal {jdir} is kept: restore the file or the tree from version control"
            )
        todo.append((i, e, p))
    for i, e, p in todo:
        data = (jdir / f"{i}.after").read_bytes() if e["after_sha256"] is not None else None
        if data is not None and sha256_bytes(data) != e["after_sha256"]:
            raise PatchError(f"{jdir}: staged copy of {e['path']} is damaged; restore the tree from version control")
        _replace(p, data, e["mode"])
    _finish(root, doc)


def _finish(root: Path, doc: dict[str, Any]) -> None:
    """Remove the journal (its ``journal.json`` first: from then on there is nothing left to redo)."""
    jdir = root / JOURNAL_DIR
    for e in doc["files"]:
        _clean_strays((root / e["path"]).parent)
    (jdir / _JOURNAL).unlink()
    _fsync_dir(jdir)
    fault_step()
    shutil.rmtree(jdir)
    _fsync_dir(root)


def _clean_strays(directory: Path) -> None:
    """Temporary files a killed replace left behind."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for n in names:
        if n.startswith(_TMP):
            (directory / n).unlink(missing_ok=True)


def recover(root: Path) -> str | None:
    """Finish an interrupted change under ``root``; returns what was done (None: nothing to do)."""
    root = Path(root)
    if not root.is_dir():
        return None
    if not any(n.startswith(JOURNAL_DIR) for n in os.listdir(root)):
        return None
    with _locked(root):
        return _recover(root)


def _recover(root: Path) -> str | None:
    note = None
    jdir = root / JOURNAL_DIR
    doc = _load(root)
    if doc is not None:
        _roll_forward(root)
        note = (
            f"completed an interrupted `{doc.get('op', 'change')}` of {doc.get('at', '?')} from its journal "
            f"({len(doc['files'])} files)"
        )
    elif jdir.exists():
        shutil.rmtree(jdir)  # killed after the journal was retired: the change is complete
    for n in os.listdir(root):
        if n.startswith(_STAGING):
            shutil.rmtree(root / n, ignore_errors=True)  # killed before the point of no return
    return note
