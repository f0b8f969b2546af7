"""Crash-safe replacement of several files of a source tree: a journal written before the first change.

``commit`` first stages, beside the tree's files, a journal directory holding every file's bytes and
mode before and after, fsyncs it and renames it into place (``.quicsm-journal`` in the source root):
that rename is the point of no return. Then each file is replaced atomically (temporary file, fsync,
``os.replace``, mode set before the rename), and the journal is removed last. A process killed at any
moment leaves either no journal (the tree is as before, stray staging files aside) or a complete one;
``recover`` finishes the interrupted change from the journal (roll forward), so the tree ends in the
state the command asked for, and refuses if a file is neither its before nor its after version.

An error the running process catches itself (EPERM on an immutable file, EACCES, EROFS, ENOSPC, a file
changed underneath) is not a crash: the process is alive, so it rolls back instead. Every file it replaced
gets its journalled before-copy back (renamed into place, so a full disk does not stop the undo), with its
mode; directories it created go; the journal and temporary files are removed; and the error names the
file and the reason. Only when the undo itself fails is the journal kept, for the next command to finish.

``QUICSM_FAULT_AFTER=N`` makes the process SIGKILL itself after the N-th step (a staged blob, the
journal rename, a temporary file, a replace, the journal removal): the fault-injection tests use it.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
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
    try:
        with _locked(root):
            _recover(root)
            for ch in changes:
                sha, _ = _state(check_inside(root, ch.path, op))
                if sha != (None if ch.before is None else sha256_bytes(ch.before)):
                    raise PatchError(
                        f"{root / ch.path}: changed while the {op} was being prepared; nothing was changed"
                    )
            if changes:
                _commit(root, changes, op)
    except OSError as exc:  # before the journal existed (locking, reading, staging): nothing was changed
        raise PatchError(f"{exc.filename or root}: {_reason(exc)}; the {op} changed nothing") from None


def _reason(exc: OSError) -> str:
    """``Permission denied (EACCES)``: the words and the name people search for."""
    name = errno.errorcode.get(exc.errno or 0)
    words = exc.strerror or str(exc)
    hint = " (an immutable file? see lsattr)" if exc.errno == errno.EPERM else ""
    return f"{words} ({name}){hint}" if name else words


class _StepFailed(Exception):
    """A file of a live change could not be put in place (the path, and the error that stopped it)."""

    def __init__(self, path: Path, cause: BaseException) -> None:
        super().__init__(str(path))
        self.path = path
        self.cause = cause


def _commit(root: Path, changes: list[Change], op: str) -> None:
    staging = Path(tempfile.mkdtemp(prefix=_STAGING, dir=root))
    try:
        doc = _stage(staging, changes, op)
        os.rename(staging, root / JOURNAL_DIR)  # the point of no return
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _fsync_dir(root)
    fault_step()
    new_dirs = _missing_dirs(root, changes)
    try:
        _roll_forward(root, live=True)
    except (_StepFailed, PatchError) as exc:
        path, cause = (exc.path, exc.cause) if isinstance(exc, _StepFailed) else (None, exc)
        problems = _roll_back(root, doc, new_dirs)
        what = _reason(cause) if isinstance(cause, OSError) else str(cause)
        where = f"{path}: " if path is not None else ""
        if problems:
            raise PatchError(
                f"{where}{what}; undoing the {op} failed too ({'; '.join(problems)}), so {root / JOURNAL_DIR} "
                "keeps the change: fix the cause, then `quicsm patch status` completes it"
            ) from None
        raise PatchError(f"{where}{what}; the {op} was undone, every file is as it was") from None


def _stage(staging: Path, changes: list[Change], op: str) -> dict[str, Any]:
    """Every file's before and after bytes and the journal document, fsynced in the staging directory."""
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
    doc = {"format": 1, "op": op, "at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), "files": entries}
    _write_blob(staging / _JOURNAL, (json.dumps(doc, indent=1) + "\n").encode())
    _fsync_dir(staging)
    return doc


def _missing_dirs(root: Path, changes: list[Change]) -> list[Path]:
    """Directories a change would create (deepest first), so an undo can take them away again."""
    missing: set[Path] = set()
    for ch in changes:
        parent = (root / ch.path).parent
        while parent != root and not parent.exists():
            missing.add(parent)
            parent = parent.parent
    return sorted(missing, key=lambda p: len(p.parts), reverse=True)


def _roll_back(root: Path, doc: dict[str, Any], new_dirs: list[Path]) -> list[str]:
    """Put every file of a live change back as it was; the journal goes when all are. Returns what failed.

    A before-copy is renamed from the journal into place, so the undo needs no free space; the journal
    keeps the after-copies, so if the undo stops half-way, rolling forward can still finish the change."""
    jdir = root / JOURNAL_DIR
    problems = []
    for i, e in reversed(list(enumerate(doc["files"]))):
        p = root / e["path"]
        try:
            sha, mode = _state(p)
            if sha == e["before_sha256"] and (sha is None or mode == e["mode"]):
                continue
            if sha != e["after_sha256"]:
                problems.append(f"{p}: changed by someone else meanwhile (left as it is)")
                continue
            if e["before_sha256"] is None:
                p.unlink()
            else:
                blob = jdir / f"{i}.before"
                os.chmod(blob, e["mode"])
                try:
                    os.replace(blob, p)
                except OSError as exc:
                    if exc.errno != errno.EXDEV:
                        raise
                    _replace(p, blob.read_bytes(), e["mode"])
            _fsync_dir(p.parent)
            fault_step()
        except OSError as exc:
            problems.append(f"{p}: {_reason(exc)}")
    if problems:
        return problems
    for d in new_dirs:
        with contextlib.suppress(OSError):
            d.rmdir()
    try:
        _finish(root, doc)
    except OSError as exc:
        return [f"{jdir}: {_reason(exc)}"]
    return []


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


def _roll_forward(root: Path, *, live: bool = False) -> None:
    """Put every file of the journal in its after state. ``live``: this process made the change and can
    still undo it, so a file that cannot be written is reported as :class:`_StepFailed` (see ``_commit``)."""
    jdir = root / JOURNAL_DIR
    doc = _load(root)
    assert doc is not None
    todo = []
    for i, e in enumerate(doc["files"]):
        p = check_inside(root, e["path"], str(jdir / _JOURNAL))
        with _step(p, live):
            sha, mode = _state(p)
        if sha == e["after_sha256"] and (sha is None or mode == e["mode"]):
            continue
        if sha != e["before_sha256"]:
            if live:
                raise _StepFailed(p, PatchError(f"changed underneath the {doc.get('op', 'change')} (sha256 {sha})"))
            raise PatchError(
                f"{p}: changed since the interrupted {doc.get('op', 'change')} began (sha256 {sha}); "
                f"the journal {jdir} is kept: restore the file or the tree from version control"
            )
        todo.append((i, e, p))
    for i, e, p in todo:
        with _step(p, live):
            data = (jdir / f"{i}.after").read_bytes() if e["after_sha256"] is not None else None
        if data is not None and sha256_bytes(data) != e["after_sha256"]:
            raise PatchError(f"{jdir}: staged copy of {e['path']} is damaged; restore the tree from version control")
        with _step(p, live):
            _replace(p, data, e["mode"])
    _finish(root, doc)


@contextlib.contextmanager
def _step(path: Path, live: bool) -> Iterator[None]:
    """In a live change, an OSError on ``path`` becomes :class:`_StepFailed` (which the change undoes)."""
    try:
        yield
    except OSError as exc:
        if not live:
            raise
        raise _StepFailed(path, exc) from exc


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
