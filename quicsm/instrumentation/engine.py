"""Detect, check, apply, revert and report patch sets on a user's source tree.

Guarantees (each one is tested): apply is all or nothing -- every touched file is backed up first and
restored and verified by sha256 if anything fails; applying twice reports "already applied" (a
reverse-apply check); revert restores the pristine bytes and verifies them against the sha256s
recorded at apply time (``.quicsm-patch.json`` in the source root) or in the manifest; a patch path
that would leave the source root (absolute, ``..``, through a symlink) is refused before any tool runs.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quicsm.errors import PatchError
from quicsm.instrumentation.appliers import Applier, default_applier
from quicsm.instrumentation.diff import parse_diff, render_file_patch
from quicsm.instrumentation.patchset import PatchSet, check_relative_path, shipped_patch_sets
from quicsm.instrumentation.targets import Identity, Located, Target, get_target, iter_located

__all__ = [
    "STATE_FILE",
    "ApplyResult",
    "Candidate",
    "Detection",
    "FileStatus",
    "Plan",
    "SetCheck",
    "apply",
    "check",
    "check_inside",
    "choose",
    "detect",
    "normalize_line",
    "plan_for",
    "revert",
    "sha256_bytes",
    "sha256_file",
    "status",
]

STATE_FILE = ".quicsm-patch.json"
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


# ---- detection -----------------------------------------------------------------------------------

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
            "candidates": [{"set": c.patch_set.name, "algorithm": c.patch_set.algorithm, "kind": c.kind,
                            "score": round(c.score, 3), "reason": c.reason} for c in self.candidates],
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


def rank_candidates(target: Target, located: Located, ident: Identity, sets: Iterable[PatchSet],
                    applier: Applier) -> list[Candidate]:
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
            out.append(Candidate(ps, "applies", 0.95 - min(gap, 3650) / 36500,
                                 f"applies cleanly (set dated {ps.date}){era_note}"))
        elif applier.check(located.root, plan.diff, reverse=True).ok:
            out.append(Candidate(ps, "applied", 0.95, "already applied to this tree"))
        else:
            sim = _similarity(ps, located)
            score = 0.8 * sim + (0.05 if ps.era == ident.era else 0) + (0.05 if gap == 0 else 0)
            out.append(Candidate(ps, "similar", score,
                                 f"does not apply; {sim:.0%} of its context lines found (set dated {ps.date})"
                                 f"{era_note}"))
    out.sort(key=lambda c: (-_KIND_RANK[c.kind], -c.score, _date_gap(c.patch_set.date, ident), c.patch_set.name))
    return out


def detect(src: str | Path, *, sets: Iterable[PatchSet] | None = None, applier: Applier | None = None,
           target: str | None = None) -> Detection:
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


# ---- state record --------------------------------------------------------------------------------

def _state_path(root: Path) -> Path:
    return root / STATE_FILE


def _read_state(root: Path) -> dict[str, Any]:
    p = _state_path(root)
    if not p.exists():
        return {"format": 1, "applied": []}
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise PatchError(f"{p}: unreadable apply record ({exc}); remove it if the tree is pristine") from None
    if not isinstance(data, dict) or not isinstance(data.get("applied"), list):
        raise PatchError(f"{p}: not a quicsm apply record (field 'applied' missing)")
    return data


def _write_atomic(path: Path, data: bytes, mode: int | None = None) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _write_state(root: Path, state: dict[str, Any]) -> None:
    p = _state_path(root)
    if not state["applied"]:
        if p.exists():
            p.unlink()
        return
    _write_atomic(p, (json.dumps(state, indent=1, sort_keys=True) + "\n").encode())


def _plan_from_record(root: Path, rec: dict[str, Any]) -> Plan:
    diff = rec["diff"]
    fps = parse_diff(diff, source=f"{_state_path(root)} ({rec['set']})")
    files = {f["path"]: f for f in rec["files"]}
    file_diffs = {}
    for fp in fps:
        check_inside(root, fp.path, str(_state_path(root)))
        file_diffs[fp.path] = render_file_patch(fp)
    return Plan(rec["set"], root, {f["set_path"]: p for p, f in files.items()}, diff, file_diffs,
                {p: f["pristine_sha256"] for p, f in files.items()})


# ---- choosing ------------------------------------------------------------------------------------

def choose(src: str | Path, *, set_name: str | None = None, algorithms: Iterable[str] = (),
           sets: Iterable[PatchSet] | None = None, applier: Applier | None = None,
           include_applied: bool = True) -> tuple[Detection, list[Plan], list[str]]:
    """The sets to use on ``src``: the named one, or the best usable one per algorithm present.

    Returns the detection, the plans and notes about algorithms for which nothing usable was found.
    """
    from quicsm.instrumentation.patchset import find_patch_set

    applier = applier or default_applier()
    pool = list(sets) if sets is not None else None
    if set_name:
        ps = find_patch_set(set_name) if pool is None else next((s for s in pool if s.name == set_name), None)
        if ps is None:
            raise PatchError(f"no patch set named {set_name!r}")
        det = detect(src, sets=[ps], applier=applier, target=ps.target)
        return det, [plan_for(ps, det.located)], []
    det = detect(src, sets=pool, applier=applier)
    wanted = list(algorithms) or list(det.identity.algorithms)
    plans: list[Plan] = []
    notes: list[str] = []
    used_files: set[str] = set()
    for algo in wanted:
        cands = [c for c in det.candidates if c.patch_set.algorithm == algo]
        usable = [c for c in cands if c.usable and (include_applied or c.kind != "applied")]
        if not usable:
            if algo in det.identity.algorithms and not (algo == "reno" and not cands):
                near = cands[0].patch_set if cands else None
                why = ""
                if near is not None and cands[0].kind == "similar":
                    sc = _check_plan(plan_for(near, det.located), applier)
                    why = "; fails on " + ", ".join(
                        f"{rel} ({msg.splitlines()[0] if msg else 'does not apply'})" for rel, msg in sc.problems.items())
                notes.append(f"{algo}: no pinned patch set applies"
                             + (f" (closest: {near.name}{why}; try `quicsm patch port {src} --from {near.name}`)"
                                if near else ""))
            continue
        plan = plan_for(usable[0].patch_set, det.located)
        if used_files & set(plan.file_diffs):
            continue  # e.g. a reno set over the same files as the chosen cubic set
        used_files |= set(plan.file_diffs)
        plans.append(plan)
    if not plans:
        raise PatchError(f"{src}: no patch set applies to this tree (era {det.identity.era}, "
                         f"{det.identity.date_from}..{det.identity.date_to}). " + " ".join(notes))
    return det, plans, notes


# ---- check / apply / revert / status ---------------------------------------------------------------

@dataclass(frozen=True)
class SetCheck:
    plan: Plan
    state: str
    """``applies``, ``applied`` (already), or ``fails``."""
    problems: dict[str, str] = field(default_factory=dict)
    """Tree path -> tool output, for files that neither apply nor are applied."""


def _check_plan(plan: Plan, applier: Applier) -> SetCheck:
    if applier.check(plan.root, plan.diff).ok:
        return SetCheck(plan, "applies")
    if applier.check(plan.root, plan.diff, reverse=True).ok:
        return SetCheck(plan, "applied")
    problems = {}
    for rel, fd in plan.file_diffs.items():
        fwd = applier.check(plan.root, fd)
        if not fwd.ok and not applier.check(plan.root, fd, reverse=True).ok:
            problems[rel] = fwd.output or "does not apply"
    if not problems:
        problems["*"] = "some files are patched and others are not; revert them or restore the pristine files"
    return SetCheck(plan, "fails", problems)


def _failure(sc: SetCheck) -> PatchError:
    lines = "; ".join(f"{rel}: {msg.splitlines()[0] if msg else ''}".strip() for rel, msg in sc.problems.items())
    return PatchError(f"{sc.plan.name} does not apply to {sc.plan.root}: {lines}")


def check(src: str | Path, *, set_name: str | None = None, algorithms: Iterable[str] = (),
          sets: Iterable[PatchSet] | None = None, applier: Applier | None = None) -> list[SetCheck]:
    applier = applier or default_applier()
    _, plans, _ = choose(src, set_name=set_name, algorithms=algorithms, sets=sets, applier=applier)
    return [_check_plan(p, applier) for p in plans]


@dataclass(frozen=True)
class ApplyResult:
    root: Path
    applied: tuple[str, ...]
    already: tuple[str, ...]
    notes: tuple[str, ...]
    files: tuple[str, ...]


def _backup(root: Path, rels: Iterable[str]) -> dict[str, tuple[bytes | None, int | None]]:
    out: dict[str, tuple[bytes | None, int | None]] = {}
    for rel in rels:
        p = root / rel
        try:
            out[rel] = (p.read_bytes(), p.stat().st_mode & 0o7777)
        except FileNotFoundError:
            out[rel] = (None, None)
    return out


def _restore(root: Path, backup: dict[str, tuple[bytes | None, int | None]]) -> int:
    """Put every backed-up file back and verify it by sha256; raises if a file cannot be restored."""
    bad = []
    for rel, (data, mode) in backup.items():
        p = root / rel
        if data is None:
            if p.exists():
                p.unlink()
            continue
        if sha256_file(p) != sha256_bytes(data):
            _write_atomic(p, data, mode)
        if sha256_file(p) != sha256_bytes(data):
            bad.append(rel)
    if bad:
        raise PatchError(f"{root}: could not restore {', '.join(bad)} byte-identically; restore them from "
                         f"version control")
    return len(backup)


def apply(src: str | Path, *, set_name: str | None = None, algorithms: Iterable[str] = (),
          sets: Iterable[PatchSet] | None = None, applier: Applier | None = None) -> ApplyResult:
    """Apply the chosen sets as one transaction; the tree is unchanged if anything fails."""
    applier = applier or default_applier()
    det, plans, notes = choose(src, set_name=set_name, algorithms=algorithms, sets=sets, applier=applier)
    root = det.root
    checks = [_check_plan(p, applier) for p in plans]
    for sc in checks:
        if sc.state == "fails":
            raise _failure(sc)
    todo = [sc.plan for sc in checks if sc.state == "applies"]
    already = tuple(sc.plan.name for sc in checks if sc.state == "applied")
    if not todo:
        return ApplyResult(root, (), already, tuple(notes), ())
    rels = sorted({rel for p in todo for rel in p.file_diffs})
    backup = _backup(root, [*rels, STATE_FILE])
    try:
        state = _read_state(root)
        for plan in todo:
            res = applier.apply(root, plan.diff)
            if not res.ok:
                raise PatchError(f"{applier.name} failed applying {plan.name}: {res.output or 'no output'}")
            files = []
            for set_path, rel in plan.paths.items():
                before = backup[rel][0]
                files.append({"path": rel, "set_path": set_path,
                              "pristine_sha256": sha256_bytes(before) if before is not None else None,
                              "patched_sha256": sha256_file(root / rel)})
            state["applied"] = [r for r in state["applied"] if r.get("set") != plan.name]
            state["applied"].append({"set": plan.name, "origin": plan.patch_set.origin if plan.patch_set else "",
                                     "applier": applier.name, "diff": plan.diff, "files": files,
                                     "at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")})
        _write_state(root, state)
    except BaseException as exc:
        n = _restore(root, backup)
        raise PatchError(f"{exc}; nothing was changed ({n} files restored and verified by sha256)") from exc
    return ApplyResult(root, tuple(p.name for p in todo), already, tuple(notes), tuple(rels))


def _applied_plans(src: Path, set_name: str | None, sets: Iterable[PatchSet] | None,
                   applier: Applier) -> tuple[Path, list[Plan], dict[str, Any]]:
    """The sets currently applied to ``src``: from the apply record, else by reverse-apply checks."""
    if set_name:
        det, plans, _ = choose(src, set_name=set_name, sets=sets, applier=applier)
        root = det.root
    else:
        det = detect(src, sets=sets, applier=applier)
        root = det.root
        plans = []
    state = _read_state(root)
    if set_name:
        recs = {r["set"]: r for r in state["applied"]}
        return root, [_plan_from_record(root, recs[p.name]) if p.name in recs else p for p in plans], state
    if state["applied"]:
        return root, [_plan_from_record(root, r) for r in state["applied"]], state
    plans = [plan_for(c.patch_set, det.located) for c in det.candidates if c.kind == "applied"]
    return root, plans, state


def revert(src: str | Path, *, set_name: str | None = None, sets: Iterable[PatchSet] | None = None,
           applier: Applier | None = None) -> ApplyResult:
    """Undo applied sets and verify every file is byte-identical to its pristine sha256."""
    applier = applier or default_applier()
    root, plans, state = _applied_plans(Path(src), set_name, sets, applier)
    if not plans:
        raise PatchError(f"{src}: no applied patch set found (nothing to revert)")
    todo: list[Plan] = []
    not_applied = []
    for plan in reversed(plans):
        if applier.check(root, plan.diff, reverse=True).ok:
            todo.append(plan)
        elif applier.check(root, plan.diff).ok:
            not_applied.append(plan.name)
        else:
            sc = _check_plan(plan, applier)
            raise PatchError(f"{plan.name} cannot be reverted: files were modified after patching ("
                             + "; ".join(f"{k}: {v.splitlines()[0] if v else ''}" for k, v in sc.problems.items())
                             + ")")
    if not todo:
        return ApplyResult(root, (), tuple(not_applied), (), ())
    rels = sorted({rel for p in todo for rel in p.file_diffs})
    backup = _backup(root, [*rels, STATE_FILE])
    try:
        for plan in todo:
            res = applier.apply(root, plan.diff, reverse=True)
            if not res.ok:
                raise PatchError(f"{applier.name} failed reverting {plan.name}: {res.output or 'no output'}")
            for rel, want in plan.pristine.items():
                got = sha256_file(root / rel)
                if want is not None and got != want and (plan.patch_set is None or rel in _recorded(state, plan)):
                    raise PatchError(f"{rel}: after revert sha256 is {got}, the pristine file had {want}")
        names = {p.name for p in todo}
        state["applied"] = [r for r in state["applied"] if r.get("set") not in names]
        _write_state(root, state)
    except BaseException as exc:
        n = _restore(root, backup)
        raise PatchError(f"{exc}; nothing was changed ({n} files restored and verified by sha256)") from exc
    return ApplyResult(root, tuple(p.name for p in todo), tuple(not_applied), (), tuple(rels))


def _recorded(state: dict[str, Any], plan: Plan) -> set[str]:
    return {f["path"] for r in state["applied"] if r.get("set") == plan.name for f in r["files"]}


@dataclass(frozen=True)
class FileStatus:
    set: str
    path: str
    status: str
    """``pristine``, ``patched``, ``modified-otherwise`` or ``missing``."""
    detail: str


def status(src: str | Path, *, set_name: str | None = None, sets: Iterable[PatchSet] | None = None,
           applier: Applier | None = None) -> list[FileStatus]:
    """Per file of the relevant sets: pristine, patched, or modified otherwise."""
    applier = applier or default_applier()
    src = Path(src)
    det = detect(src, sets=sets, applier=applier) if not set_name else None
    root = det.root if det else None
    if set_name:
        _, plans, _ = choose(src, set_name=set_name, sets=sets, applier=applier, include_applied=True)
        root = plans[0].root
    else:
        assert det is not None
        state = _read_state(det.root)
        if state["applied"]:
            plans = [_plan_from_record(det.root, r) for r in state["applied"]]
        else:
            _, plans, _ = choose(src, sets=sets, applier=applier)
    assert root is not None
    state = _read_state(root)
    recs = {(r["set"], f["path"]): f for r in state["applied"] for f in r["files"]}
    out: list[FileStatus] = []
    for plan in plans:
        for rel, fd in plan.file_diffs.items():
            sha = sha256_file(root / rel)
            rec = recs.get((plan.name, rel))
            if sha is None:
                out.append(FileStatus(plan.name, rel, "missing", "file not found"))
            elif rec and sha == rec["patched_sha256"]:
                out.append(FileStatus(plan.name, rel, "patched", "matches the sha256 recorded at apply"))
            elif (rec and sha == rec["pristine_sha256"]) or sha == plan.pristine.get(rel):
                out.append(FileStatus(plan.name, rel, "pristine", "matches the pristine sha256"))
            elif applier.check(root, fd).ok:
                out.append(FileStatus(plan.name, rel, "pristine", "patch applies (another version than the set's)"))
            elif applier.check(root, fd, reverse=True).ok:
                out.append(FileStatus(plan.name, rel, "patched", "patch is applied"))
            else:
                out.append(FileStatus(plan.name, rel, "modified-otherwise",
                                      "neither the patch nor its reverse applies"))
    return out
