"""Which patch set a testbed build uses, for any version the registry serves.

For a version and controller, in this order:

1. ``--set NAME|DIR`` (a shipped name or a set directory): used as it is if it was made for this release
   (its module/crate block names the version); otherwise it is ported to the release's pristine source,
   which also works when it applies unchanged, so the set the build uses always names its target;
2. the shipped set made for this release and controller;
3. otherwise every shipped set of the target for the controller, in the order ``quicsm patch detect``
   ranks them against the pristine source (those that apply first), is ported until one ports completely.

A set made here is written to ``~/.cache/quicsm/sets/<target>/<name>/`` (``quicsm patch save NAME DIR``
copies it out), named for its target (``quic-go-v0.64.1-reno-port``), with the release's module/crate
block and ``ported_from`` (source set, time, placement scores). The choice and the reason come back as a
sentence for the user.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quicsm.errors import PatchError, TestbedError
from quicsm.instrumentation.patchset import PatchSet, find_patch_set, load_patch_set, shipped_patch_sets
from quicsm.testbed.buildtools import FileLock, Progress, cache_root

if TYPE_CHECKING:
    from quicsm.testbed.stacks import Source, Stack

__all__ = ["Resolved", "given_set", "made_sets_root", "release_version", "resolve_set", "shipped_versions"]


@dataclass(frozen=True)
class Resolved:
    patch_set: PatchSet
    how: str
    """``shipped`` (made for this release), ``given`` (--set, made for this release), ``ported``."""
    why: str
    """One sentence for the user: which set, and why that one."""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.patch_set.name, "how": self.how, "why": self.why, "origin": self.patch_set.origin}


def made_sets_root() -> Path:
    """``~/.cache/quicsm/sets``: sets the testbed ported, one directory per set under its target."""
    return cache_root().parent / "sets"


def release_version(ps: PatchSet) -> str | None:
    """The release a set was made for (``module.version``, ``crate.version``, ``chromium.version``), if its manifest says."""
    for key in ("module", "crate", "chromium"):
        block = ps.extra.get(key)
        if isinstance(block, dict) and isinstance(block.get("version"), str):
            return str(block["version"])
    return None


def shipped_versions(stack: Stack, target: str) -> list[str]:
    """The releases the shipped sets of ``target`` were made for, with a set for each of the stack's
    controllers, oldest first."""
    found: dict[str, set[str]] = {}
    for ps in shipped_patch_sets(target):
        if v := release_version(ps):
            found.setdefault(v, set()).add(ps.algorithm)
    return sorted((v for v, ccs in found.items() if set(stack.ccs) <= ccs), key=stack.version_key)


def _say(progress: Progress | None, text: str) -> None:
    if progress is not None:
        progress(text)


def resolve_set(
    stack: Stack, version: str, cc: str, spec: str | None = None, *, progress: Progress | None = None
) -> Resolved:
    """The patch set for ``stack`` at ``version`` instrumenting ``cc`` (see the module docstring)."""
    target = stack.target
    if target is None:
        raise TestbedError(f"stack {stack.name} takes no patch set")
    version = stack.normalize_version(version)
    if spec:
        given = given_set(stack, cc, spec)
        if release_version(given) == version:
            res = Resolved(given, "given", f"{given.name} (--set), made for {stack.name} {version}")
            _say(progress, f"patch set: {res.why}")
            return res
        return _port(stack, version, cc, [given], progress, given_name=spec)
    own = [ps for ps in shipped_patch_sets(target) if ps.algorithm == cc and release_version(ps) == version]
    if own:
        return Resolved(own[0], "shipped", f"{own[0].name}, shipped for {stack.name} {version}")
    return _port(stack, version, cc, None, progress)


def given_set(stack: Stack, cc: str, spec: str) -> PatchSet:
    """The set ``--set spec`` names, if it is one for ``stack`` and ``cc`` (checked before anything is built
    or run, so a matrix with a wrong set stops before its first scenario)."""
    if stack.target is None:
        raise TestbedError(f"--set {spec}: stack {stack.name} takes no patch set")
    try:
        given = find_patch_set(spec)
    except PatchError as exc:
        raise TestbedError(f"--set {spec}: {exc}") from None
    if given.target != stack.target:
        raise TestbedError(f"--set {spec}: {given.name} is a set for {given.target}, not {stack.target} ({stack.name})")
    if given.algorithm != cc:
        raise TestbedError(f"--set {spec}: {given.name} instruments {given.algorithm}, not --cc {cc}")
    return given


def _port(
    stack: Stack,
    version: str,
    cc: str,
    sets: list[PatchSet] | None,
    progress: Progress | None,
    *,
    given_name: str | None = None,
) -> Resolved:
    from quicsm.instrumentation.detection import detect
    from quicsm.instrumentation.porter import default_name, failure_text, port_first, write_port

    assert stack.target is not None
    src = stack.pristine_source(version, progress=progress)
    with tempfile.TemporaryDirectory(prefix="quicsm-sets-") as tmp:
        tree = _scratch_tree(src, Path(tmp) / "tree")
        if sets is None:
            pool = [ps for ps in shipped_patch_sets(stack.target) if ps.algorithm == cc]
            det = detect(tree, sets=pool, target=stack.target)
            ranked = [c for c in det.candidates if c.kind != "incomplete"]
            candidates = [(c.patch_set, c.kind) for c in ranked]
            if not candidates:
                raise TestbedError(_nothing_to_port(stack, version, cc, pool, det))
        else:
            candidates = [(ps, "given") for ps in sets]
        res, failed = port_first([ps for ps, _ in candidates], tree)
        skipped = list(map(failure_text, failed))
        if res is None:
            raise TestbedError(
                f"{stack.name} {version}: no {cc} patch set ports to it: {' | '.join(skipped)}. Nothing was built."
            )
        ps, kind = candidates[len(failed)]
        name = default_name(res)
        out = made_sets_root() / stack.target / name
        with FileLock(made_sets_root() / f".{stack.target}-{name}.lock"):
            made = _reuse(out, res.diff)
            if made is None:
                write_port(res, out, name=name, force=out.exists())
                made = load_patch_set(out)
        scores = [p.score for p in res.placements]
        how = "applies unchanged" if kind in ("exact", "applies") else "ported by its anchors"
        why = (
            f"{made.name} (kept in {out}): "
            + (f"your set {given_name}" if given_name else f"no set shipped for {stack.name} {version}; {ps.name}")
            + f" {how} (placement scores {min(scores):.2f}-{max(scores):.2f})"
            + (f", after {len(skipped)} that do not port" if skipped else "")
        )
        for line in skipped:
            _say(progress, f"patch set: skipped {line}")
        _say(progress, f"patch set: {why}")
        return Resolved(made, "ported", why)


def _nothing_to_port(stack: Stack, version: str, cc: str, pool: list[PatchSet], det: Any) -> str:
    """Why no set of ``cc`` can be ported to this release, in one line: the files every set needs that the
    release lacks, what the release does have sets for, and which releases have ``cc`` sets."""
    lacks = sorted({c.reason for c in det.candidates if c.kind == "incomplete"})
    have = [a for a in det.identity.algorithms if a != cc and a in stack.ccs]
    made_for = sorted({v for v in (release_version(ps) for ps in pool) if v}, key=_version_key)
    return (
        f"{stack.name} {version} cannot run --cc {cc}: "
        + (
            f"no {cc} patch set of {stack.target}"
            if not pool
            else f"its {cc} sets need what it lacks ({'; '.join(lacks)})"
        )
        + (f"; shipped {cc} sets are for {stack.name} {', '.join(made_for)}" if made_for else "")
        + (f"; it can run --cc {' or '.join(have)}" if have else "")
        + ". Nothing was built."
    )


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def _scratch_tree(src: Source, dest: Path) -> Path:
    """A private copy of the parts of ``src`` the patch target reads (the sender directories and the
    release's own files), with its SOURCE_FILE, for detection and porting."""
    from quicsm.instrumentation.targets import SOURCE_FILE
    from quicsm.testbed.buildtools import copy_writable

    copy_writable(src.dir, dest, ignore=shutil.ignore_patterns("*_test.go", "testdata", "examples", ".git"))
    (dest / SOURCE_FILE).write_text(json.dumps(src.record(), indent=1) + "\n", encoding="utf-8")
    return dest


def _reuse(out: Path, diff: str) -> PatchSet | None:
    """The set already made at ``out`` if it holds the same change (a rerun keeps its name and time)."""
    try:
        old = load_patch_set(out)
    except PatchError:
        return None
    return old if old.diff_text == diff else None
