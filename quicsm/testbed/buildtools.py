"""What every stack's build shares: the cache directory, a lock per cache entry, writable copies of
registry sources, applying a patch set through the engine, and running a toolchain with progress.

A cold build can take minutes (quiche compiles BoringSSL for ~10 min on 2 cores) with the toolchain
silent for long stretches, so :func:`run_tool` forwards the toolchain's own progress lines (cargo's
``Compiling x``, ``go build -v``'s packages) and, when it says nothing for a while, a line with the time
elapsed; on failure the error carries the tail of its output.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from quicsm.errors import PatchError, TestbedError
from quicsm.files import replace_dir
from quicsm.instrumentation.patchset import PatchSet, shipped_patch_sets

__all__ = [
    "HEARTBEAT_S",
    "FileLock",
    "Progress",
    "RustServer",
    "apply_patch_set",
    "cache_root",
    "cache_entry",
    "cargo_line",
    "copy_writable",
    "crate_source",
    "crate_versions",
    "dir_size",
    "format_duration",
    "place_entry",
    "run_tool",
    "shipped_set",
    "source_digest",
]

Progress = Callable[[str], None]
"""Receives one line of build progress (no newline)."""
HEARTBEAT_S = 30.0
"""Seconds of toolchain silence after which a line with the elapsed time is reported."""
_TAIL_LINES = 40


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/quicsm/build`` (``~/.cache/quicsm/build``): every stack's cache entries."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "quicsm" / "build"


class FileLock:
    """An exclusive ``flock`` on a file, so two processes do not build the same entry at once."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> Self:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


@contextmanager
def staged_entry(entry: Path) -> Iterator[Path]:
    """A staging directory beside ``entry`` that becomes ``entry`` (:func:`install_entry`) when the block
    ends (:func:`quicsm.files.replace_dir`: a run using the old binaries keeps them) and is removed when it
    raises: the cache holds whole entries or none."""
    staging = Path(tempfile.mkdtemp(prefix=f".tmp-{entry.name}-", dir=entry.parent))
    try:
        yield staging
        replace_dir(staging, entry)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


@contextmanager
def cache_entry(root: Path, name: str, *need: str, force: bool = False) -> Iterator[tuple[Path, dict[str, Any] | None]]:
    """The cache entry ``root/name``, locked for the block, and its build.json when it is finished (with every
    file ``need`` names) and not ``force``d; else None: build it (with :func:`staged_entry`)."""
    root.mkdir(parents=True, exist_ok=True)
    entry = root / name
    with FileLock(root / f".{name}.lock"):
        done = not force and (entry / "build.json").is_file() and all((entry / n).is_file() for n in need)
        yield entry, json.loads((entry / "build.json").read_text()) if done else None


def place_entry(entry: Path, binary: Path, meta: dict[str, Any], files: Mapping[str, str] | None = None) -> None:
    """Write the cache entry whole (``binary``, the texts of ``files`` by name, build.json) or not at all."""
    with staged_entry(entry) as staging:
        shutil.copy2(binary, staging / binary.name)
        for name, text in (files or {}).items():
            (staging / name).write_text(text, encoding="utf-8")
        (staging / "build.json").write_text(json.dumps(meta, indent=2) + "\n")


def copy_writable(src: Path, dst: Path, *, ignore: Callable[[str, list[str]], set[str]] | None = None) -> None:
    """Copy a registry source (read-only files in Go's module cache) to ``dst``, owner-writable."""
    shutil.copytree(src, dst, copy_function=shutil.copyfile, ignore=ignore)
    for dirpath, _dirs, files in os.walk(dst):
        os.chmod(dirpath, 0o755)
        for f in files:
            os.chmod(os.path.join(dirpath, f), 0o644)


def apply_patch_set(ps: PatchSet, root: Path, what: str) -> None:
    """Patch ``root`` (a private copy) through the patch engine: all or nothing, sha256s checked."""
    from quicsm.instrumentation import engine

    try:
        engine.apply(root, set_name=ps.name, sets=[ps])
    except PatchError as exc:
        raise TestbedError(f"applying {ps.name} to {what} in {root}: {exc}") from exc


def format_duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``."""
    s = int(round(seconds))
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60:02d} s"


def dir_size(path: Path) -> int:
    """Bytes of the files under ``path`` (not following symlinks)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def run_tool(
    argv: Sequence[str],
    *,
    cwd: Path,
    what: str,
    env: Mapping[str, str] | None = None,
    progress: Progress | None = None,
    show: Callable[[str], bool] = lambda line: True,
    heartbeat_s: float = HEARTBEAT_S,
    timeout_s: float | None = None,
) -> str:
    """Run a toolchain command; return its stdout. Raises :class:`TestbedError` naming ``what`` with the
    tail of its output.

    With ``progress``, every stderr line for which ``show`` is true is passed on as it comes, and after
    ``heartbeat_s`` without one a line says how long ``what`` has been running (and the last line seen).
    """
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
        )
    except OSError as exc:
        raise TestbedError(f"{what}: cannot run {argv[0]} ({exc})") from None
    tail: deque[str] = deque(maxlen=_TAIL_LINES)
    out: list[str] = []
    last_said = [t0]
    last_line = [""]
    lock = threading.Lock()
    done = threading.Event()

    def say(line: str) -> None:
        if progress is not None:
            with lock:
                last_said[0] = time.monotonic()
                progress(line)

    def read_stderr() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.rstrip()
            tail.append(line)
            if line.strip() and show(line):
                last_line[0] = line.strip()
                say(line.strip())

    def read_stdout() -> None:
        assert proc.stdout is not None
        out.append(proc.stdout.read())

    def beat() -> None:
        while not done.wait(min(5.0, heartbeat_s)):
            now = time.monotonic()
            if now - last_said[0] >= heartbeat_s:
                last = f" (its last line: {last_line[0]})" if last_line[0] else ""
                say(f"{what}: {format_duration(now - t0)} so far{last}")

    threads = [threading.Thread(target=f, daemon=True) for f in (read_stderr, read_stdout)]
    if progress is not None:
        threads.append(threading.Thread(target=beat, daemon=True))
    for t in threads:
        t.start()
    try:
        rc = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise TestbedError(f"{what}: {argv[0]} did not finish in {format_duration(timeout_s or 0)}") from None
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        done.set()
        for t in threads[:2]:
            t.join(timeout=10)
    if rc != 0:
        err = "\n".join(line for line in tail if line.strip()) or (out[0].strip() if out else "")
        raise TestbedError(
            f"{what} failed ({' '.join(Path(a).name if i == 0 else a for i, a in enumerate(argv))} in {cwd}, "
            f"exit status {rc}):\n{err or '(no output)'}"
        )
    return out[0] if out else ""


# ---- what the cargo-built servers (quiche, quinn) share ------------------------------------------


@dataclass(frozen=True)
class RustServer:
    binary: Path
    version: str
    patch_set: str
    cached: bool
    seconds: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)
    """How it was built (build.json of the cache entry): cargo version, locked crate versions."""


def shipped_set(target: str, name: str) -> PatchSet:
    """The shipped patch set ``name`` of ``target``; a clear error listing what exists."""
    sets = {ps.name: ps for ps in shipped_patch_sets(target)}
    if name not in sets:
        raise TestbedError(f"no patch set {name} (shipped for {target}: {', '.join(sorted(sets)) or 'none'})")
    return sets[name]


def crate_versions(lock_text: str, crates: Sequence[str]) -> dict[str, str]:
    """Crate -> version for ``crates`` in a Cargo.lock (several versions joined by ``,``)."""
    import tomllib

    found: dict[str, list[str]] = {}
    for pkg in tomllib.loads(lock_text).get("package", []):
        if pkg.get("name") in crates:
            found.setdefault(pkg["name"], []).append(str(pkg.get("version")))
    return {k: ",".join(sorted(v)) for k, v in sorted(found.items())}


def source_digest(root: Path, *, skip_top: tuple[str, ...] = (), keep: Callable[[Path], bool] | None = None) -> str:
    """sha256 of a project's sources: the files ``keep`` accepts, by default a cargo project's (build outputs,
    ``Cargo.lock`` and the ``skip_top`` folders aside)."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        parts = p.relative_to(root).parts
        cargo = "target" not in parts and parts[0] not in skip_top and p.name != "Cargo.lock"
        if p.is_file() and (keep(p) if keep else cargo):
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


def tool_output(argv: Sequence[str]) -> str:
    """What a short tool run (``cmake --version``) prints on stdout, stripped; empty when it cannot run."""
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def cargo_line(line: str) -> bool:
    """cargo's status lines worth showing as progress (``Compiling x v1``, ``Finished``...)."""
    return line.lstrip().split(" ", 1)[0] in ("Compiling", "Downloaded", "Downloading", "Finished", "Locking")


def crate_source(cargo: str, crate: str, version: str, work: Path, progress: Progress | None = None) -> Path:
    """``<crate>-<version>`` from cargo's registry (unpacked source, or the downloaded .crate unpacked into
    ``work``), fetched through cargo when missing. Read-only by convention: copy it before patching."""
    home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    for _ in range(2):
        hits = glob.glob(str(home / "registry/src/*" / f"{crate}-{version}"))
        if hits:
            return Path(hits[0])
        crates = glob.glob(str(home / "registry/cache/*" / f"{crate}-{version}.crate"))
        if crates:
            with tarfile.open(crates[0]) as tar:
                tar.extractall(work / "unpacked", filter="data")
            return work / "unpacked" / f"{crate}-{version}"
        fetch = work / "fetch"
        (fetch / "src").mkdir(parents=True, exist_ok=True)
        (fetch / "src/main.rs").write_text("fn main() {}\n")
        (fetch / "Cargo.toml").write_text(
            '[package]\nname = "quicsm-fetch"\nversion = "0.0.0"\nedition = "2021"\n\n'
            f'[dependencies]\n{crate} = {{ version = "={version}", default-features = false }}\n'
        )
        run_tool([cargo, "fetch"], cwd=fetch, what=f"fetching {crate} {version} from crates.io", progress=progress)
    raise TestbedError(f"{crate} {version} not in the cargo registry after cargo fetch")
