"""Detect, check, apply, revert and report patch sets on a user's source tree.

Guarantees (each one is tested): apply is all or nothing, also under SIGKILL -- the new contents are
worked out on a scratch copy, then swapped in through a journal written before the first change
(:mod:`quicsm.instrumentation.journal`), which the next apply/revert/status finishes if the process
died; file modes are kept; applying twice reports "already applied" (a reverse-apply check); revert
restores the pristine bytes and modes and verifies them against the sha256s recorded at apply time
(``.quicsm-patch.json`` in the source root) or in the manifest; a patch path that would leave the
source root (absolute, ``..``, through a symlink) is refused before any tool runs.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quicsm.errors import PatchError
from quicsm.instrumentation import journal
from quicsm.instrumentation.appliers import Applier, default_applier
from quicsm.instrumentation.detection import (
    Candidate,
    Detection,
    Plan,
    check_inside,
    detect,
    normalize_line,
    plan_for,
    sha256_bytes,
    sha256_file,
)
from quicsm.instrumentation.diff import parse_diff, render_file_patch
from quicsm.instrumentation.journal import Change
from quicsm.instrumentation.patchset import PatchSet

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
    "pending",
    "plan_for",
    "recover",
    "revert",
    "sha256_bytes",
    "sha256_file",
    "status",
    "tree_state",
]

STATE_FILE = ".quicsm-patch.json"

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


def _plan_from_record(root: Path, rec: dict[str, Any]) -> Plan:
    diff = rec["diff"]
    fps = parse_diff(diff, source=f"{_state_path(root)} ({rec['set']})")
    files = {f["path"]: f for f in rec["files"]}
    file_diffs = {}
    for fp in fps:
        check_inside(root, fp.path, str(_state_path(root)))
        file_diffs[fp.path] = render_file_patch(fp)
    return Plan(
        rec["set"],
        root,
        {f["set_path"]: p for p, f in files.items()},
        diff,
        file_diffs,
        {p: f["pristine_sha256"] for p, f in files.items()},
    )


# ---- choosing ------------------------------------------------------------------------------------


def choose(
    src: str | Path,
    *,
    set_name: str | None = None,
    algorithms: Iterable[str] = (),
    sets: Iterable[PatchSet] | None = None,
    applier: Applier | None = None,
    include_applied: bool = True,
) -> tuple[Detection, list[Plan], list[str]]:
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
            if cands and all(c.kind == "incomplete" for c in cands):
                # the sets cannot even be mapped onto the tree (a file missing, a path refused as a
                # symlink): porting would not help, so say why
                notes.append(f"{algo}: no patch set can be used ({cands[0].patch_set.name}: {cands[0].reason})")
            elif algo in det.identity.algorithms and not (algo == "reno" and not cands):
                near = cands[0].patch_set if cands else None
                why = ""
                if near is not None and cands[0].kind == "similar":
                    sc = _check_plan(plan_for(near, det.located), applier)
                    why = "; fails on " + ", ".join(
                        f"{rel} ({msg.splitlines()[0] if msg else 'does not apply'})"
                        for rel, msg in sc.problems.items()
                    )
                notes.append(
                    f"{algo}: no pinned patch set applies"
                    + (
                        f" (closest: {near.name}{why}; try `quicsm patch port {src} --from {near.name}`)"
                        if near
                        else ""
                    )
                )
            continue
        plan = plan_for(usable[0].patch_set, det.located)
        if used_files & set(plan.file_diffs):
            continue  # e.g. a reno set over the same files as the chosen cubic set
        used_files |= set(plan.file_diffs)
        plans.append(plan)
    if not plans:
        raise PatchError(
            f"{src}: no patch set applies to this tree (era {det.identity.era}, "
            f"{det.identity.date_from}..{det.identity.date_to}). " + " ".join(notes)
        )
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


def check(
    src: str | Path,
    *,
    set_name: str | None = None,
    algorithms: Iterable[str] = (),
    sets: Iterable[PatchSet] | None = None,
    applier: Applier | None = None,
) -> list[SetCheck]:
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


def _mode_of(path: Path) -> int:
    """Permission bits of an existing file; for a new one what the umask gives (as an editor would)."""
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mask = os.umask(0o022)
        os.umask(mask)
        return 0o666 & ~mask


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _scratch_result(
    root: Path, rels: Iterable[str], plans: Iterable[Plan], applier: Applier, *, reverse: bool = False
) -> dict[str, bytes | None]:
    """What the files become when ``plans`` are applied (or reversed) in turn: worked out on a scratch copy
    of just those files, so the tool never writes into the tree and a failure changes nothing."""
    rels = list(rels)
    with tempfile.TemporaryDirectory(prefix="quicsm-apply-") as tmp:
        scratch = Path(tmp)
        for rel in rels:
            data = _read(root / rel)
            if data is not None:
                (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
                (scratch / rel).write_bytes(data)
        for plan in plans:
            res = applier.apply(scratch, plan.diff, reverse=reverse)
            if not res.ok:
                verb = "reverting" if reverse else "applying"
                raise PatchError(f"{applier.name} failed {verb} {plan.name}: {res.output or 'no output'}")
        return {rel: _read(scratch / rel) for rel in rels}


def _state_change(root: Path, state: dict[str, Any]) -> Change:
    before = _read(_state_path(root))
    after = (json.dumps(state, indent=1, sort_keys=True) + "\n").encode() if state["applied"] else None
    return Change(STATE_FILE, before, after, _mode_of(_state_path(root)))


def _roots(src: str | Path) -> list[Path]:
    """Every directory under ``src`` a target could take as its source root (where a journal would be)."""
    from quicsm.instrumentation.targets import all_targets

    src = Path(src)
    if src.is_file():
        src = src.parent
    roots = {src.resolve()}
    for t in all_targets():
        roots |= {(src / r).resolve() for r in t.roots if r}
    return sorted(roots)


def recover(src: str | Path) -> list[str]:
    """Finish a change a killed ``apply``/``revert`` left in its journal (in any possible source root)."""
    notes = []
    for root in _roots(src):
        note = journal.recover(root)
        if note:
            notes.append(f"{root}: {note}")
    return notes


def pending(src: str | Path) -> list[str]:
    """Interrupted changes waiting in a journal under ``src`` (nothing is modified)."""
    out = []
    for root in _roots(src):
        doc = journal.pending(root) if root.is_dir() else None
        if doc:
            out.append(
                f"{root}: an interrupted `{doc.get('op')}` of {doc.get('at')} is pending; "
                f"`quicsm patch status` (or apply/revert) completes it"
            )
    return out


def _record(
    plan: Plan,
    applier: Applier,
    pristine: dict[str, bytes | None],
    patched: dict[str, bytes | None],
    modes: dict[str, int],
    **extra: Any,
) -> dict[str, Any]:
    files = []
    for set_path, rel in plan.paths.items():
        before, after = pristine[rel], patched[rel]
        files.append(
            {
                "path": rel,
                "set_path": set_path,
                "pristine_sha256": sha256_bytes(before) if before is not None else None,
                "patched_sha256": sha256_bytes(after) if after is not None else None,
                "mode": modes[rel],
            }
        )
    return {
        "set": plan.name,
        "origin": plan.patch_set.origin if plan.patch_set else "",
        "applier": applier.name,
        "diff": plan.diff,
        "files": files,
        "at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        **extra,
    }


def _port_missing(
    src: str | Path, det: Detection, algorithms: Iterable[str], plans: list[Plan], applier: Applier, workdir: Path
) -> tuple[list[Plan], list[str], list[str]]:
    """Port a set for every algorithm that has none usable (files not already covered by ``plans``)."""
    from quicsm.instrumentation.patchset import load_patch_set
    from quicsm.instrumentation.porter import port as run_port

    covered = {rel for p in plans for rel in p.file_diffs}
    recorded = {f["path"]: r["set"] for r in _read_state(det.root)["applied"] for f in r["files"]}
    chosen = {p.patch_set.algorithm for p in plans if p.patch_set is not None}
    out: list[Plan] = []
    notes: list[str] = []
    already: list[str] = []
    for algo in list(algorithms) or list(det.identity.algorithms):
        cands = [c for c in det.candidates if c.patch_set.algorithm == algo]
        sources = [c.patch_set for c in cands if c.kind != "incomplete"]
        if algo in chosen or not cands:
            continue
        if not sources:
            notes.append(f"{algo}: nothing to port from ({cands[0].patch_set.name}: {cands[0].reason})")
            continue
        rels = {det.located.relpath_for(f.path) for f in sources[0].files}
        if covered & rels:
            continue  # e.g. reno over the files the cubic set already instruments
        done = sorted({recorded[r] for r in rels if r in recorded})
        if done:
            already += [d for d in done if d not in already]
            continue
        try:
            res, written = run_port(sources, src, workdir / algo, applier=applier)
        except PatchError as exc:
            notes.append(f"{algo}: {exc}")
            continue
        plan = plan_for(load_patch_set(written), det.located)
        covered |= set(plan.file_diffs)
        out.append(plan)
        notes.append(f"{algo}: no pinned set applied; ported {res.source.name} to this tree")
    return out, notes, already


def apply(
    src: str | Path,
    *,
    set_name: str | None = None,
    algorithms: Iterable[str] = (),
    sets: Iterable[PatchSet] | None = None,
    applier: Applier | None = None,
    port_missing: bool = False,
) -> ApplyResult:
    """Apply the chosen sets as one transaction; the tree is unchanged if anything fails.

    With ``port_missing``, an algorithm without a usable pinned set gets one ported on the fly (kept only
    in the apply record, which is all ``revert`` needs).
    """
    applier = applier or default_applier()
    recover(src)
    if not port_missing or set_name:
        det, plans, notes = choose(src, set_name=set_name, algorithms=algorithms, sets=sets, applier=applier)
    else:
        try:
            det, plans, _ = choose(src, algorithms=algorithms, sets=sets, applier=applier)
        except PatchError:
            det, plans = detect(src, sets=sets, applier=applier), []
        with tempfile.TemporaryDirectory(prefix="quicsm-port-") as tmp:
            ported, notes, recorded = _port_missing(src, det, algorithms, plans, applier, Path(tmp))
        plans += ported
        if not plans and recorded:
            return ApplyResult(det.root, (), tuple(recorded), tuple(notes), ())
        if not plans:
            raise PatchError(f"{src}: no patch set applies and none could be ported: " + "; ".join(notes))
    root = det.root
    checks = [_check_plan(p, applier) for p in plans]
    for sc in checks:
        if sc.state == "fails":
            raise _failure(sc)
    todo = [sc.plan for sc in checks if sc.state == "applies"]
    already = tuple(sc.plan.name for sc in checks if sc.state == "applied")
    state = _read_state(root)
    in_record = {r.get("set") for r in state["applied"]}
    # sets found applied but missing from the record (patched by hand, or by an older quicsm) join the
    # record, so that `status` shows their files and one `revert` undoes everything
    adopt = [sc.plan for sc in checks if sc.state == "applied" and sc.plan.name not in in_record]
    if not todo and not adopt:
        return ApplyResult(root, (), already, tuple(notes), ())
    rels = sorted({rel for p in todo for rel in p.file_diffs})
    try:
        before = {rel: _read(root / rel) for rel in rels}
        modes = {rel: _mode_of(root / rel) for rel in rels}
        after = _scratch_result(root, rels, todo, applier)
        for plan in adopt:
            arels = list(plan.file_diffs)
            now = {rel: _read(root / rel) for rel in arels}
            orig = _scratch_result(root, arels, [plan], applier, reverse=True)
            amodes = {rel: _mode_of(root / rel) for rel in arels}
            state["applied"].append(_record(plan, applier, orig, now, amodes, adopted=True))
        for plan in todo:
            state["applied"] = [r for r in state["applied"] if r.get("set") != plan.name]
            state["applied"].append(_record(plan, applier, before, after, modes))
        changes = [Change(rel, before[rel], after[rel], modes[rel]) for rel in rels]
        changes.append(_state_change(root, state))
    except PatchError as exc:
        raise PatchError(f"{exc}; nothing was changed") from None
    journal.commit(root, changes, "apply")  # undoes itself on an error it catches
    return ApplyResult(root, tuple(p.name for p in todo), already, tuple(notes), tuple(rels))


def _applied_plans(
    src: Path, set_name: str | None, sets: Iterable[PatchSet] | None, applier: Applier
) -> tuple[Path, list[Plan], dict[str, Any]]:
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


def revert(
    src: str | Path,
    *,
    set_name: str | None = None,
    sets: Iterable[PatchSet] | None = None,
    applier: Applier | None = None,
) -> ApplyResult:
    """Undo applied sets and verify every file is byte-identical to its pristine sha256."""
    applier = applier or default_applier()
    recover(src)
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
            raise PatchError(
                f"{plan.name} cannot be reverted: files were modified after patching ("
                + "; ".join(f"{k}: {v.splitlines()[0] if v else ''}" for k, v in sc.problems.items())
                + ")"
            )
    if not todo:
        return ApplyResult(root, (), tuple(not_applied), (), ())
    rels = sorted({rel for p in todo for rel in p.file_diffs})
    modes = {f["path"]: f["mode"] for r in state["applied"] for f in r["files"] if "mode" in f}
    try:
        before = {rel: _read(root / rel) for rel in rels}
        after = _scratch_result(root, rels, todo, applier, reverse=True)
        for plan in todo:
            for rel, want in plan.pristine.items():
                data = after[rel]
                got = sha256_bytes(data) if data is not None else None
                if want is not None and got != want and (plan.patch_set is None or rel in _recorded(state, plan)):
                    raise PatchError(f"{rel}: after revert sha256 is {got}, the pristine file had {want}")
        names = {p.name for p in todo}
        state["applied"] = [r for r in state["applied"] if r.get("set") not in names]
        changes = [Change(rel, before[rel], after[rel], modes.get(rel, _mode_of(root / rel))) for rel in rels]
        changes.append(_state_change(root, state))
    except PatchError as exc:
        raise PatchError(f"{exc}; nothing was changed") from None
    journal.commit(root, changes, "revert")
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


def status(
    src: str | Path,
    *,
    set_name: str | None = None,
    sets: Iterable[PatchSet] | None = None,
    applier: Applier | None = None,
) -> list[FileStatus]:
    """Per file of the relevant sets: pristine, patched, or modified otherwise."""
    applier = applier or default_applier()
    src = Path(src)
    recover(src)
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
            covered = {rel for p in plans for rel in p.file_diffs}
            try:  # algorithms the record does not cover are shown too (a set patched by hand, say)
                _, more, _ = choose(src, sets=sets, applier=applier)
            except PatchError:
                more = []
            for p in more:
                if not covered & set(p.file_diffs):
                    plans.append(p)
                    covered |= set(p.file_diffs)
        else:
            try:
                _, plans, _ = choose(src, sets=sets, applier=applier)
            except PatchError:  # nothing applies: report against the closest set of each algorithm
                best: dict[str, Candidate] = {}
                for c in det.candidates:
                    if c.kind != "incomplete":
                        best.setdefault(c.patch_set.algorithm, c)
                if not best:
                    raise
                plans = [plan_for(c.patch_set, det.located) for c in best.values()]
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
                out.append(
                    FileStatus(plan.name, rel, "modified-otherwise", "neither the patch nor its reverse applies")
                )
    return out


def tree_state(rows: Iterable[FileStatus]) -> str:
    """One word for the whole tree: ``pristine``, ``patched`` (every file of every set), or ``mixed``."""
    kinds = {r.status for r in rows}
    return kinds.pop() if len(kinds) == 1 and kinds <= {"pristine", "patched"} else "mixed"
