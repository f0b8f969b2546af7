"""Build the instrumented testbed binaries: quic-go patched by a quicsm patch set, without a fork.

The module is taken from the Go module cache (``go mod download``), copied to a work directory,
patched through the patch engine (:func:`quicsm.instrumentation.engine.apply`), and the server and
client in ``testbed/server`` and ``testbed/client`` are built against it with a separate modfile
(``go.patched.mod``: ``replace github.com/quic-go/quic-go => <patched copy>``), so the repository's
own ``go.mod`` files are never touched. Builds are cached by (version, variant, patch sha256, Go
sources, toolchain) under ``~/.cache/quicsm/build/``: a rerun costs a second, a cold build ~1 min.

What a version needs beyond the patch (read from the patch set's ``module`` entry): ``build_tags``
picking the server/client API shims (``compat_*.go``), and ``toolchain`` for versions the installed Go
cannot build (quic-go v0.33 needs Go 1.20; the go command fetches that toolchain from the module proxy).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from quicsm.errors import TestbedError
from quicsm.instrumentation.patchset import PatchSet, shipped_patch_sets
from quicsm.testbed.buildtools import (
    Progress,
    apply_patch_set,
    cache_entry,
    cache_root,
    copy_writable,
    run_tool,
    staged_entry,
    tool_output,
)
from quicsm.testbed.sources import testbed_root

__all__ = [
    "MODULE",
    "VARIANTS",
    "BuildResult",
    "available_versions",
    "build_binaries",
    "cache_root",
    "find_go",
    "go_build",
    "go_env",
    "go_source_digest",
    "patch_set_for",
    "testbed_source_dir",
]

MODULE = "github.com/quic-go/quic-go"
VARIANTS = ("reno", "cubic")
PROGRAMS = {"server": "quicsm-server", "client": "quicsm-client"}
_BUILD_TIMEOUT_S = 1800


@dataclass(frozen=True)
class BuildResult:
    """Paths of the built binaries and how they were made."""

    version: str
    variant: str
    server: Path
    client: Path
    patch_set: str
    patched_module: Path
    """The patched copy of quic-go the binaries were built against (inside the cache entry)."""
    cache_dir: Path
    cached: bool
    """True when the binaries came from the cache (nothing was built)."""
    seconds: float
    go_version: str
    build_tags: tuple[str, ...]
    meta: dict[str, Any] = field(default_factory=dict)
    """The cache entry's build.json: toolchain, module sum, the module versions compiled in."""

    def to_json(self) -> dict[str, Any]:
        return {
            k: (str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v)
            for k, v in self.__dict__.items()
        }


# ---- locating things ------------------------------------------------------------------------------


GO_CANDIDATES = ("/usr/local/go/bin/go",)
"""Where Go's own installer (and .ci/install.d/quic-go.sh) puts the go command, tried after PATH."""


def find_go() -> str:
    """A gc go command at least as new as the testbed modules need (their ``go`` directive): on PATH, else
    /usr/local/go. Debian's golang-go (1.19) or gccgo's go first on PATH are passed over, with a one-line
    error if nothing else is there."""
    need = min_go_version()
    seen: list[str] = []
    for go in dict.fromkeys(p for p in (shutil.which("go"), *GO_CANDIDATES) if p and os.access(p, os.X_OK)):
        have, gccgo = _go_release(go)
        if have and not gccgo and _version_key(have) >= _version_key(need):
            return go
        seen.append(f"{go} is {'gccgo ' if gccgo else ''}{have or 'not a working go'}")
    found = f" ({'; '.join(seen)})" if seen else ""
    raise TestbedError(
        f"Go toolchain >= {need} not found{found}: install Go from go.dev (or put /usr/local/go/bin first "
        "on PATH); .ci/install.d/quic-go.sh does both"
    )


@functools.lru_cache(maxsize=8)
def _go_release(go: str) -> tuple[str | None, bool]:
    """(release such as ``1.26.8``, whether it is gccgo's go) from ``go version``."""
    out = tool_output([go, "version"])
    m = re.search(r"\bgo version go(\d+(?:\.\d+)*)", out)
    return (m.group(1) if m else None), "gccgo" in out


def min_go_version() -> str:
    """The newest ``go`` directive of the testbed's Go modules (1.26.0 for quic-go v0.65)."""
    try:
        root = testbed_root()
    except TestbedError:
        return "1.26"
    found = [_go_directive(root / prog / "go.mod") for prog in PROGRAMS if (root / prog / "go.mod").is_file()]
    return max(found, key=_version_key) if found else "1.26"


def testbed_source_dir() -> Path:
    """``testbed/`` of the source tree, or the copy an installed quicsm ships (:mod:`quicsm.testbed.sources`)."""
    here = testbed_root()
    for prog in PROGRAMS:
        if not (here / prog / "go.mod").is_file():
            raise TestbedError(f"{here / prog}/go.mod not found: the testbed sources are incomplete")
    return here


def go_source_digest(*dirs: Path) -> str:
    """sha256 over the .go files and go.mod of Go module directories (what a build depends on)."""
    h = hashlib.sha256()
    for d in dirs:
        for p in sorted(d.rglob("*")):
            if p.is_file() and (p.suffix == ".go" or p.name == "go.mod"):
                h.update(f"{d.name}/{p.relative_to(d)}\0".encode())
                h.update(p.read_bytes())
    return h.hexdigest()


# ---- patch sets -----------------------------------------------------------------------------------


def available_versions() -> list[str]:
    """quic-go versions with a shipped patch set (both variants), oldest first."""
    names = {ps.name for ps in shipped_patch_sets("quic-go")}
    versions = {_module(ps).get("version", "") for ps in shipped_patch_sets("quic-go")}
    ok = [v for v in versions if v and all(f"quic-go-{v}-{var}" in names for var in VARIANTS)]
    return sorted(ok, key=_version_key)


def _version_key(v: str) -> tuple[int, ...]:
    """``v0.43.1`` / ``1.26`` -> (0, 43, 1) / (1, 26, 0)."""
    nums = [int(x) for x in re.findall(r"\d+", v)[:3]]
    return tuple(nums + [0] * (3 - len(nums)))


def _module(ps: PatchSet) -> Mapping[str, Any]:
    mod = ps.extra.get("module")
    return mod if isinstance(mod, dict) else {}


def patch_set_for(version: str, variant: str = "reno") -> PatchSet:
    """The shipped patch set ``quic-go-<version>-<variant>``; a clear error listing what exists."""
    if variant not in VARIANTS:
        raise TestbedError(f"variant {variant!r}: expected one of {', '.join(VARIANTS)}")
    if not version.startswith("v"):
        version = "v" + version
    name = f"quic-go-{version}-{variant}"
    for ps in shipped_patch_sets("quic-go"):
        if ps.name == name:
            if _module(ps).get("version") != version:
                raise TestbedError(f"{ps.origin}/manifest.json: module.version must be {version}")
            return ps
    raise TestbedError(
        f"no quic-go patch set for {version} ({name}); patched versions: {', '.join(available_versions()) or 'none'}"
    )


# ---- running go -----------------------------------------------------------------------------------


def go_env(toolchain: str | None) -> dict[str, str]:
    """Environment of every go command: a pinned toolchain (never an implicit switch), no cgo, no VCS stamping
    (the testbed sources sit inside the quicsm checkout)."""
    env = {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": toolchain or "local", "GOFLAGS": "-buildvcs=false"}
    go_dir = os.path.dirname(find_go())
    path = env.get("PATH", "")
    if go_dir not in path.split(os.pathsep):
        env["PATH"] = f"{path}{os.pathsep}{go_dir}" if path else go_dir
    return env


def _run_go(args: list[str], *, cwd: Path, env: Mapping[str, str], what: str, progress: Progress | None = None) -> str:
    return run_tool([find_go(), *args], cwd=cwd, env=env, what=what, progress=progress, timeout_s=_BUILD_TIMEOUT_S)


@functools.lru_cache(maxsize=8)
def _go_version(toolchain: str | None) -> str:
    out = _run_go(
        ["env", "GOVERSION"],
        cwd=Path(tempfile.gettempdir()),
        env=go_env(toolchain),
        what=f"checking the Go toolchain {toolchain or '(installed)'}",
    )
    return out.strip()


@dataclass(frozen=True)
class ModuleSource:
    """A quic-go release in the Go module cache (read-only), as the module proxy served it."""

    version: str
    dir: Path
    sum: str
    """go.sum hash of the module zip (``h1:...``), verified by the go command against sum.golang.org."""


def download_module(version: str) -> ModuleSource:
    """The pristine module directory of quic-go ``version`` in the Go module cache (downloaded if needed)."""
    version = version if version.startswith("v") else "v" + version
    try:
        proc = subprocess.run(
            [find_go(), "mod", "download", "-json", f"{MODULE}@{version}"],
            cwd=tempfile.gettempdir(),
            env={**go_env(None), "GOFLAGS": ""},
            capture_output=True,
            text=True,
            timeout=_BUILD_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TestbedError(f"downloading {MODULE}@{version}: {exc}") from None
    try:
        info = json.loads(proc.stdout)
    except ValueError:
        info = {"Error": (proc.stderr.strip() or proc.stdout.strip() or f"exit status {proc.returncode}")[-600:]}
    if info.get("Error") or proc.returncode != 0 or "Dir" not in info:
        why = " ".join(str(info.get("Error", proc.stderr.strip())).split())
        raise TestbedError(f"quic-go {version} is not available from the Go module proxy: {why}")
    return ModuleSource(str(info.get("Version") or version), Path(info["Dir"]), str(info.get("Sum", "")))


def _go_directive(go_mod: Path) -> str:
    m = re.search(r"^go\s+(\S+)\s*$", go_mod.read_text(encoding="utf-8"), re.MULTILINE)
    return m.group(1) if m else "1.20"


def go_build(
    prog: str,
    binary: Path,
    patched: Path,
    version: str,
    *,
    tags: tuple[str, ...],
    env: Mapping[str, str],
    what: str,
    progress: Progress | None = None,
) -> None:
    """``go build`` the testbed program ``prog`` into ``binary`` against the patched quic-go copy ``patched``,
    through a modfile beside ``patched`` (``replace`` => it), so the repository's go.mod is never touched."""
    modfile = patched.parent / f"{prog}.patched.mod"
    go_line = _go_directive(patched / "go.mod")
    modfile.write_text(
        f"module quicsm/testbed/{prog}\n\ngo {go_line}\n\nrequire {MODULE} {version}\n\nreplace {MODULE} => {patched}\n",
        encoding="utf-8",
    )
    args = ["build", "-mod=mod", f"-modfile={modfile}", "-trimpath", "-o", str(binary)]
    if tags:
        args.append("-tags=" + ",".join(tags))
    if progress is not None:
        args.append("-v")  # prints each package as it is compiled
    _run_go([*args, "."], cwd=testbed_source_dir() / prog, env=env, what=what, progress=progress)


# ---- the build ------------------------------------------------------------------------------------


def module_versions(binary: Path, env: Mapping[str, str]) -> dict[str, str]:
    """Module path -> version (``=> patched copy`` when replaced) that ``binary`` was built with
    (``go version -m``)."""
    out = _run_go(["version", "-m", str(binary)], cwd=binary.parent, env=env, what=f"reading the modules of {binary}")
    deps: dict[str, str] = {}
    last = ""
    for line in out.splitlines():
        parts = line.strip().split("\t")
        if parts[0] == "dep" and len(parts) >= 3:
            last = parts[1]
            deps[last] = parts[2]
        elif parts[0] == "=>" and last:
            deps[last] += " => patched copy"
    return deps


@dataclass(frozen=True)
class _Plan:
    """Everything a build depends on, worked out before the cache is consulted."""

    ps: PatchSet
    source: ModuleSource
    build_tags: tuple[str, ...]
    toolchain: str | None
    go_version: str
    sources: Path

    def key(self) -> str:
        h = hashlib.sha256()
        for part in (
            self.ps.name,
            json.dumps(dict(_module(self.ps)), sort_keys=True),
            self.ps.diff_text,
            self.source.sum,
            ",".join(self.build_tags),
            go_source_digest(*(self.sources / p for p in PROGRAMS)),
            self.go_version,
        ):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()


def _plan(version: str, variant: str, patch_set: PatchSet | None) -> _Plan:
    from quicsm.instrumentation.targets.quic_go import build_requirements

    version = version if version.startswith("v") else "v" + version
    ps = patch_set or patch_set_for(version, variant)
    if ps.target != "quic-go":
        raise TestbedError(f"{ps.origin}: {ps.name} is a set for {ps.target}, not quic-go")
    declared = _module(ps).get("version")
    if declared and declared != version:
        raise TestbedError(
            f"{ps.origin}/manifest.json: {ps.name} was made for quic-go {declared}, not {version} "
            "(a set ported to this version says so in module.version)"
        )
    source = download_module(version)
    req = build_requirements(source.dir)
    toolchain = req["toolchain"]
    return _Plan(ps, source, tuple(req["build_tags"]), toolchain, _go_version(toolchain), testbed_source_dir())


def _result(plan: _Plan, entry: Path, meta: Mapping[str, Any], *, cached: bool, seconds: float) -> BuildResult:
    return BuildResult(
        version=str(meta["version"]),
        variant=plan.ps.algorithm,
        server=entry / "bin" / PROGRAMS["server"],
        client=entry / "bin" / PROGRAMS["client"],
        patch_set=plan.ps.name,
        patched_module=entry / "quic-go",
        cache_dir=entry,
        cached=cached,
        seconds=seconds,
        go_version=str(meta["go_version"]),
        build_tags=tuple(meta["build_tags"]),
        meta=dict(meta),
    )


def _build_entry(plan: _Plan, tmp: Path, progress: Progress | None) -> dict[str, Any]:
    ps, version = plan.ps, plan.source.version
    env = go_env(plan.toolchain)
    patched = tmp / "quic-go"
    copy_writable(plan.source.dir, patched)
    apply_patch_set(ps, patched, f"{MODULE}@{version}")
    (tmp / "bin").mkdir()
    for prog, binary in PROGRAMS.items():
        what = f"building {binary} against {ps.name}"
        go_build(
            prog, tmp / "bin" / binary, patched, version, tags=plan.build_tags, env=env, what=what, progress=progress
        )
    return {
        "version": version,
        "patch_set": ps.name,
        "patch_set_origin": ps.origin,
        "variant": ps.algorithm,
        "build_tags": list(plan.build_tags),
        "go_version": plan.go_version,
        "toolchain": plan.toolchain,
        "module_sum": plan.source.sum,
        "modules": module_versions(tmp / "bin" / PROGRAMS["server"], env),
        "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def build_binaries(
    version: str,
    variant: str = "reno",
    out_dir: Path | str | None = None,
    *,
    cache_dir: Path | None = None,
    force: bool = False,
    progress: Progress | None = None,
    patch_set: PatchSet | None = None,
) -> BuildResult:
    """Build (or take from the cache) ``quicsm-server`` and ``quicsm-client`` for one quic-go version.

    The patch set is ``patch_set`` (made for this version: its ``module.version``, if it has one, must
    say so) or the shipped ``quic-go-<version>-<variant>``. Build tags and the Go toolchain are read from
    the module source (:func:`quicsm.instrumentation.targets.quic_go.build_requirements`), not from the
    set. ``out_dir``, if given, receives copies of both binaries (the result points at those copies).
    ``progress`` receives go's package lines and a line with the elapsed time when go is quiet.
    Raises :class:`TestbedError` naming the step that failed, with go's stderr.
    """
    t0 = time.monotonic()
    plan = _plan(version, variant, patch_set)
    name = f"{plan.source.version}-{plan.ps.algorithm}-{plan.key()[:16]}"
    need = [f"bin/{b}" for b in PROGRAMS.values()]
    with cache_entry(cache_dir or cache_root(), name, *need, force=force) as (entry, held):
        meta = held
        if meta is None:
            with staged_entry(entry) as tmp:
                if progress is not None:
                    tags = ",".join(plan.build_tags) or "none"
                    progress(
                        f"building quic-go {plan.source.version} ({plan.ps.name}) with {plan.go_version}, tags {tags}"
                    )
                meta = _build_entry(plan, tmp, progress)
                meta["seconds"] = round(time.monotonic() - t0, 2)
                (tmp / "build.json").write_text(json.dumps(meta, indent=2) + "\n")
            meta = json.loads((entry / "build.json").read_text())
    res = _result(plan, entry, meta, cached=held is not None, seconds=round(time.monotonic() - t0, 3))
    if out_dir is not None:
        res = _install(res, Path(out_dir))
    return res


def _install(res: BuildResult, out_dir: Path) -> BuildResult:
    """Copy both binaries into ``out_dir`` (temp file + rename, so no half-written binary is ever seen)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for prog, src in (("server", res.server), ("client", res.client)):
        dst = out_dir / src.name
        fd, tmp = tempfile.mkstemp(prefix=f".{src.name}.", dir=out_dir)
        os.close(fd)
        try:
            shutil.copyfile(src, tmp)
            os.chmod(tmp, 0o755)
            os.replace(tmp, dst)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        paths[prog] = dst
    return replace(res, server=paths["server"], client=paths["client"])
