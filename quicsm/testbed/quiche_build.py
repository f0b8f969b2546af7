"""Build quicsm-quiche-server against Cloudflare quiche patched by a quicsm patch set, without a fork.

The crate's registry source (``~/.cargo/registry/src/*/quiche-V``, fetched with ``cargo fetch`` when
absent) is copied, patched through the patch engine, and given to cargo as a ``[patch.crates-io]`` path
override; the server sources are copied beside it with their quiche requirement pinned to ``=V``. One
cargo target directory per crate version keeps BoringSSL (the slow part of a cold build) between
builds; the finished binary is cached under (version, patch set, server sources).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from functools import partial
from pathlib import Path

from quicsm.errors import TestbedError
from quicsm.instrumentation.patchset import PatchSet
from quicsm.testbed.buildtools import (
    FileLock,
    Progress,
    RustServer,
    apply_patch_set,
    cache_entry,
    cache_root,
    cargo_line,
    copy_writable,
    crate_source,
    crate_versions,
    place_entry,
    run_tool,
    shipped_set,
    source_digest,
    tool_output,
)
from quicsm.testbed.sources import testbed_root

__all__ = [
    "build_quiche_server",
    "committed_lock",
    "find_cargo",
    "find_cmake",
    "find_libclang",
    "locked_crates",
    "quiche_patch_set",
    "registry_source",
]

TARGET = "cloudflare-quiche"
BINARY = "quicsm-quiche-server"


def find_cargo() -> str:
    """cargo on PATH or in ~/.cargo/bin; a one-line error saying what to install otherwise."""
    found = shutil.which("cargo") or next(
        (p for p in (str(Path.home() / ".cargo/bin/cargo"),) if os.access(p, os.X_OK)), None
    )
    if not found:
        raise TestbedError(
            "cargo not found: install Rust >= 1.88 (rustup, or .ci/install.d/quiche.sh) to build the quiche server"
        )
    _check_toolchain(found)
    return found


MIN_RUST = (1, 88)
"""quiche 0.30's rust-version; Debian 12's own rustc (1.63) is older."""


def _check_toolchain(cargo: str) -> None:
    """A one-line error when cargo is older than quiche needs (cargo and rustc ship together)."""
    try:
        out = subprocess.run([cargo, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TestbedError(f"{cargo} --version failed ({exc}): reinstall Rust >= 1.88") from None
    m = re.search(r"\b(\d+)\.(\d+)\.\d+", out)
    if m and (int(m.group(1)), int(m.group(2))) < MIN_RUST:
        raise TestbedError(
            f"{cargo} is {m.group(0)}, quiche needs Rust >= {MIN_RUST[0]}.{MIN_RUST[1]}: "
            "install rustc-web and cargo-web (Debian 12) or use rustup (.ci/install.d/quiche.sh)"
        )


_LIBCLANG = re.compile(r"^libclang(?:-\d+(?:\.\d+)*)?\.so(?:\.\d+)*$")
"""Names bindgen (clang-sys) loads: ``libclang.so``, ``libclang.so.1``, ``libclang-14.so.1``; not
``libclang-cpp.so.14`` (the C++ library of the same package family, which lacks the C API)."""
LIBCLANG_DIRS = ("/usr/lib/llvm-*/lib", "/usr/lib/*-linux-gnu", "/usr/lib64", "/usr/lib")
CLANG_HEADERS = (
    "/usr/lib/llvm-{N}/lib/clang/*/include",
    "/usr/lib/clang/{N}*/include",
    "/usr/lib64/clang/{N}*/include",
    "/usr/local/lib/clang/{N}*/include",
)
"""Where clang's resource headers (``stddef.h``, ...) of LLVM ``N`` live; besides these, ``clang/*/include``
beside the library itself (and beside the file it links to) is always looked at."""


def _llvm_major(lib: str) -> str | None:
    """The LLVM major version of a libclang, from its name or the file it links to (``libclang-14.so.1``,
    ``llvm-14/lib/libclang.so.1``, ``libclang.so.14.0.6``)."""
    for path in (lib, os.path.realpath(lib)):
        m = re.search(r"libclang-(\d+)", os.path.basename(path)) or re.search(r"/llvm-(\d+)/", path)
        m = m or re.search(r"\.so\.(\d{2,})(?:\.\d+)*$", os.path.basename(path))
        if m:
            return m.group(1)
    return None


def _clang_headers(lib: str, headers: tuple[str, ...]) -> str | None:
    """The ``include`` directory holding clang's ``stddef.h`` for ``lib``'s LLVM; bindgen loads libclang
    but parses BoringSSL's headers with these (libclang1-N alone lacks them: "'stddef.h' file not found")."""
    patterns = [os.path.join(os.path.dirname(p), "clang", "*", "include") for p in (lib, os.path.realpath(lib))]
    major = _llvm_major(lib)
    if major:
        patterns += [h.replace("{N}", major) for h in headers]
    for pattern in patterns:
        for inc in sorted(glob.glob(pattern), reverse=True):
            if os.path.isfile(os.path.join(inc, "stddef.h")):
                return inc
    return None


def find_libclang(dirs: tuple[str, ...] = LIBCLANG_DIRS, headers: tuple[str, ...] = CLANG_HEADERS) -> str:
    """A libclang bindgen can load (boring-sys generates its BoringSSL bindings with it) whose LLVM's resource
    headers are installed: ``$LIBCLANG_PATH`` (a directory or the file) first, then the usual directories,
    newest LLVM first."""
    env = os.environ.get("LIBCLANG_PATH")
    candidates: list[str] = []
    if env:
        candidates += [env] if os.path.isfile(env) else sorted(glob.glob(os.path.join(env, "libclang*.so*")))
    for pattern in dirs:
        hits = glob.glob(os.path.join(pattern, "libclang*.so*"))
        candidates += sorted(hits, key=lambda p: [int(x) for x in re.findall(r"\d+", p)], reverse=True)
    headless: list[str] = []
    for path in candidates:
        if _LIBCLANG.match(os.path.basename(path)) and os.path.isfile(path):
            if _clang_headers(path, headers):
                return path
            headless.append(path)
    if headless:
        major = _llvm_major(headless[0])
        where = f"/usr/lib/llvm-{major}/lib/clang/*/include" if major else "clang/*/include beside it"
        raise TestbedError(
            f"{headless[0]} is there but not clang's resource headers for it (no stddef.h in {where}): "
            "bindgen would fail building BoringSSL with \"'stddef.h' file not found\": apt-get install -y libclang-dev"
        )
    seen = sorted({os.path.basename(p) for p in candidates})
    also = f" (found only {', '.join(seen)}, which bindgen cannot load)" if seen else ""
    raise TestbedError(
        f"libclang not found{also}: bindgen needs it to build BoringSSL: apt-get install -y libclang-dev"
    )


MIN_CMAKE = (3, 12)
"""BoringSSL's cmake_minimum_required."""


def find_cmake() -> str:
    """cmake at least :data:`MIN_CMAKE` (BoringSSL builds with it); a one-line error otherwise."""
    cmake = shutil.which("cmake")
    if cmake is None:
        raise TestbedError("cmake not found (BoringSSL builds with it): apt-get install -y cmake")
    out = tool_output([cmake, "--version"])
    m = re.search(r"cmake version (\d+)\.(\d+)", out)
    if not m or (int(m.group(1)), int(m.group(2))) < MIN_CMAKE:
        have = f"is {m.group(1)}.{m.group(2)}" if m else "does not say `cmake version X`"
        raise TestbedError(
            f"{cmake} {have}; BoringSSL needs cmake >= {MIN_CMAKE[0]}.{MIN_CMAKE[1]}: apt-get install -y cmake"
        )
    return cmake


def quiche_patch_set(version: str, cc: str) -> PatchSet:
    """The shipped ``cloudflare-quiche-<version>-<cc>`` set; a clear error listing what exists."""
    return shipped_set(TARGET, f"{TARGET}-{version}-{cc}")


def registry_source(version: str) -> Path:
    """``quiche-<version>`` in cargo's registry source cache (read-only by convention), fetched when missing."""
    cargo = find_cargo()
    with tempfile.TemporaryDirectory(prefix="quicsm-fetch-") as tmp:
        return crate_source(cargo, "quiche", version, Path(tmp))


def _run(
    argv: list[str], cwd: Path, what: str, env: dict[str, str] | None = None, progress: Progress | None = None
) -> None:
    run_tool(argv, cwd=cwd, what=what, env=env, progress=progress, show=cargo_line)


LOCK_DIR = "locks"
KEY_CRATES = ("quiche", "boring", "boring-sys", "ring", "rcgen", "octets", "libc", "bindgen", "cmake")
"""Crates whose locked versions each run's meta.json reports (the whole lock is named by its sha256)."""


def committed_lock(server_src: Path, version: str) -> Path | None:
    """``testbed/quiche-server/locks/quiche-<version>.lock``: the dependency versions the server was tested
    with against that quiche version (built with ``cargo build --locked``), if the repository has one."""
    path = server_src / LOCK_DIR / f"quiche-{version}.lock"
    return path if path.is_file() else None


locked_crates = partial(crate_versions, crates=KEY_CRATES)


def _patched_source(cargo: str, version: str, ps: PatchSet, set_sha: str, root: Path, work: Path) -> Path:
    """The registry source of quiche ``version`` with ``ps`` (whose diff hashes to ``set_sha``) applied, kept
    under ``quiche-src/``."""
    patched = root / "quiche-src" / f"quiche-{version}-{set_sha}"
    if not patched.is_dir():
        pristine = crate_source(cargo, "quiche", version, work)
        staging = work / "quiche"
        copy_writable(pristine, staging)
        apply_patch_set(ps, staging, f"quiche {version}")
        patched.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging, patched)
    return patched


def _target_dir(root: Path, lock_text: str) -> tuple[Path, str]:
    """The cargo target directory for a build with this lock: one per boring-sys version, so BoringSSL
    (the 10-15 minutes of a cold build) is compiled once for every quiche version that locks it."""
    boring = locked_crates(lock_text).get("boring-sys", "none").replace(",", "+")
    return root / "cargo-target" / f"boring-sys-{boring}", boring


def build_quiche_server(
    version: str,
    cc: str = "bbr2",
    *,
    cache_dir: Path | None = None,
    progress: Progress | None = None,
    patch_set: PatchSet | None = None,
    force: bool = False,
) -> RustServer:
    """The server binary for quiche ``version`` patched for ``cc``, built (or taken from the cache).

    With a committed lock for ``version`` (:func:`committed_lock`) cargo builds with ``--locked``, so a
    registry change cannot alter the build; otherwise the dependencies are resolved now
    (``cargo generate-lockfile``), said through ``progress``, and that lock is kept in the cache entry
    (``Cargo.lock``, ready to be committed as the version's lock) and recorded in build.json.
    """
    t0 = time.monotonic()
    cargo = find_cargo()
    find_libclang()
    find_cmake()
    ps = patch_set or quiche_patch_set(version, cc)
    server_src = testbed_root("quiche-server/Cargo.toml") / "quiche-server"
    lock = committed_lock(server_src, version)
    lock_text = lock.read_text(encoding="utf-8") if lock else None
    root = cache_dir or cache_root()
    set_sha = hashlib.sha256(ps.diff_text.encode()).hexdigest()[:12]
    lock_sha = hashlib.sha256((lock_text or "").encode()).hexdigest()
    src_key = hashlib.sha256(f"{source_digest(server_src, skip_top=(LOCK_DIR,))}\0{lock_sha}".encode()).hexdigest()[:16]
    with cache_entry(root, f"quiche-{version}-{cc}-{set_sha}-{src_key}", BINARY, force=force) as (entry, meta):
        if meta is not None:
            return RustServer(entry / BINARY, version, ps.name, True, round(time.monotonic() - t0, 3), meta)
        twin = None if force else _same_build(root, f"quiche-{version}-*-{set_sha}-{src_key}", entry)
        if twin is not None:
            meta = {
                **json.loads((twin / "build.json").read_text()),
                "patch_set": ps.name,
                "cc": cc,
                "same_build_as": twin.name,
                "seconds": round(time.monotonic() - t0, 2),
                "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            if progress is not None:
                progress(f"{ps.name} is the change {twin.name} was built with: its binary serves --cc {cc} too")
            place_entry(entry, twin / BINARY, meta, {"Cargo.lock": (twin / "Cargo.lock").read_text(encoding="utf-8")})
            return RustServer(entry / BINARY, version, ps.name, False, round(time.monotonic() - t0, 3), meta)
        with tempfile.TemporaryDirectory(prefix="quicsm-quiche-", dir=root) as tmp:
            work = Path(tmp)
            patched = _patched_source(cargo, version, ps, set_sha, root, work)
            server = work / "server"
            shutil.copytree(server_src, server, ignore=shutil.ignore_patterns("target", LOCK_DIR, "Cargo.lock"))
            manifest = server / "Cargo.toml"
            manifest.write_text(
                re.sub(
                    r'^quiche = \{ version = "[^"]*"',
                    f'quiche = {{ version = "={version}"',
                    manifest.read_text(),
                    flags=re.M,
                )
            )
            patch_cfg = ["--config", f'patch.crates-io.quiche.path="{patched}"']
            env = {**os.environ, "QUICSM_QUICHE_VERSION": version}  # the server reports it in its ready line
            if lock_text is not None:
                (server / "Cargo.lock").write_text(lock_text, encoding="utf-8")
            else:
                if progress is not None:
                    progress(
                        f"no committed Cargo.lock for quiche {version} ({server_src / LOCK_DIR}): resolving the "
                        "server's dependencies from crates.io now; the lock is kept in the cache entry"
                    )
                _run(
                    [cargo, "generate-lockfile", *patch_cfg],
                    server,
                    f"resolving the dependencies of quiche {version}",
                    env,
                )
            used_lock = (server / "Cargo.lock").read_text(encoding="utf-8")
            target_dir, boring = _target_dir(root, used_lock)
            # quiche's artifacts have no hash in their names (it is also a staticlib and cdylib): a build for
            # another version or patch set overwrites libquiche.rlib while the first one's fingerprint still
            # looks fresh. So builds in one target directory take turns, and the patched copy is touched to make
            # cargo recompile quiche.
            with FileLock(root / f".cargo-target-{target_dir.name}.lock"):
                os.utime(patched / "src" / "lib.rs")
                if progress is not None:
                    cold = not any((target_dir / "release" / "build").glob("boring-sys-*/out"))
                    progress(
                        f"building {BINARY} against quiche {version} ({ps.name})"
                        + (f"; first build with boring-sys {boring}: BoringSSL is compiled (10-15 min)" if cold else "")
                    )
                _run(
                    [cargo, "build", "--release", "--locked", *patch_cfg],
                    server,
                    f"building {BINARY} against {ps.name}",
                    {**env, "CARGO_TARGET_DIR": str(target_dir)},
                    progress,
                )
                meta = {
                    "version": version,
                    "patch_set": ps.name,
                    "cc": cc,
                    "cargo": tool_output([cargo, "--version"]),
                    "locked": lock_text is not None,
                    "lock": f"{LOCK_DIR}/{lock.name}" if lock else None,
                    "lock_sha256": hashlib.sha256(used_lock.encode()).hexdigest(),
                    "crates": locked_crates(used_lock),
                    "seconds": round(time.monotonic() - t0, 2),
                    "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                }
                place_entry(entry, target_dir / "release" / BINARY, meta, {"Cargo.lock": used_lock})
    return RustServer(entry / BINARY, version, ps.name, False, round(time.monotonic() - t0, 3), meta)


def _same_build(root: Path, pattern: str, entry: Path) -> Path | None:
    """A finished cache entry built from the same patched source, lock and server sources as ``entry``
    (the Reno and Cubic sets are one change: the controller is chosen when the server starts)."""
    for twin in sorted(root.glob(pattern)):
        if twin != entry and (twin / BINARY).is_file() and (twin / "build.json").is_file():
            return twin
    return None
