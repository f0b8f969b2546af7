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
import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from quicsm.errors import PatchError, reading
from quicsm.files import file_mode
from quicsm.formats import checked
from quicsm.instrumentation import journal
from quicsm.instrumentation.appliers import Applier, default_applier
from quicsm.instrumentation.detection import (
    Candidate,
    Detection,
    Plan,
    check_inside,
    detect,
    plan_for,
    sha256_bytes,
    sha256_file,
)
from quicsm.instrumentation.diff import parse_diff, render_file_patch
from quicsm.instrumentation.journal import Change
from quicsm.instrumentation.patchset import PatchSet, manifest_dict

__all__ = [
    "STATE_FILE",
    "ApplyResult",
    "Candidate",
    "Detection",
    "FileStatus",
    "NoSetApplies",
    "Note",
    "Plan",
    "SetCheck",
    "apply",
    "check",
    "check_inside",
    "choose",
    "detect",
    "pending",
    "plan_for",
    "recover",
    "revert",
    "saved_sets",
    "sha256_bytes",
    "sha256_file",
    "port_hint",
    "set_states",
    "status",
    "tree_state",
]

STATE_FILE = ".quicsm-patch.json"

# ---- state record --------------------------------------------------------------------------------


def _state_path(root: Path) -> Path:
    return root / STATE_FILE


class _Record(TypedDict):
    """The apply record's top level (each entry of ``applied`` is one set's, written by :func:`_record`)."""

    format: NotRequired[int]
    applied: list[dict[str, Any]]


def _read_state(root: Path) -> dict[str, Any]:
    p = _state_path(root)
    if not p.exists():
        return {"format": 1, "applied": []}
    with reading(str(p)):
        raw = p.read_bytes()
    return dict(checked(raw, _Record, f"{p}: not a quicsm apply record", error=PatchError))


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


class Note(str):
    """A note about one algorithm (a ``str``, so callers may print it), with what kind of note it is."""

    algo: str
    kind: str
    """``missing`` (no shipped set applies: porting may help), ``unusable``, ``exclusive``, ``same``."""

    def __new__(cls, algo: str, kind: str, text: str) -> Note:
        obj = super().__new__(cls, text)
        obj.algo = algo
        obj.kind = kind
        return obj


def _names(set_name: str | Sequence[str] | None) -> list[str]:
    return list(dict.fromkeys([set_name] if isinstance(set_name, str) else list(set_name or [])))


def _composable(root: Path, plans: list[Plan], applier: Applier) -> bool:
    """Whether the plans apply one after the other (on a scratch copy of their files)."""
    rels = sorted({rel for p in plans for rel in p.file_diffs})
    try:
        _scratch_result(root, rels, plans, applier)
    except PatchError:
        return False
    return True


def _exclusive(a: Plan, b: Plan, det: Detection) -> str:
    """Why two sets cannot be applied together: the lines they change, and the target's own reason."""
    shared = sorted(set(a.file_diffs) & set(b.file_diffs))
    why = f"{a.name} and {b.name} change the same lines of {', '.join(shared)}"
    note = det.target.exclusive_note
    return f"{why} ({note})" if note else why


def _held(holder: Plan, algo: str, files: Iterable[str], det: Detection) -> str:
    """Why ``algo``'s set is left out: ``holder`` changes the same lines of ``files`` (and the target's reason)."""
    why = f"{holder.name} and the {algo} set both change the same lines of {', '.join(sorted(files))}"
    return f"{why} ({det.target.exclusive_note})" if det.target.exclusive_note else why


def _plans_for_names(
    src: str | Path, names: list[str], pool: list[PatchSet] | None, applier: Applier
) -> tuple[Detection, list[Plan]]:
    from quicsm.instrumentation.patchset import find_patch_set

    psets: list[PatchSet] = []
    for name in names:
        ps = find_patch_set(name) if pool is None else next((s for s in pool if s.name == name), None)
        if ps is None:
            raise PatchError(f"no patch set named {name!r}")
        psets.append(ps)
    targets = sorted({ps.target for ps in psets})
    if len(targets) > 1:
        raise PatchError(f"--set names sets of several targets ({', '.join(targets)}): one tree has one target")
    det = detect(src, sets=psets, applier=applier, target=psets[0].target)
    plans = [plan_for(ps, det.located) for ps in psets]
    for i, plan in enumerate(plans):
        for other in plans[:i]:
            if set(other.file_diffs) & set(plan.file_diffs) and other.diff != plan.diff:
                if not _composable(det.root, [other, plan], applier):
                    raise PatchError(f"--set {other.name} --set {plan.name}: {_exclusive(other, plan, det)}; give one")
    unique = [p for i, p in enumerate(plans) if all(p.diff != q.diff for q in plans[:i])]
    return det, unique


def choose(
    src: str | Path,
    *,
    set_name: str | Sequence[str] | None = None,
    algorithms: Iterable[str] = (),
    sets: Iterable[PatchSet] | None = None,
    applier: Applier | None = None,
    include_applied: bool = True,
) -> tuple[Detection, list[Plan], list[Note]]:
    """The sets to use on ``src``: the named ones (all of them, or an error if two cannot go together), or
    the best usable one per algorithm present.

    Two sets that change the same lines are exclusive (quic-go's Reno and Cubic sets: one sender runs):
    asked for by name or ``algorithms``, that is an error saying why; found by themselves, the first one
    is taken and the other noted. Sets with the same change (quiche's Reno/Cubic) count as one.
    Returns the detection, the plans and notes about algorithms left out.
    """
    applier = applier or default_applier()
    pool = list(sets) if sets is not None else None
    names = _names(set_name)
    if names:
        named_det, named = _plans_for_names(src, names, pool, applier)
        return named_det, named, []
    det = detect(src, sets=pool, applier=applier)
    explicit = list(dict.fromkeys(algorithms))
    wanted = explicit or list(det.identity.algorithms)
    plans: list[Plan] = []
    notes: list[Note] = []
    per_algo: dict[str, tuple[list[Candidate], list[Candidate]]] = {}
    recorded = {r.get("set"): {f["path"] for f in r["files"]} for r in _read_state(det.root)["applied"]}
    held = {rel for files in recorded.values() for rel in files}

    def seems_applied_only(c: Candidate) -> bool:
        """A set whose reverse applies only because another recorded set holds its lines (quic-go's reno
        set inside the applied cubic set): not applied itself."""
        if c.kind != "applied" or c.patch_set.name in recorded:
            return False
        return bool(set(plan_for(c.patch_set, det.located).file_diffs) & held)

    for algo in wanted:
        cands = [c for c in det.candidates if c.patch_set.algorithm == algo]
        usable = [
            c for c in cands if c.usable and (include_applied or c.kind != "applied") and not seems_applied_only(c)
        ]
        per_algo[algo] = (cands, usable)

    # algorithms with a usable set first (recorded ones first of all), so one whose lines another set
    # holds is told so
    def order(algo: str) -> tuple[bool, bool]:
        usable = per_algo[algo][1]
        return (not usable, not any(c.patch_set.name in recorded for c in usable))

    for algo in sorted(wanted, key=order):
        cands, usable = per_algo[algo]
        if usable:
            plan = plan_for(usable[0].patch_set, det.located)
            clash = [p for p in plans if set(p.file_diffs) & set(plan.file_diffs)]
            if not clash or _composable(det.root, [*plans, plan], applier):
                plans.append(plan)
                continue
            other = clash[0]
            other_algo = other.patch_set.algorithm if other.patch_set else "?"
            if other.diff == plan.diff:
                notes.append(Note(algo, "same", f"{algo}: {plan.name} is the same change as {other.name}"))
                continue
            if explicit:
                raise PatchError(f"{other_algo} and {algo} cannot be applied together: {_exclusive(other, plan, det)}")
            notes.append(
                Note(
                    algo,
                    "exclusive",
                    f"{algo}: not applied: {_exclusive(other, plan, det)}; "
                    f"`quicsm patch apply {src} -a {algo}` applies it instead",
                )
            )
            continue
        if cands and all(c.kind == "incomplete" for c in cands):
            # the sets cannot even be mapped onto the tree (a file missing, a path refused as a
            # symlink): porting would not help, so say why
            notes.append(
                Note(
                    algo, "unusable", f"{algo}: no patch set can be used ({cands[0].patch_set.name}: {cands[0].reason})"
                )
            )
            continue
        if algo not in det.identity.algorithms or (algo == "reno" and not cands):
            continue
        near = next((c for c in cands if c.kind != "incomplete"), None)
        if near is not None:
            holder = [p for p in plans if set(p.file_diffs) & set(plan_for(near.patch_set, det.located).file_diffs)]
            if holder and holder[0].patch_set is not None and holder[0].patch_set.algorithm != algo:
                why = _held(holder[0], algo, holder[0].file_diffs, det)
                notes.append(Note(algo, "exclusive", f"{algo}: not applied: {why}"))
                continue
        why = ""
        if near is not None and near.kind == "similar":
            sc = _check_plan(plan_for(near.patch_set, det.located), applier)
            why = "; fails on " + ", ".join(
                f"{rel} ({msg.splitlines()[0] if msg else 'does not apply'})" for rel, msg in sc.problems.items()
            )
        notes.append(
            Note(
                algo,
                "missing",
                f"{algo}: no shipped set applies to this version"
                + (f" (closest: {near.patch_set.name}{why})" if near else ""),
            )
        )
    if not plans:
        raise NoSetApplies(src, det, notes)
    return det, plans, notes


class NoSetApplies(PatchError):
    """No chosen set applies to the tree; carries the detection and the notes, so a caller can add a next
    step that works (:func:`port_hint`)."""

    def __init__(self, src: str | Path, det: Detection, notes: list[Note], hints: Iterable[str] = ()) -> None:
        self.src, self.det, self.notes = src, det, notes
        head = f"{src}: no patch set applies to this tree (era {det.identity.era}, {_dates(det)})"
        super().__init__("; ".join([head, *notes, *hints]))

    def with_hints(self, applier: Applier | None = None) -> NoSetApplies:
        hints = [h for n in self.notes if n.kind == "missing" if (h := port_hint(self.src, self.det, n.algo, applier))]
        return NoSetApplies(self.src, self.det, self.notes, hints)


def _dates(det: Detection) -> str:
    lo, hi = det.identity.date_from, det.identity.date_to
    return f"content from {lo} or later" if hi.startswith("9999") else f"content dated {lo}..{hi}"


def port_hint(src: str | Path, det: Detection, algo: str, applier: Applier | None = None) -> str:
    """A next step for ``algo`` that works: the ``apply --port`` command when a shipped set of ``algo``
    ports to ``src`` (tried here, nothing written), else why none does."""
    from quicsm.instrumentation.porter import failure_text, port_first

    sets = [c.patch_set for c in det.candidates if c.patch_set.algorithm == algo and c.kind != "incomplete"]
    res, failed = port_first(sets, src, applier=applier, detection=det)
    if res is not None:
        return f"`quicsm patch apply {src} --port -a {algo}` ports {res.source.name} to it"
    return f"no shipped {algo} set ports to it either ({' | '.join(map(failure_text, failed))})" if failed else ""


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
    set_name: str | Sequence[str] | None = None,
    algorithms: Iterable[str] = (),
    sets: Iterable[PatchSet] | None = None,
    applier: Applier | None = None,
) -> list[SetCheck]:
    """Say whether each chosen patch set applies, is applied, or fails, without changing the tree.

    Parameters
    ----------
    src : str or path-like
        The root of a source tree (a checkout, a module, an unpacked release) of a known target.
    set_name : str or sequence of str, optional
        The patch set(s) to use (``quicsm patch list``); default: chosen by detection.
    algorithms : iterable of str
        With detection: the controllers to instrument (default: every one the tree has a set for).
    sets : iterable of PatchSet, optional
        Sets to choose from instead of the shipped ones.
    applier : Applier, optional
        ``git apply`` or GNU patch (default: the first available).

    Returns
    -------
    list of SetCheck
        Per set, its plan and ``state`` (``applies``, ``applied`` or ``fails``) with the problems per file.

    Raises
    ------
    quicsm.errors.PatchError
        No target found, or no set fits (with hints: ``quicsm patch port``).

    Examples
    --------
    >>> import quicsm
    >>> [c.state for c in quicsm.check_patch(QUIC_GO, set_name="quic-go-v0.65.0-reno")]  # a quic-go v0.65.0 tree
    ['applies']
    """
    applier = applier or default_applier()
    try:
        _, plans, _ = choose(src, set_name=set_name, algorithms=algorithms, sets=sets, applier=applier)
    except NoSetApplies as exc:
        raise exc.with_hints(applier) from None
    return [_check_plan(p, applier) for p in plans]


@dataclass(frozen=True)
class ApplyResult:
    root: Path
    applied: tuple[str, ...]
    already: tuple[str, ...]
    notes: tuple[str, ...]
    """Algorithms left out, and why."""
    files: tuple[str, ...]
    ported: tuple[str, ...] = ()
    """One line per set ported on the fly (``apply --port``)."""


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
    return Change(STATE_FILE, before, after, file_mode(_state_path(root)))


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
    src: str | Path, det: Detection, algorithms: list[str], plans: list[Plan], applier: Applier, workdir: Path
) -> tuple[list[Plan], list[str], list[str], list[str]]:
    """Port a set for every algorithm that has none usable (files not already covered by ``plans``).

    Returns the new plans, notes, sets found already recorded, and one line per port made."""
    from quicsm.instrumentation.patchset import load_patch_set
    from quicsm.instrumentation.porter import port as run_port

    covered = {rel: p for p in plans for rel in p.file_diffs}
    recorded = {f["path"]: r["set"] for r in _read_state(det.root)["applied"] for f in r["files"]}
    chosen = {p.patch_set.algorithm for p in plans if p.patch_set is not None}
    out: list[Plan] = []
    notes: list[str] = []
    already: list[str] = []
    made: list[str] = []
    for algo in algorithms or list(det.identity.algorithms):
        cands = [c for c in det.candidates if c.patch_set.algorithm == algo]
        sources = [c.patch_set for c in cands if c.kind != "incomplete"]
        if algo in chosen or not cands:
            continue
        if not sources:
            notes.append(f"{algo}: nothing to port from ({cands[0].patch_set.name}: {cands[0].reason})")
            continue
        rels = {det.located.relpath_for(f.path) for f in sources[0].files}
        holder = next((covered[r] for r in rels if r in covered), None)
        if holder is not None:
            other = holder.patch_set.algorithm if holder.patch_set else "?"
            why = _held(holder, algo, [r for r in rels if r in covered and r is not None], det)
            if algorithms:
                raise PatchError(f"{other} and {algo} cannot be applied together: {why}")
            notes.append(f"{algo}: not applied: {why}")
            continue
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
        covered.update({rel: plan for rel in plan.file_diffs})
        out.append(plan)
        scores = [p.score for p in res.placements]
        made.append(
            f"{algo}: no shipped set applies; ported {res.source.name} as {plan.name} "
            f"(placement scores {min(scores):.2f}-{max(scores):.2f}; `quicsm patch save {src}` keeps it as a set)"
        )
    return out, notes, already, made


def apply(
    src: str | Path,
    *,
    set_name: str | Sequence[str] | None = None,
    algorithms: Iterable[str] = (),
    sets: Iterable[PatchSet] | None = None,
    applier: Applier | None = None,
    port_missing: bool = False,
) -> ApplyResult:
    """Apply the chosen patch sets as one transaction; the tree is unchanged if anything fails.

    Parameters
    ----------
    src : str or path-like
        The root of a source tree (a checkout, a module, an unpacked release) of a known target.
    set_name : str or sequence of str, optional
        The patch set(s) to use (``quicsm patch list``); default: chosen by detection.
    algorithms : iterable of str
        With detection: the controllers to instrument (default: every one the tree has a set for).
    sets : iterable of PatchSet, optional
        Sets to choose from instead of the shipped ones.
    applier : Applier, optional
        ``git apply`` or GNU patch (default: the first available).
    port_missing : bool
        An algorithm without a usable pinned set gets one ported on the fly (kept in the apply record
        with its manifest: :func:`revert` needs only the diff, ``quicsm patch save`` the rest).

    Returns
    -------
    ApplyResult
        The sets applied (or already applied), the files changed, notes on algorithms left out.

    Raises
    ------
    quicsm.errors.PatchError
        No set fits, or one fails to apply (nothing is left half-patched).

    See Also
    --------
    revert : undo, byte-identical.

    Examples
    --------
    >>> import quicsm
    >>> quicsm.apply(QUIC_GO, set_name="quic-go-v0.65.0-reno").applied  # a quic-go v0.65.0 tree
    ('quic-go-v0.65.0-reno',)
    >>> quicsm.revert(QUIC_GO).files
    ('internal/ackhandler/sent_packet_handler.go', 'internal/congestion/cubic_sender.go')
    """
    applier = applier or default_applier()
    recover(src)
    algos = list(dict.fromkeys(algorithms))
    made: list[str] = []
    if not port_missing or _names(set_name):
        try:
            det, plans, found = choose(src, set_name=set_name, algorithms=algos, sets=sets, applier=applier)
        except NoSetApplies as exc:
            raise exc.with_hints(applier) from None
        notes: list[str] = [
            f"{n}; {hint}" if n.kind == "missing" and (hint := port_hint(src, det, n.algo, applier)) else str(n)
            for n in found
        ]
    else:
        try:
            det, plans, found = choose(src, algorithms=algos, sets=sets, applier=applier)
        except NoSetApplies as exc:
            det, plans, found = exc.det, [], exc.notes
        with tempfile.TemporaryDirectory(prefix="quicsm-port-") as tmp:
            ported, more, recorded, made = _port_missing(src, det, algos, plans, applier, Path(tmp))
        plans += ported
        notes = [str(n) for n in found if n.kind != "missing"] + more
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
        modes = {rel: file_mode(root / rel) for rel in rels}
        after = _scratch_result(root, rels, todo, applier)
        for plan in adopt:
            arels = list(plan.file_diffs)
            now = {rel: _read(root / rel) for rel in arels}
            orig = _scratch_result(root, arels, [plan], applier, reverse=True)
            amodes = {rel: file_mode(root / rel) for rel in arels}
            state["applied"].append(_record(plan, applier, orig, now, amodes, adopted=True))
        for plan in todo:
            state["applied"] = [r for r in state["applied"] if r.get("set") != plan.name]
            # a set made here (ported) lives only in the record: keep its manifest for `patch save`
            own = plan.patch_set is not None and not plan.patch_set.origin.startswith("shipped:")
            extra = {"manifest": manifest_dict(plan.patch_set)} if own and plan.patch_set is not None else {}
            state["applied"].append(_record(plan, applier, before, after, modes, **extra))
        changes = [Change(rel, before[rel], after[rel], modes[rel]) for rel in rels]
        changes.append(_state_change(root, state))
    except PatchError as exc:
        raise PatchError(f"{exc}; nothing was changed") from None
    journal.commit(root, changes, "apply")  # undoes itself on an error it catches
    return ApplyResult(root, tuple(p.name for p in todo), already, tuple(notes), tuple(rels), tuple(made))


def _applied_plans(
    src: Path, set_name: str | Sequence[str] | None, sets: Iterable[PatchSet] | None, applier: Applier
) -> tuple[Path, list[Plan], dict[str, Any]]:
    """The sets currently applied to ``src``: from the apply record, else by reverse-apply checks."""
    if set_name:
        det, plans, _ = choose(src, set_name=set_name, sets=sets, applier=applier)
    else:
        det, plans = detect(src, sets=sets, applier=applier), []
    root = det.root
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
    set_name: str | Sequence[str] | None = None,
    sets: Iterable[PatchSet] | None = None,
    applier: Applier | None = None,
) -> ApplyResult:
    """Undo applied patch sets and verify every file is byte-identical to its pristine sha256.

    Parameters
    ----------
    src : str or path-like
        The tree :func:`apply` changed.
    set_name : str or sequence of str, optional
        Only these sets (default: every set applied).
    sets : iterable of PatchSet, optional
        Sets to look the applied ones up in instead of the shipped ones.
    applier : Applier, optional
        ``git apply`` or GNU patch.

    Returns
    -------
    ApplyResult
        The sets reverted (``already``: those found not applied) and the files restored.

    Raises
    ------
    quicsm.errors.PatchError
        Nothing applied, or files changed after patching (the tree is left as it was).

    Examples
    --------
    >>> import quicsm
    >>> quicsm.apply(QUIC_GO, set_name="quic-go-v0.65.0-reno").applied  # a quic-go v0.65.0 tree
    ('quic-go-v0.65.0-reno',)
    >>> quicsm.revert(QUIC_GO).applied
    ('quic-go-v0.65.0-reno',)
    >>> [c.state for c in quicsm.check_patch(QUIC_GO, set_name="quic-go-v0.65.0-reno")]
    ['applies']
    """
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
        changes = [Change(rel, before[rel], after[rel], modes.get(rel, file_mode(root / rel))) for rel in rels]
        changes.append(_state_change(root, state))
    except PatchError as exc:
        raise PatchError(f"{exc}; nothing was changed") from None
    journal.commit(root, changes, "revert")
    return ApplyResult(root, tuple(p.name for p in todo), tuple(not_applied), (), tuple(rels))


def saved_sets(src: str | Path) -> list[tuple[str, dict[str, Any], str]]:
    """(name, manifest, diff) of every set in the apply record of ``src`` that was made there (ported by
    ``apply --port``), for ``quicsm patch save``. The manifest is the one the port wrote, with the files'
    pristine sha256s as recorded at apply."""
    det = detect(src)
    out = []
    for rec in _read_state(det.root)["applied"]:
        manifest = rec.get("manifest")
        if isinstance(manifest, dict):
            out.append((str(rec["set"]), manifest, str(rec["diff"])))
    return out


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
    set_name: str | Sequence[str] | None = None,
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
                plans = []
                for c in best.values():  # one set per file (quic-go's reno and cubic sets share theirs)
                    p = plan_for(c.patch_set, det.located)
                    if not any(set(p.file_diffs) & set(q.file_diffs) for q in plans):
                        plans.append(p)
    assert root is not None
    state = _read_state(root)
    recs = {(r["set"], f["path"]): f for r in state["applied"] for f in r["files"]}
    out: list[FileStatus] = []
    for plan in plans:
        for rel, fd in plan.file_diffs.items():
            sha = sha256_file(root / rel)
            rec = recs.get((plan.name, rel))
            if sha is None:
                found = "missing", "file not found"
            elif rec and sha == rec["patched_sha256"]:
                found = "patched", "matches the sha256 recorded at apply"
            elif (rec and sha == rec["pristine_sha256"]) or sha == plan.pristine.get(rel):
                found = "pristine", "matches the pristine sha256"
            elif applier.check(root, fd).ok:
                found = "pristine", "patch applies (another version than the set's)"
            elif applier.check(root, fd, reverse=True).ok:
                found = "patched", "patch is applied"
            elif rec is None and not _has_quicsm_lines(root / rel):
                found = "pristine", "no quicsm lines (this set does not apply to this version)"
            else:
                found = "modified-otherwise", "neither the patch nor its reverse applies"
            out.append(FileStatus(plan.name, rel, *found))
    return out


_MARK = re.compile(rb"QUICSM|Quicsm|quicsm_")
"""What every set adds to every file it patches: the contract's ``QUICSM`` or a ``quicsm_``/``Quicsm``
helper (tests/patches/test_patchset_consistency.py checks that each shipped set does)."""


def _has_quicsm_lines(path: Path) -> bool:
    """Whether a file holds instrumentation."""
    try:
        return _MARK.search(path.read_bytes()) is not None
    except OSError:
        return False


def set_states(rows: Iterable[FileStatus]) -> dict[str, str]:
    """Each set of the rows: ``pristine`` or ``patched`` (all its files), or ``mixed``."""
    kinds: dict[str, set[str]] = {}
    for r in rows:
        kinds.setdefault(r.set, set()).add(r.status)
    return {s: k.pop() if len(k) == 1 and k <= {"pristine", "patched"} else "mixed" for s, k in kinds.items()}


def tree_state(rows: Iterable[FileStatus]) -> str:
    """One word for the whole tree: ``pristine`` (no set applied), ``patched`` (each set wholly patched or
    wholly pristine, at least one patched: e.g. Cubic instrumented, BBR2 not), or ``mixed`` (a set half
    applied, or a file modified otherwise or missing)."""
    states = set(set_states(rows).values())
    if not states or states == {"pristine"}:
        return "pristine"
    return "patched" if states <= {"pristine", "patched"} else "mixed"
