"""Patch sets: ``manifest.json`` + ``changes.diff`` in ``quicsm/patches/<target>/<name>/`` or a user directory.

Shipped sets are read through :mod:`importlib.resources`, so they work from a wheel or a zip. Every
manifest is validated on load; a bad one raises :class:`~quicsm.errors.PatchError` naming the file and
the field, because a silently wrong manifest would make the engine patch the wrong thing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal, get_args

import msgspec

from quicsm.errors import PatchError
from quicsm.formats import checked
from quicsm.instrumentation.diff import FilePatch, parse_diff

__all__ = [
    "ALGORITHMS",
    "DIFF",
    "MANIFEST",
    "Manifest",
    "PatchSet",
    "check_relative_path",
    "find_patch_set",
    "load_patch_set",
    "load_shipped",
    "manifest_dict",
    "shipped_patch_sets",
    "shipped_set_dirs",
]

Algorithm = Literal["cubic", "reno", "bbr", "bbr2", "bbr3"]
ALGORITHMS: tuple[str, ...] = get_args(Algorithm)
MANIFEST = "manifest.json"
DIFF = "changes.diff"
Text = Annotated[str, msgspec.Meta(pattern=r"\S")]
"""A string with something in it."""


class ManifestUpstream(msgspec.Struct, frozen=True):
    repository: Text
    commit: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{40}$")] | None = None
    """Required but for ported sets and Go module releases pinned by ``module.path/version/sum``."""
    date: Annotated[str, msgspec.Meta(pattern=r"^\d{4}-\d{2}-\d{2}$")] | None = None
    """YYYY-MM-DD; required but for ported sets."""
    path_root: str = ""


class ManifestFile(msgspec.Struct, frozen=True):
    path: Text
    """Relative to the target's source root."""
    sha256: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}$")]
    """Of the pristine file."""

    @property
    def basename(self) -> str:
        return PurePosixPath(self.path).name


class ManifestValidated(msgspec.Struct):
    how: Text


class Manifest(msgspec.Struct):
    """A patch set's ``manifest.json`` (docs/patching.md); other fields (``ported_from``, ``module``,
    ...) are kept as the set's extras."""

    name: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")]
    target: Text
    algorithm: Algorithm
    era: Text
    description: Text
    upstream: ManifestUpstream
    files: Annotated[list[ManifestFile], msgspec.Meta(min_length=1)]
    states: Annotated[list[Annotated[str, msgspec.Meta(min_length=1)]], msgspec.Meta(min_length=1)]
    runtime: Text
    validated: ManifestValidated


@dataclass(frozen=True)
class PatchSet:
    """A validated patch set. ``extra`` keeps manifest keys the engine does not interpret (``ported_from``...)."""

    name: str
    target: str
    algorithm: str
    era: str
    description: str
    upstream: ManifestUpstream
    """Where a set was made and validated (None for the commit of a ported set without one)."""
    files: tuple[ManifestFile, ...]
    states: tuple[str, ...]
    runtime: str
    validated: dict[str, Any]
    diff_text: str
    origin: str
    """Where it was loaded from (``shipped:<target>/<name>`` or a directory path), for messages."""
    extra: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def file_patches(self) -> list[FilePatch]:
        return parse_diff(self.diff_text, source=f"{self.origin}/{DIFF}")

    def file(self, path: str) -> ManifestFile:
        for f in self.files:
            if f.path == path:
                return f
        raise KeyError(path)

    @property
    def date(self) -> str:
        return self.upstream.date or ""

    @property
    def added_lines(self) -> int:
        return sum(h.added for fp in self.file_patches for h in fp.hunks)


def check_relative_path(path: str, where: str) -> None:
    """Refuse a patch path that could leave the source root (absolute, ``..``, backslash, empty parts)."""
    if not path or path.startswith("/") or re.match(r"^[A-Za-z]:", path) or "\\" in path or "\0" in path:
        raise PatchError(f"{where}: path {path!r} must be relative to the source root")
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise PatchError(f"{where}: path {path!r} leaves the source root or is not normalised ('..', '.', '//')")
    if parts[0] == ".git" or ".git" in parts:
        raise PatchError(f"{where}: path {path!r} points into .git")


def _validate(m: Any, diff_text: str, where: str, dir_name: str | None, target_dir: str | None) -> PatchSet:
    if not isinstance(m, dict):
        raise PatchError(f"{where}: top level must be a JSON object")
    man = checked(m, Manifest, where, error=PatchError)
    name, target, up = man.name, man.target, man.upstream
    if dir_name is not None and name != dir_name:
        raise PatchError(f"{where}: name: is {name!r} but the directory is {dir_name!r}")
    if target_dir is not None and target != target_dir:
        raise PatchError(f"{where}: target: is {target!r} but the set lives under patches/{target_dir}/")
    # A Go module release fetched from the module proxy is pinned by its go.sum hash instead of a commit.
    go_module = isinstance(m.get("module"), dict) and all(
        isinstance(m["module"].get(k), str) and m["module"][k] for k in ("path", "version", "sum")
    )
    if up.commit is None and "ported_from" not in m and not go_module:
        raise PatchError(
            f"{where}: upstream.commit: required (only ported sets and Go module "
            f"releases with module.path/version/sum may leave it null)"
        )
    if up.date is None and "ported_from" not in m:
        raise PatchError(f"{where}: upstream.date: required")
    for k, f in enumerate(man.files):
        check_relative_path(f.path, f"{where}: files[{k}]")
        if any(p.path == f.path for p in man.files[:k]):
            raise PatchError(f"{where}: files[{k}]: path {f.path!r} listed twice")
    extra = {k: v for k, v in m.items() if k not in Manifest.__struct_fields__}
    ps = PatchSet(
        name,
        target,
        man.algorithm,
        man.era,
        man.description,
        up,
        tuple(man.files),
        tuple(man.states),
        man.runtime,
        m["validated"],
        diff_text,
        where.rsplit("/", 1)[0],
        extra,
    )
    diff_where = f"{ps.origin}/{DIFF}"
    fps = ps.file_patches
    for fp in fps:
        for p in (fp.old_path, fp.new_path):
            if p is not None:
                check_relative_path(p, f"{diff_where}:{fp.line_no}")
        if fp.old_path is not None and fp.new_path is not None and fp.old_path != fp.new_path:
            raise PatchError(f"{diff_where}:{fp.line_no}: renames are not supported ({fp.old_path} -> {fp.new_path})")
        if fp.deletes:
            raise PatchError(f"{diff_where}:{fp.line_no}: a patch set may not delete {fp.old_path}")
    in_diff = [fp.path for fp in fps]
    if len(set(in_diff)) != len(in_diff):
        raise PatchError(f"{diff_where}: a file appears in more than one section; merge its hunks")
    listed = {f.path for f in man.files}
    if set(in_diff) != listed:
        extra_d = sorted(set(in_diff) - listed)
        missing = sorted(listed - set(in_diff))
        raise PatchError(
            f"{where}: field 'files' does not match {DIFF}"
            + (f"; in the diff but not listed: {', '.join(extra_d)}" if extra_d else "")
            + (f"; listed but not in the diff: {', '.join(missing)}" if missing else "")
        )
    return ps


def _load(
    manifest: Traversable, diff: Traversable, where: str, dir_name: str | None, target_dir: str | None
) -> PatchSet:
    mpath = f"{where}/{MANIFEST}"
    try:
        mtext = manifest.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PatchError(f"{mpath}: missing (a patch set directory holds {MANIFEST} and {DIFF})") from None
    try:
        dtext = diff.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PatchError(f"{where}/{DIFF}: missing (a patch set directory holds {MANIFEST} and {DIFF})") from None
    return _validate(checked(mtext, Any, mpath, error=PatchError), dtext, mpath, dir_name, target_dir)


def load_patch_set(path: str | Path) -> PatchSet:
    """Load a patch set from a directory (or its manifest.json) the user names."""
    p = Path(path)
    if p.is_file() and p.name == MANIFEST:
        p = p.parent
    if not p.is_dir():
        raise PatchError(f"{p}: not a patch set directory (expected {MANIFEST} and {DIFF} inside)")
    return _load(p / MANIFEST, p / DIFF, str(p), None, None)


def shipped_set_dirs(target: str | None = None) -> list[tuple[str, str, Traversable]]:
    """(target, set name, directory) of every shipped set, without loading them."""
    root = resources.files("quicsm").joinpath("patches")
    out: list[tuple[str, str, Traversable]] = []
    if not root.is_dir():
        return out
    for tdir in sorted(root.iterdir(), key=lambda t: t.name):
        if not tdir.is_dir() or tdir.name.startswith((".", "_")) or (target and tdir.name != target):
            continue
        for sdir in sorted(tdir.iterdir(), key=lambda t: t.name):
            if sdir.is_dir() and not sdir.name.startswith((".", "_")):
                out.append((tdir.name, sdir.name, sdir))
    return out


def load_shipped(target: str, name: str, sdir: Traversable) -> PatchSet:
    return _load(sdir / MANIFEST, sdir / DIFF, f"shipped:{target}/{name}", name, target)


def shipped_patch_sets(target: str | None = None, *, errors: list[PatchError] | None = None) -> list[PatchSet]:
    """Every patch set shipped with quicsm (optionally of one target), sorted by target, algorithm, date.

    A broken set raises, unless ``errors`` is given: then it is collected there and skipped, so one bad
    set of another target does not stop the others from being used.
    """
    out: list[PatchSet] = []
    for t, name, sdir in shipped_set_dirs(target):
        try:
            out.append(load_shipped(t, name, sdir))
        except PatchError as exc:
            if errors is None:
                raise
            errors.append(exc)
    out.sort(key=lambda s: (s.target, s.algorithm, s.date, s.name))
    return out


def find_patch_set(name_or_path: str) -> PatchSet:
    """A shipped set by name, or a user directory by path."""
    p = Path(name_or_path)
    if p.exists():
        return load_patch_set(p)
    dirs = shipped_set_dirs()
    for t, name, sdir in dirs:
        if name == name_or_path:
            return load_shipped(t, name, sdir)
    close = sorted(name for _, name, _ in dirs if name_or_path.lower() in name.lower())
    hint = f" (did you mean {', '.join(close[:5])}?)" if close else " (run `quicsm patch list`)"
    raise PatchError(f"no patch set named {name_or_path!r}{hint}")


def manifest_dict(ps: PatchSet) -> dict[str, Any]:
    """The manifest as JSON-ready data, in the documented key order."""
    d: dict[str, Any] = {
        "name": ps.name,
        "target": ps.target,
        "algorithm": ps.algorithm,
        "era": ps.era,
        "description": ps.description,
        "upstream": msgspec.to_builtins(ps.upstream),
        "files": msgspec.to_builtins(ps.files),
        "states": list(ps.states),
        "runtime": ps.runtime,
        "validated": ps.validated,
    }
    d.update(ps.extra)
    return d
