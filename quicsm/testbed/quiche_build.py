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
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from quicsm.errors import TestbedError
from quicsm.instrumentation.patchset import PatchSet, shipped_patch_sets
from quicsm.testbed.build import _apply_patch, _copy_writable, _Lock, cache_root
from quicsm.testbed.sources import testbed_root

__all__ = ["QuicheServer", "build_quiche_server", "find_cargo", "find_libclang", "quiche_patch_set"]

TARGET = "cloudflare-quiche"
BINARY = "quicsm-quiche-server"


@dataclass(frozen=True)
class QuicheServer:
    binary: Path
    version: str
    patch_set: str
    cached: bool


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


def find_libclang() -> str:
    """libclang for bindgen (boring-sys generates its BoringSSL bindings with it)."""
    env = os.environ.get("LIBCLANG_PATH")
    hits = glob.glob(os.path.join(env, "libclang*.so*")) if env else []
    hits += sorted(glob.glob("/usr/lib/llvm-*/lib/libclang*.so*")) + glob.glob(
        "/usr/lib/x86_64-linux-gnu/libclang*.so*"
    )
    if not hits:
        raise TestbedError("libclang not found (bindgen needs it to build BoringSSL): apt-get install -y libclang-dev")
    return hits[0]


def quiche_patch_set(version: str, cc: str) -> PatchSet:
    """The shipped ``cloudflare-quiche-<version>-<cc>`` set; a clear error listing what exists."""
    sets = {ps.name: ps for ps in shipped_patch_sets(TARGET)}
    name = f"{TARGET}-{version}-{cc}"
    if name not in sets:
        have = ", ".join(sorted(sets)) or "none"
        raise TestbedError(f"no patch set {name} (shipped for {TARGET}: {have})")
    return sets[name]


def _registry_source(cargo: str, version: str, work: Path) -> Path:
    """``quiche-<version>`` in cargo's registry source cache, fetched through cargo when missing."""
    pattern = str(Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo")) / "registry/src/*" / f"quiche-{version}")
    hits = glob.glob(pattern)
    if not hits:
        (work / "fetch/src").mkdir(parents=True)
        (work / "fetch/src/main.rs").write_text("fn main() {}\n")
        (work / "fetch/Cargo.toml").write_text(
            f'[package]\nname = "quicsm-fetch"\nversion = "0.0.0"\nedition = "2021"\n\n'
            f'[dependencies]\nquiche = "={version}"\n'
        )
        _run([cargo, "fetch", "-q"], work / "fetch", f"fetching quiche {version} from crates.io")
        hits = glob.glob(pattern)
    if not hits:
        raise TestbedError(f"quiche {version} not in the cargo registry after cargo fetch ({pattern})")
    return Path(hits[0])


def _run(argv: list[str], cwd: Path, what: str, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-5:])
        raise TestbedError(f"{what} failed (exit {proc.returncode}): {tail}")


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and "target" not in p.relative_to(root).parts and p.name != "Cargo.lock":
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


def build_quiche_server(version: str, cc: str = "bbr2", *, cache_dir: Path | None = None) -> QuicheServer:
    """The server binary for quiche ``version`` patched for ``cc``, built (or taken from the cache)."""
    cargo = find_cargo()
    find_libclang()
    if shutil.which("cmake") is None:
        raise TestbedError("cmake not found (BoringSSL builds with it): apt-get install -y cmake")
    ps = quiche_patch_set(version, cc)
    server_src = testbed_root("quiche-server/Cargo.toml") / "quiche-server"
    root = cache_dir or cache_root()
    set_sha = hashlib.sha256(ps.diff_text.encode()).hexdigest()[:12]
    entry = root / f"quiche-{version}-{cc}-{set_sha}-{_digest(server_src)}"
    binary = entry / BINARY
    root.mkdir(parents=True, exist_ok=True)
    with _Lock(root / f".{entry.name}.lock"):
        if binary.is_file():
            return QuicheServer(binary, version, ps.name, True)
        # One cargo target directory per crate version keeps BoringSSL between patch sets, but quiche's
        # artifacts have no hash in their names (it is also a staticlib and cdylib): a build for another
        # patch set overwrites libquiche.rlib while the first one's fingerprint still looks fresh. So builds
        # of one version take turns, and the patched copy is touched to make cargo recompile quiche.
        target_dir = root / "cargo-target" / f"quiche-{version}"
        with (
            _Lock(root / f".cargo-target-quiche-{version}.lock"),
            tempfile.TemporaryDirectory(prefix="quicsm-quiche-", dir=root) as tmp,
        ):
            work = Path(tmp)
            patched = root / "quiche-src" / f"quiche-{version}-{set_sha}"
            if not patched.is_dir():
                pristine = _registry_source(cargo, version, work)
                staging = work / "quiche"
                _copy_writable(pristine, staging)
                _apply_patch(ps, staging)
                patched.parent.mkdir(parents=True, exist_ok=True)
                os.replace(staging, patched)
            os.utime(patched / "src" / "lib.rs")
            server = work / "server"
            shutil.copytree(server_src, server, ignore=shutil.ignore_patterns("target", "Cargo.lock"))
            manifest = server / "Cargo.toml"
            manifest.write_text(
                re.sub(r'^quiche = "[^"]*"', f'quiche = "={version}"', manifest.read_text(), flags=re.M)
            )
            env = {
                **os.environ,
                "CARGO_TARGET_DIR": str(target_dir),
                "QUICSM_QUICHE_VERSION": version,  # the server reports it in its ready line
            }
            _run(
                [cargo, "build", "--release", "--config", f'patch.crates-io.quiche.path="{patched}"'],
                server,
                f"building {BINARY} against {ps.name}",
                env,
            )
            entry.mkdir(parents=True, exist_ok=True)
            shutil.copy2(target_dir / "release" / BINARY, binary)
    return QuicheServer(binary, version, ps.name, False)
