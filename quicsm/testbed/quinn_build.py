"""Build quicsm-quinn-server against quinn-proto patched by a quicsm patch set, without a fork.

The crate's registry source (``~/.cargo/registry``, fetched with ``cargo fetch`` when absent) is copied,
patched through the patch engine, and given to cargo as a ``[patch.crates-io]`` path override; the server
sources (``testbed/quinn-server``) are copied beside it with the committed lock for that quinn-proto
version (``locks/quinn-proto-<version>.lock``, which also pins the matching quinn and h3-quinn), and
built with ``cargo build --release --locked``. No C library is compiled beyond ring's few files, so a
cold build takes minutes, not BoringSSL's quarter hour. The binary is cached under (version, patch set,
server sources and lock).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
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
)
from quicsm.testbed.quiche_build import find_cargo
from quicsm.testbed.sources import testbed_root

__all__ = ["build_quinn_server", "quinn_patch_set", "committed_lock", "has_qlog", "TARGET", "CCS"]

TARGET = "quinn"
BINARY = "quicsm-quinn-server"
CCS = ("bbr", "cubic", "reno")
"""``--cc`` values; only bbr is instrumented (cubic and reno run quinn's own controllers, unlogged)."""
LOCK_DIR = "locks"
KEY_CRATES = ("quinn", "quinn-proto", "quinn-udp", "h3", "h3-quinn", "rustls", "ring", "tokio", "rand")
"""Crates whose locked versions each run's meta.json reports (the whole lock is named by its sha256)."""


locked_crates = partial(crate_versions, crates=KEY_CRATES)


def quinn_patch_set(version: str) -> PatchSet:
    """The shipped ``quinn-<version>-bbr`` set; a clear error listing what exists."""
    return shipped_set(TARGET, f"{TARGET}-{version}-bbr")


def committed_lock(server_src: Path, version: str) -> Path | None:
    path = server_src / LOCK_DIR / f"quinn-proto-{version}.lock"
    return path if path.is_file() else None


def has_qlog(proto_src: Path) -> bool:
    """Whether a quinn-proto source has its qlog writer (feature ``qlog``: 0.11.14 on; 0.11.9 has none)."""
    manifest = (proto_src / "Cargo.toml").read_text(encoding="utf-8")
    return re.search(r"(?m)^qlog\s*=", manifest) is not None


def _without_features(manifest: str) -> str:
    """The server manifest without its ``[features]`` table (its ``qlog`` names a feature of quinn that
    the quinn pinned with an older quinn-proto lacks, which cargo refuses even when unused)."""
    return re.sub(r"(?ms)^\[features\]\n.*?(?=^\[|\Z)", "", manifest)


def build_quinn_server(version: str, *, cache_dir: Path | None = None, progress: Progress | None = None) -> RustServer:
    """The server for quinn-proto ``version`` with its BBR set applied, built (or taken from the cache)."""
    t0 = time.monotonic()
    cargo = find_cargo()
    ps = quinn_patch_set(version)
    server_src = testbed_root("quinn-server/Cargo.toml") / "quinn-server"
    lock = committed_lock(server_src, version)
    if lock is None:
        have = sorted(p.name for p in (server_src / LOCK_DIR).glob("*.lock"))
        raise TestbedError(
            f"no committed lock {server_src / LOCK_DIR}/quinn-proto-{version}.lock (have: {', '.join(have)}): "
            "the server pins quinn and h3-quinn per quinn-proto version"
        )
    root = cache_dir or cache_root()
    set_sha = hashlib.sha256(ps.diff_text.encode()).hexdigest()[:12]
    with cache_entry(root, f"quinn-{version}-{set_sha}-{source_digest(server_src)}", BINARY) as (entry, meta):
        if meta is not None:
            return RustServer(entry / BINARY, version, ps.name, True, round(time.monotonic() - t0, 3), meta)
        target_dir = root / "cargo-target" / "quinn-server"
        with (
            FileLock(root / ".cargo-target-quinn-server.lock"),
            tempfile.TemporaryDirectory(prefix="quicsm-quinn-", dir=root) as tmp,
        ):
            work = Path(tmp)
            patched = work / f"quinn-proto-{version}"
            copy_writable(crate_source(cargo, "quinn-proto", version, work, progress), patched)
            apply_patch_set(ps, patched, f"quinn-proto {version}")
            server = work / "server"
            shutil.copytree(server_src, server, ignore=shutil.ignore_patterns("target", LOCK_DIR, "Cargo.lock"))
            qlog = has_qlog(patched)
            if not qlog:
                manifest = server / "Cargo.toml"
                manifest.write_text(_without_features(manifest.read_text(encoding="utf-8")), encoding="utf-8")
            lock_text = lock.read_text(encoding="utf-8")
            (server / "Cargo.lock").write_text(lock_text, encoding="utf-8")
            env = {**os.environ, "CARGO_TARGET_DIR": str(target_dir), "QUICSM_QUINN_PROTO_VERSION": version}
            if progress is not None:
                progress(f"building {BINARY} against quinn-proto {version} ({ps.name})")
            argv = [
                cargo,
                "build",
                "--release",
                "--locked",
                "--config",
                f'patch.crates-io.quinn-proto.path="{patched}"',
                *(["--features", "qlog"] if qlog else []),
            ]
            run_tool(
                argv,
                cwd=server,
                what=f"building {BINARY} against {ps.name}",
                env=env,
                progress=progress,
                show=cargo_line,
            )
            meta = {
                "version": version,
                "patch_set": ps.name,
                "cargo": run_tool([cargo, "--version"], cwd=server, what="cargo --version").strip(),
                "locked": True,
                "qlog": qlog,
                "lock": str(lock),
                "lock_sha256": hashlib.sha256(lock_text.encode()).hexdigest(),
                "crates": locked_crates(lock_text),
                "seconds": round(time.monotonic() - t0, 2),
                "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            place_entry(entry, target_dir / "release" / BINARY, meta)
    return RustServer(entry / BINARY, version, ps.name, False, round(time.monotonic() - t0, 3), meta)
