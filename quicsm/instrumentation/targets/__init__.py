"""Patch targets: code bases the engine can instrument, and the registry that holds them.

A target knows where its congestion-control sender files live (in a checkout or a loose directory),
how to tell its era and version from their *content*, and the little language knowledge the porter
needs (enclosing function of a line, spelling changes between eras). The engine and the porter only
talk to this interface, so a new code base is one module in this package that calls :func:`register`;
modules here are imported on first use of the registry.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, ClassVar

from quicsm.errors import PatchError
from quicsm.plugins import Registry

if TYPE_CHECKING:
    from quicsm.instrumentation.diff import Edit

__all__ = [
    "SOURCE_FILE",
    "Identity",
    "Located",
    "Release",
    "Target",
    "read_source_file",
    "all_targets",
    "get_target",
    "register",
]


@dataclass(frozen=True)
class Located:
    """Sender files found under a user's path: the source root patch paths are relative to, and the files."""

    target: str
    root: Path
    files: Mapping[str, str]
    """File name -> path relative to ``root`` (only the files the target cares about)."""
    layout: str
    """``checkout`` (the upstream directory structure) or ``loose`` (files found by name)."""

    def relpath_for(self, patch_path: str) -> str | None:
        """Where a patch-set path lives in this tree: the same path if present, else the same file name."""
        if (self.root / patch_path).is_file():
            return patch_path
        return self.files.get(PurePosixPath(patch_path).name)

    def read(self, name: str) -> str | None:
        rel = self.files.get(name)
        if rel is None:
            return None
        try:
            return (self.root / rel).read_text(encoding="utf-8", errors="surrogateescape")
        except OSError:
            return None


@dataclass(frozen=True)
class Identity:
    """What the content says about a tree: era, features seen, and the date range they allow."""

    era: str
    algorithms: tuple[str, ...]
    features: Mapping[str, str]
    """Feature name -> the evidence (a short quote or file name)."""
    date_from: str = "0000-00-00"
    date_to: str = "9999-99-99"
    notes: tuple[str, ...] = field(default_factory=tuple)


_FUNC_CPP = re.compile(r"^(?:[\w:<>,*&~\s]+?\s)?[*&]?((?:\w+::)+~?\w+)\s*\(")
_FUNC_GO = re.compile(r"^func\s+(?:\([^)]*\)\s*)?(\w+)\s*[\[(]")
_SKIP_DIRS = frozenset({".git", "node_modules", "out", "build", "third_party_cache", "__pycache__"})


class Target:
    """Base class of a target. Subclasses set the class attributes and usually override :meth:`identify`."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    eras: ClassVar[tuple[str, ...]] = ()
    algorithm_files: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    """Algorithm -> file names whose presence means the tree has that algorithm (first one is the sender)."""
    classes: ClassVar[Mapping[str, str]] = {}
    """File name -> main class/type it defines (for messages and docs)."""
    roots: ClassVar[tuple[str, ...]] = ("",)
    """Candidate source roots below the user's path (``""`` = the path itself)."""
    dirs: ClassVar[tuple[str, ...]] = ()
    """Directories below a source root that hold the sender files, newest layout first."""
    extensions: ClassVar[tuple[str, ...]] = (".cc", ".h")
    loose_depth: ClassVar[int] = 3
    exclusive_note: ClassVar[str] = ""
    """Why two of its sets that change the same lines cannot both be applied (said in that error)."""

    # ---- locating -------------------------------------------------------------------------------
    layout_names: ClassVar[frozenset[str]] = frozenset()
    """Sender file names too common to look for by name alone (``mod.rs``): known inside the upstream
    layout (``dirs``), never searched for in a loose tree (a crate has a dozen of them)."""

    def known_names(self) -> set[str]:
        names = {n for files in self.algorithm_files.values() for n in files}
        names.update(self.classes)
        names.update(self.layout_names)
        return names

    def locate(self, src: Path, *, loose: bool = True) -> Located | None:
        """Find the source root and sender files under ``src``; None if this target has none there.

        The upstream layouts (``roots`` x ``dirs``) are tried first; with ``loose`` a shallow search by
        file name follows (a directory of copied files, or a tree with another layout).
        """
        src = Path(src)
        if src.is_file():
            src = src.parent
        best: tuple[int, Path, dict[str, str]] | None = None
        for r in self.roots:
            root = src / r if r else src
            if not root.is_dir():
                continue
            files: dict[str, str] = {}
            for d in self.dirs:
                full = root / d
                if not full.is_dir():
                    continue
                for entry in sorted(os.listdir(full)):
                    if entry.endswith(self.extensions) and entry not in files and (full / entry).is_file():
                        files[entry] = f"{d}/{entry}"
            hits = len(self.known_names() & set(files))
            if hits and (best is None or hits > best[0]):
                best = (hits, root, files)
        if best is not None:
            return Located(self.name, best[1].resolve(), best[2], "checkout")
        return self._locate_loose(src) if loose else None

    def _locate_loose(self, src: Path) -> Located | None:
        """Files found by name anywhere (shallow) under ``src``; each name must be unique."""
        wanted = self.known_names() - self.layout_names
        found: dict[str, str] = {}
        base = src.resolve()
        for dirpath, dirnames, filenames in os.walk(base):
            rel_dir = Path(dirpath).relative_to(base)
            depth = len(rel_dir.parts)
            dirnames[:] = sorted(
                d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(".") and depth < self.loose_depth
            )
            for fn in filenames:
                if fn in wanted:
                    rel = (rel_dir / fn).as_posix()
                    if fn in found and found[fn] != rel:
                        raise PatchError(f"{src}: {fn} found twice ({found[fn]}, {rel}); point at one tree")
                    found[fn] = rel
        if not any(n in found for files in self.algorithm_files.values() for n in files[:1]):
            return None
        return Located(self.name, base, dict(sorted(found.items())), "loose")

    def algorithms(self, located: Located) -> tuple[str, ...]:
        return tuple(a for a, files in self.algorithm_files.items() if files and files[0] in located.files)

    # ---- identifying ----------------------------------------------------------------------------
    def identify(self, located: Located) -> Identity:
        """Era and features from content. The base class knows nothing era-specific."""
        return Identity(self.eras[-1] if self.eras else "", self.algorithms(located), {})

    # ---- porter hooks ---------------------------------------------------------------------------
    def function_at(self, lines: list[str], index: int) -> str | None:
        """Name of the function whose definition encloses ``lines[index]`` (scan back to a column-0 header)."""
        for k in range(min(index, len(lines) - 1), -1, -1):
            line = lines[k]
            if not line or line[0] in " \t#/}{":
                continue
            m = _FUNC_CPP.match(line) or _FUNC_GO.match(line)
            if m and not line.rstrip().endswith(";"):
                return m.group(1).split("::")[-1] if "::" in m.group(1) else m.group(1)
        return None

    def header_name(self, line: str) -> str | None:
        """The function name if ``line`` starts a column-0 function definition."""
        if not line or line[0] in " \t#/}{" or line.rstrip().endswith(";"):
            return None
        m = _FUNC_CPP.match(line) or _FUNC_GO.match(line)
        return m.group(1).split("::")[-1] if m else None

    def functions(self, lines: list[str]) -> list[tuple[str, int, int, int]]:
        """Column-0 function definitions: (name, header line, first body line, closing ``}`` line).

        Brace languages only (C++, Go): the body ends at the next line that is exactly ``}``.
        """
        out: list[tuple[str, int, int, int]] = []
        n = len(lines)
        i = 0
        while i < n:
            name = self.header_name(lines[i])
            if name is None:
                i += 1
                continue
            j = i
            while j < n and "{" not in lines[j] and not lines[j].rstrip().endswith(";"):
                j += 1
            if j >= n or "{" not in lines[j]:
                i += 1
                continue
            if lines[j].rstrip().endswith("}"):  # one-line body: ``Foo::~Foo() {}``
                out.append((name, i, j, j))
                i = j + 1
                continue
            k = j + 1
            while k < n and lines[k].rstrip() != "}" and self.header_name(lines[k]) is None:
                k += 1
            if k < n and lines[k].rstrip() == "}":
                out.append((name, i, j + 1, k))
                i = k + 1
            else:
                i += 1
        return out

    def check_ported(self, path: str, text: str, added: list[str]) -> list[str]:
        """Problems of a ported file the text alone cannot show (e.g. a package the added lines use but
        the new file no longer imports). Any problem makes the port fail; nothing is written."""
        return []

    def adapt_added_lines(self, lines: list[str], old: Identity | None, new: Identity) -> list[str]:
        """Rewrite lines a patch adds when moving it to another era (include spelling, renamed types)."""
        return lines

    def port_edits(self, edits: list[Edit]) -> list[Edit]:
        """The changes of one file the porter should place by anchors; a target may keep some back and
        make them itself in :meth:`finish_ported` (Go: the import block, rebuilt for the new file)."""
        return edits

    def finish_ported(
        self, located: Located, path: str, text: str, added: list[str], set_lines: list[str]
    ) -> tuple[str, list[str]]:
        """Last touches to a ported file (``set_lines``: every context and added line the set has for it);
        returns the text and problems that make the port fail (nothing is written then)."""
        return text, []

    # ---- what a tree is -------------------------------------------------------------------------
    def release(self, located: Located) -> Release | None:
        """The upstream release this tree is a copy of (version, checksum, ...), when the tree says so
        (a module-cache or registry copy, or one ``quicsm patch fetch`` wrote, with its
        :data:`SOURCE_FILE`); None for a checkout or loose files that do not tell."""
        return None


SOURCE_FILE = ".quicsm-source.json"
"""Written by ``quicsm patch fetch`` (and the testbed) at the top of a fetched tree: which release of which
registry it is, so detection, porting and ``patch save`` can name it (the tree itself may not say)."""


@dataclass(frozen=True)
class Release:
    """An upstream release a tree is a copy of."""

    version: str
    manifest: Mapping[str, object]
    """Entries for a patch set made for this release: ``{"module": {...}}`` (Go) or ``{"crate": {...}}``."""
    commit: str | None = None
    date: str | None = None
    source: str = ""
    """How it was identified (``go module cache``, ``quicsm patch fetch``, ...)."""


def read_source_file(root: Path) -> dict[str, object] | None:
    """The :data:`SOURCE_FILE` of a fetched tree, or None."""
    import json

    try:
        data = json.loads((root / SOURCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


_REGISTRY: Registry[Target] = Registry(__name__, __path__)


def register(target: Target) -> Target:
    """Add a target (called by each module in this package at import time)."""
    if not target.name:
        raise ValueError("a target needs a name")
    return _REGISTRY.register(target.name, target)


def all_targets() -> list[Target]:
    targets = _REGISTRY.load()
    return [targets[k] for k in sorted(targets)]


def get_target(name: str) -> Target:
    targets = _REGISTRY.load()
    try:
        return targets[name]
    except KeyError:
        raise PatchError(
            f"no patch target named {name!r} (known: {', '.join(sorted(targets)) or 'none'}); "
            f"a target is a module in quicsm/instrumentation/targets/"
        ) from None


def iter_located(src: Path, targets: Iterable[Target] | None = None) -> list[tuple[Target, Located]]:
    """Every target that finds sender files under ``src``: upstream layouts first, loose search only if none."""
    ts = list(targets) if targets is not None else all_targets()
    for loose in (False, True):
        out = []
        for t in ts:
            loc = t.locate(src, loose=loose)
            if loc is not None:
                out.append((t, loc))
        if out:
            return out
    return []


__all__.append("iter_located")
