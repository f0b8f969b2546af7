"""Port a patch set to a source version it was not made for.

Every change is placed by :mod:`quicsm.instrumentation.placement`; this module rewrites the placed
lines (indentation, edits of replaced lines, era spelling), turns the placed files back into a clean
unified diff, checks that it applies with the real applier and reproduces the placed files byte for
byte, and only then writes the new set, atomically. If any change cannot be placed, the reasons are
reported and nothing is written.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quicsm.errors import PatchError
from quicsm.files import replace_dir
from quicsm.instrumentation.appliers import Applier, default_applier
from quicsm.instrumentation.detection import Detection, detect, normalize_line, sha256_bytes
from quicsm.instrumentation.diff import Edit
from quicsm.instrumentation.journal import fault_step
from quicsm.instrumentation.patchset import DIFF, MANIFEST, PatchSet, load_patch_set, manifest_dict
from quicsm.instrumentation.placement import CONTEXT, place_edits, split_edits
from quicsm.instrumentation.targets import Release, Target

__all__ = [
    "Placement",
    "PortFailure",
    "PortResult",
    "default_name",
    "failure_text",
    "port_first",
    "plan_port",
    "port",
    "write_patch_set",
    "write_port",
]


@dataclass(frozen=True)
class Placement:
    file: str
    hunk: int
    line: int
    """1-based line in the new pristine file where the change starts."""
    score: float
    function: str | None


@dataclass(frozen=True)
class PortFailure:
    file: str
    hunk: int
    reason: str


@dataclass(frozen=True)
class PortResult:
    source: PatchSet
    detection: Detection
    placements: tuple[Placement, ...]
    failures: tuple[PortFailure, ...]
    pristine: dict[str, bytes] = field(default_factory=dict)
    placed: dict[str, bytes] = field(default_factory=dict)
    diff: str = ""

    @property
    def ok(self) -> bool:
        return not self.failures and bool(self.diff)


def _indent(s: str) -> str:
    return s[: len(s) - len(s.lstrip(" \t"))]


def _reindent(lines: tuple[str, ...], old_ref: str | None, new_ref: str | None) -> list[str]:
    """Shift added lines by the indentation change of the nearest anchor line."""
    if old_ref is None or new_ref is None:
        return list(lines)
    oi, ni = _indent(old_ref), _indent(new_ref)
    if oi == ni:
        return list(lines)
    out = []
    for line in lines:
        if line.startswith(oi) and line.strip():
            out.append(ni + line[len(oi) :])
        elif line.strip() and len(oi) > len(ni) and _indent(line).startswith(ni):
            out.append(ni + line.lstrip(" \t") if len(_indent(line)) <= len(oi) else line)
        else:
            out.append(line)
    return out


_IDENT_EDGE = re.compile(r"\w")


def _transfer(old: str, new_text: str, upstream: str) -> str | None:
    """Apply the character edit ``old -> new_text`` to ``upstream`` (a changed copy of ``old``), or None."""
    out = upstream
    sm = difflib.SequenceMatcher(None, old, new_text, autojunk=False)
    for tag, i1, i2, j1, j2 in reversed(sm.get_opcodes()):
        if tag == "equal":
            continue
        # widen to whole identifiers so the replaced piece is recognisable in the upstream line
        while i1 > 0 and j1 > 0 and _IDENT_EDGE.match(old[i1 - 1]) and old[i1 - 1] == new_text[j1 - 1]:
            i1, j1 = i1 - 1, j1 - 1
        while i2 < len(old) and j2 < len(new_text) and _IDENT_EDGE.match(old[i2]) and old[i2] == new_text[j2]:
            i2, j2 = i2 + 1, j2 + 1
        piece, repl = old[i1:i2], new_text[j1:j2]
        if not piece or out.count(piece) != 1:
            return None
        out = out.replace(piece, repl)
    return out


def _indent_refs(e: Edit, lines: list[str], p: int) -> tuple[str | None, str | None]:
    """The old and new line whose indentation the added lines follow: a replaced line, else the nearest
    non-blank line above (below if the change has nothing above)."""
    if e.removed:
        return e.removed[0], lines[p]
    old_above = [x for x in e.before if x.strip()]
    if old_above:
        k = p - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        return old_above[-1], (lines[k] if k >= 0 else None)
    old_below = [x for x in e.after if x.strip()]
    k = p
    while k < len(lines) and not lines[k].strip():
        k += 1
    return (old_below[0] if old_below else None), (lines[k] if k < len(lines) else None)


def _already_there(edits: list[Edit], text: str) -> bool:
    """Every added line of the file is already in it (normalised), i.e. porting would patch twice."""
    added = [normalize_line(x) for e in edits for x in e.added if len(normalize_line(x)) > 3]
    have = {normalize_line(x) for x in text.splitlines()}
    return bool(added) and all(a in have for a in added)


def _build(
    new_text: str, placed: list[tuple[Edit, int, float, str | None]], target: Target, detection: Detection
) -> tuple[str, list[str]]:
    """The placed file; also reasons for changes whose removed lines could not be rewritten."""
    eol = "\r\n" if new_text.count("\r\n") > new_text.count("\n") / 2 else "\n"
    lines = new_text.splitlines()
    problems: list[str] = []
    for e, p, _, _ in sorted(placed, key=lambda x: x[1], reverse=True):
        ref_old, ref_new = _indent_refs(e, lines, p)
        added = _reindent(e.added, ref_old, ref_new)
        if e.removed and any(
            normalize_line(a) != normalize_line(b) for a, b in zip(e.removed, lines[p : p + len(e.removed)])
        ):
            if len(e.removed) != len(e.added) and len(e.removed) != 1:
                problems.append(
                    f"hunk {e.hunk + 1}: the lines it replaces changed upstream "
                    f"(`{e.removed[0].strip()}`) and the change is not line-for-line"
                )
                continue
            moved: list[str | None] = [
                _transfer(o, a, u) for o, a, u in zip(e.removed, e.added, lines[p : p + len(e.removed)])
            ]
            moved += list(e.added[len(e.removed) :])  # one line replaced by several: carry the first, keep the rest
            if any(x is None for x in moved):
                problems.append(
                    f"hunk {e.hunk + 1}: the lines it replaces changed upstream "
                    f"(`{e.removed[0].strip()}`) and the edit cannot be carried over"
                )
                continue
            added = [x for x in moved if x is not None]
        added = target.adapt_added_lines(list(added), None, detection.identity)
        lines[p : p + len(e.removed)] = added
    out = eol.join(lines)
    if new_text.endswith(("\n", "\r\n")):
        out += eol
    return out, problems


def _unified(old: str, new: str, rel: str) -> str:
    a = old.splitlines(keepends=True)
    b = new.splitlines(keepends=True)
    out = []
    for line in difflib.unified_diff(a, b, f"a/{rel}", f"b/{rel}", n=CONTEXT):
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    if not out:
        return ""
    return f"diff --git a/{rel} b/{rel}\n" + "".join(out)


def _verify(diff: str, pristine: dict[str, bytes], placed: dict[str, bytes], applier: Applier) -> str | None:
    """Apply ``diff`` to a copy of the pristine files; None if it reproduces the placed files exactly."""
    with tempfile.TemporaryDirectory(prefix="quicsm-port-") as tmp:
        root = Path(tmp)
        for rel, data in pristine.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
        res = applier.check(root, diff)
        if not res.ok:
            return f"regenerated diff does not apply: {res.output}"
        res = applier.apply(root, diff)
        if not res.ok:
            return f"regenerated diff does not apply: {res.output}"
        for rel, data in placed.items():
            if (root / rel).read_bytes() != data:
                return f"{rel}: regenerated diff does not reproduce the placed file"
    return None


def plan_port(
    ps: PatchSet, src: str | Path, *, applier: Applier | None = None, detection: Detection | None = None
) -> PortResult:
    """Place every change of ``ps`` in the tree at ``src``; nothing is written."""
    applier = applier or default_applier()
    det = detection or detect(src, sets=[ps], applier=applier, target=ps.target)
    from quicsm.instrumentation.targets import get_target

    target = get_target(ps.target)
    placements: list[Placement] = []
    failures: list[PortFailure] = []
    pristine: dict[str, bytes] = {}
    placed_files: dict[str, bytes] = {}
    diffs: list[str] = []
    for fp in ps.file_patches:
        rel = det.located.relpath_for(fp.path)
        if rel is None:
            failures.append(PortFailure(fp.path, 0, "file not found in the tree"))
            continue
        raw = (det.root / rel).read_bytes()
        text = raw.decode("utf-8", errors="surrogateescape")
        edits = target.port_edits(split_edits(fp.hunks, target))
        if _already_there(edits, text):
            failures.append(PortFailure(rel, 0, "the file already holds the lines this set adds (already patched?)"))
            continue
        placed, fails = place_edits(edits, text.splitlines(), target)
        failures += [PortFailure(rel, h + 1, why) for h, why in fails]
        if fails:
            continue
        new_text, problems = _build(text, placed, target, det)
        if not problems:
            added = [x for e, _, _, _ in placed for x in e.added]
            set_lines = [t for h in fp.hunks for tag, t in h.lines if tag != "-"]
            new_text, problems = target.finish_ported(det.located, rel, new_text, added, set_lines)
        if not problems:
            problems = target.check_ported(rel, new_text, [x for e, _, _, _ in placed for x in e.added])
        failures += [PortFailure(rel, 0, why) for why in problems]
        if problems:
            continue
        placements += [Placement(rel, e.hunk + 1, p + 1, round(s, 3), f) for e, p, s, f in placed]
        pristine[rel] = raw
        placed_files[rel] = new_text.encode("utf-8", errors="surrogateescape")
        diffs.append(_unified(text, new_text, rel))
    diff = "".join(diffs)
    if not failures:
        why = _verify(diff, pristine, placed_files, applier) if diff else "nothing to change"
        if why:
            failures.append(PortFailure("*", 0, why))
    return PortResult(ps, det, tuple(placements), tuple(failures), pristine, placed_files, diff)


def _git_head(root: Path) -> tuple[str | None, str | None]:
    """Commit and date of ``root`` when it is the top of a git work tree."""
    try:
        top = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
        if top.returncode or Path(top.stdout.strip()).resolve() != root.resolve():
            return None, None
        out = subprocess.run(
            ["git", "-C", str(root), "log", "-1", "--format=%H %cs"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
        commit, date = out.stdout.split()
        return commit, date
    except (OSError, ValueError, subprocess.SubprocessError):
        return None, None


_SOURCE_RELEASE_KEYS = ("module", "crate", "notes", "placements", "ported_from")
"""Manifest entries that describe the source set's own release and runs: never carried into a port."""


def _manifest(res: PortResult, name: str, applier: Applier, commit: str | None, date: str | None) -> dict[str, Any]:
    """The new set's manifest: what it instruments comes from the source set; what release it is for
    comes from the target tree (module/crate block, commit); where it came from is ``ported_from``."""
    src = res.source
    ident = res.detection.identity
    rel = _release(res)
    d = {k: v for k, v in manifest_dict(src).items() if k not in _SOURCE_RELEASE_KEYS}
    scores = [p.score for p in res.placements]
    what = f"{res.detection.target.name} {rel.version}" if rel else f"the {res.detection.target.name} tree"
    d.update(
        {
            "name": name,
            "era": ident.era or src.era,
            "description": f"{src.algorithm} instrumentation for {what}, ported by quicsm from {src.name}.",
            "upstream": {
                "repository": src.upstream.repository,
                "commit": commit or (rel.commit if rel else None),
                "date": date or (rel.date if rel else None),
                "path_root": src.upstream.path_root,
            },
            "files": [{"path": rel_, "sha256": sha256_bytes(data)} for rel_, data in res.pristine.items()],
            "validated": {
                "how": f"quicsm patch port: changes placed by anchors, regenerated diff checked with "
                f"{applier.name} apply --check against the source tree and shown to reproduce the "
                f"placed files (not built or run by this step)",
                "date": _dt.date.today().isoformat(),
            },
            **(dict(rel.manifest) if rel else {}),
            "ported_from": {
                "name": src.name,
                "origin": src.origin,
                "commit": src.upstream.commit,
                "date": src.upstream.date,
                "description": src.description,
                "at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                "score": {"min": min(scores), "mean": round(sum(scores) / len(scores), 3)} if scores else None,
                "changes": len(res.placements),
            },
            "notes": [
                f"Ported from {src.name}; that set's notes and validation describe its own release and runs "
                "and are not carried over."
            ],
            "placements": [
                {"file": p.file, "hunk": p.hunk, "line": p.line, "score": p.score, "function": p.function}
                for p in res.placements
            ],
        }
    )
    return d


def _release(res: PortResult) -> Release | None:
    return res.detection.target.release(res.detection.located)


def _leftovers(out_dir: Path) -> list[Path]:
    """Build or replaced directories a killed ``write_patch_set`` left beside ``out_dir``."""
    prefix = f".{out_dir.name}.quicsm-"
    try:
        return [out_dir.parent / n for n in os.listdir(out_dir.parent) if n.startswith(prefix)]
    except OSError:
        return []


def write_patch_set(out_dir: Path, manifest: dict[str, Any], diff: str, *, force: bool = False) -> Path:
    """Write a set directory atomically: build it beside ``out_dir`` and swap it into place.

    At every moment ``out_dir`` is the old set or the new one, complete (a replaced set is swapped out
    by one ``renameat2`` exchange where the kernel has it); directories a killed run left beside it are
    removed by the next write to the same place.
    """
    out_dir = Path(out_dir)
    for stale in _leftovers(out_dir):
        shutil.rmtree(stale, ignore_errors=True)
    if out_dir.exists() and not force:
        raise PatchError(f"{out_dir}: already exists (choose another -o or pass --force)")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.quicsm-new-", dir=out_dir.parent))
    try:
        for fname, text in ((MANIFEST, json.dumps(manifest, indent=2) + "\n"), (DIFF, diff)):
            with open(tmp / fname, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            fault_step()
        load_patch_set(tmp)  # never write a set the loader would refuse
        replace_dir(tmp, out_dir)
        fault_step()
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def port(
    ps: PatchSet | list[PatchSet],
    src: str | Path,
    out_dir: str | Path | None = None,
    *,
    name: str | None = None,
    applier: Applier | None = None,
    force: bool = False,
) -> tuple[PortResult, Path]:
    """Port a patch set to another version's tree and write the new set.

    Parameters
    ----------
    ps : PatchSet or list of PatchSet
        The set to port; given several, they are tried in order and the first that ports completely
        is used.
    src : str or path-like
        The tree of the version to port to.
    out_dir : str or path-like, optional
        Where the new set goes (must not exist unless ``force``); default: beside the shipped sets.
    name : str, optional
        The new set's name (default: ``<target>-<version>-<algorithm>-port`` when the tree says which
        release it is, else the old name with ``-port-`` and the checkout's date, commit or a hash).
    applier : Applier, optional
        ``git apply`` or GNU patch.
    force : bool
        Overwrite ``out_dir``.

    Returns
    -------
    tuple of (PortResult, Path)
        Where each change was placed, and the folder of the new set.

    Raises
    ------
    quicsm.errors.PatchError
        A change cannot be placed (every reason, per file and hunk), or ``out_dir`` exists.

    Examples
    --------
    >>> import quicsm, tempfile
    >>> from quicsm.instrumentation import find_patch_set, load_patch_set
    >>> old = find_patch_set("quic-go-v0.52.0-reno")
    >>> res, folder = quicsm.port(old, QUIC_GO, tempfile.mkdtemp() + "/ported")  # to a quic-go v0.65.0 tree
    >>> res.ok, sorted(p.name for p in folder.iterdir())
    (True, ['changes.diff', 'manifest.json'])
    >>> load_patch_set(folder).name
    'quic-go-v0.65.0-reno-port'
    """
    applier = applier or default_applier()
    res, failed = port_first(ps if isinstance(ps, list) else [ps], src, applier=applier)
    if res is None:
        tried = " | ".join(map(failure_text, failed)) or "no set given"
        raise PatchError(f"cannot port to {src}: {tried}. Nothing was written.")
    return res, write_port(res, out_dir, name=name, applier=applier, force=force)


def failure_text(res: PortResult) -> str:
    """The set and why its changes cannot be placed: ``set: file hunk N: reason; ...``."""
    reasons = "; ".join(f"{f.file}{f' hunk {f.hunk}' if f.hunk else ''}: {f.reason}" for f in res.failures)
    return f"{res.source.name}: {reasons}"


def port_first(
    sets: Iterable[PatchSet], src: str | Path, *, applier: Applier | None = None, detection: Detection | None = None
) -> tuple[PortResult | None, list[PortResult]]:
    """The plan of the first of ``sets`` (tried in order) whose every change can be placed in ``src``, or
    None, and the plans of the sets tried before it, which cannot be placed."""
    applier = applier or default_applier()
    failed: list[PortResult] = []
    for ps in sets:
        res = plan_port(ps, src, applier=applier, detection=detection)
        if res.ok:
            return res, failed
        failed.append(res)
    return None, failed


def default_name(res: PortResult) -> str:
    """``<target>-<version>-<algorithm>-port`` when the tree says which release it is (a module-cache,
    registry or fetched copy); else ``<source>-port-<date of the checkout, or its commit, or a hash of the
    files>``."""
    rel = _release(res)
    if rel is not None:
        return f"{res.detection.target.name}-{rel.version}-{res.source.algorithm}-port"
    commit, date = _git_head(res.detection.root)
    tag = date or (commit[:10] if commit else sha256_bytes(b"".join(res.pristine.values()))[:10])
    return f"{res.source.name}-port-{tag}"


def write_port(
    res: PortResult,
    out_dir: str | Path | None = None,
    *,
    name: str | None = None,
    applier: Applier | None = None,
    force: bool = False,
) -> Path:
    """Write a planned port as a set directory (default ``./<name>``)."""
    applier = applier or default_applier()
    commit, date = _git_head(res.detection.root)
    name = name or default_name(res)
    out = Path(out_dir) if out_dir else Path.cwd() / name
    return write_patch_set(out, _manifest(res, name, applier, commit, date), res.diff, force=force)
