"""Find the sender files of a tree, tell its era from their content, and rank the patch sets for it.

Also the small file helpers the engine and the porter share (sha256, whitespace-normalised lines, the
check that a path stays inside the source root).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quicsm.errors import PatchError
from quicsm.instrumentation.appliers import Applier, default_applier
from quicsm.instrumentation.diff import render_file_patch
from quicsm.instrumentation.patchset import PatchSet, check_relative_path, shipped_patch_sets
from quicsm.instrumentation.targets import Identity, Located, Target, get_target, iter_located

__all__ = [
    "Candidate",
    "Detection",
    "Plan",
    "check_inside",
    "detect",
    "normalize_line",
    "plan_for",
    "rank_candidates",
    "sha256_bytes",
    "sha256_file",
]

_KIND_RANK = {"exact": 4, "applies": 3, "applied": 3, "similar": 1, "incomplete": 0}


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str | None:
    try:
        return sha256_bytes(path.read_bytes())
    except FileNotFoundError:
        return None


def normalize_line(line: str) -> str:
    """Whitespace-insensitive form of a source line, for matching across reformatting."""
    return " ".join(line.split())


def check_inside(root: Path, rel: str, where: str) -> Path:
    """The absolute path of ``rel`` under ``root``; refuses escapes and any symlink on the way."""
    check_relative_path(rel, where)
    root = root.resolve()
    cur = root
    for part in rel.split("/"):
        cur = cur / part
        if cur.is_symlink():
            real = os.path.realpath(cur)
            inside = real == str(root) or real.startswith(str(root) + os.sep)
            why = "which points outside the source root" if not inside else "(patching through symlinks is refused)"
            raise PatchError(f"{where}: {rel}: {cur.relative_to(root)} is a symlink to {os.readlink(cur)} {why}")
    return cur


@dataclass(frozen=True)
class Candidate:
    """How well one patch set fits a tree: ``exact`` (sha256 of every file), ``applies``, ``applied``, ``similar``."""

    patch_set: PatchSet
    kind: str
    score: float
    reason: str

    @property
    def usable(self) -> bool:
        return self.kind in ("exact", "applies", "applied")


@dataclass(frozen=True)
class Detection:
    target: Target
    located: Located
    identity: Identity
    candidates: tuple[Candidate, ...]

    @property
    def root(self) -> Path:
        return self.located.root

    def best(self, algorithm: str | None = None) -> Candidate | None:
        for c in self.candidates:
            if algorithm is None or c.patch_set.algorithm == algorithm:
                return c
        return None

    def to_json(self) -> dict[str, Any]:
        ident = self.identity
        return {
            "target": self.target.name,
            "root": str(self.located.root),
            "layout": self.located.layout,
            "files": {n: r for n, r in self.located.files.items() if n in self.target.known_names()},
            "algorithms": list(ident.algorithms),
            "era": ident.era,
            "dates": [ident.date_from, ident.date_to],
            "features": dict(ident.features),
            "notes": list(ident.notes),
            "candidates": [
                {
                    "set": c.patch_set.name,
                    "algorithm": c.patch_set.algorithm,
                    "kind": c.kind,
                    "score": round(c.score, 3),
                    "reason": c.reason,
                }
                for c in self.candidates
            ],
        }


@dataclass(frozen=True)
class Plan:
    """One patch set mapped onto a tree: paths as they are in this tree, and the diff rewritten for them."""

    name: str
    root: Path
    paths: dict[str, str]
    """Patch-set path -> path relative to ``root``."""
    diff: str
    file_diffs: dict[str, str]
    """Tree path -> the part of ``diff`` for that file."""
    pristine: dict[str, str]
    """Tree path -> sha256 the manifest (or the apply record) says the pristine file has."""
    patch_set: PatchSet | None = None


def _date_gap(date: str, ident: Identity) -> int:
    """Days between a set's date and the date range the tree's content allows (0 inside)."""
    try:
        d = _dt.date.fromisoformat(date)
    except ValueError:
        return 10**6
    lo = _dt.date.fromisoformat(ident.date_from) if ident.date_from > "0001" else _dt.date.min
    hi = _dt.date.fromisoformat(ident.date_to) if ident.date_to < "9999" else _dt.date.max
    if d < lo:
        return (lo - d).days
    if d > hi:
        return (d - hi).days
    return 0


def plan_for(ps: PatchSet, located: Located) -> Plan:
    """Map a patch set's paths onto a located tree; refuses paths that leave it."""
    where = f"{ps.origin}/changes.diff"
    paths: dict[str, str] = {}
    file_diffs: dict[str, str] = {}
    pristine: dict[str, str] = {}
    for fp in ps.file_patches:
        rel = located.relpath_for(fp.path) if not fp.creates else fp.path
        if rel is None:
            raise PatchError(f"{located.root}: {ps.name} patches {fp.path}, which is not in this tree")
        check_inside(located.root, rel, where)
        paths[fp.path] = rel
        file_diffs[rel] = render_file_patch(fp, path=rel)
        pristine[rel] = ps.file(fp.path).sha256
    return Plan(ps.name, located.root, paths, "".join(file_diffs.values()), file_diffs, pristine, ps)


def _similarity(ps: PatchSet, located: Located) -> float:
    """Share of the set's context and removed lines (normalised, non-trivial) found in the tree's files."""
    hit = total = 0
    for fp in ps.file_patches:
        rel = located.relpath_for(fp.path)
        text = (located.root / rel).read_text(encoding="utf-8", errors="replace") if rel else ""
        have = {normalize_line(x) for x in text.splitlines()}
        for h in fp.hunks:
            for line in h.old_lines:
                n = normalize_line(line)
                if len(n) > 3:
                    total += 1
                    hit += n in have
    return hit / total if total else 0.0


def rank_candidates(
    target: Target, located: Located, ident: Identity, sets: Iterable[PatchSet], applier: Applier
) -> list[Candidate]:
    """Score every set of this target against the tree, best first."""
    out: list[Candidate] = []
    for ps in sets:
        if ps.target != target.name:
            continue
        missing = [fp.path for fp in ps.file_patches if not fp.creates and located.relpath_for(fp.path) is None]
        if missing:
            out.append(Candidate(ps, "incomplete", 0.0, f"tree lacks {', '.join(missing)}"))
            continue
        try:
            plan = plan_for(ps, located)
        except PatchError as exc:
            out.append(Candidate(ps, "incomplete", 0.0, str(exc)))
            continue
        shas = {rel: sha256_file(located.root / rel) for rel in plan.pristine}
        gap = _date_gap(ps.date, ident)
        era_note = "" if ps.era == ident.era else f"; era {ps.era} != tree era {ident.era}"
        forward = applier.check(located.root, plan.diff).ok
        if forward and all(shas[rel] == sha for rel, sha in plan.pristine.items()):
            out.append(Candidate(ps, "exact", 1.0, "sha256 of every file matches the manifest"))
        elif forward:
            out.append(
                Candidate(
                    ps, "applies", 0.95 - min(gap, 3650) / 36500, f"applies cleanly (set dated {ps.date}){era_note}"
                )
            )
        elif applier.check(located.root, plan.diff, reverse=True).ok:
            out.append(Candidate(ps, "applied", 0.95, "already applied to this tree"))
        else:
            sim = _similarity(ps, located)
            score = 0.8 * sim + (0.05 if ps.era == ident.era else 0) + (0.05 if gap == 0 else 0)
            out.append(
                Candidate(
                    ps,
                    "similar",
                    score,
                    f"does not apply; {sim:.0%} of its context lines found (set dated {ps.date}){era_note}",
                )
            )
    out.sort(key=lambda c: (-_KIND_RANK[c.kind], -c.score, _date_gap(c.patch_set.date, ident), c.patch_set.name))
    return out


def detect(
    src: str | Path,
    *,
    sets: Iterable[PatchSet] | None = None,
    applier: Applier | None = None,
    target: str | None = None,
) -> Detection:
    """Find the sender files under ``src``, tell the era from their content, and rank the known sets."""
    src = Path(src)
    if not src.exists():
        raise PatchError(f"{src}: no such file or directory")
    targets = [get_target(target)] if target else None
    hits = iter_located(src, targets)
    if not hits:
        raise PatchError(
            f"{src}: no congestion-control sender files found (looked for the upstream layouts and for files "
            f"named like tcp_cubic_sender_bytes.cc, bbr_sender.cc, bbr2_sender.cc, ...)"
        )
    idents = [(t, loc, t.identify(loc)) for t, loc in hits]
    own = [x for x in idents if not x[0].eras or x[2].era in x[0].eras]
    t, loc, ident = max(own or idents, key=lambda x: len(x[1].files))
    pool = list(sets) if sets is not None else shipped_patch_sets(t.name, errors=[])
    cands = rank_candidates(t, loc, ident, pool, applier or default_applier())
    return Detection(t, loc, ident, tuple(cands))
