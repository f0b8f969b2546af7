"""Build Chromium's own QUIC toy server and client (proto-quic's ``quic_server`` / ``quic_client``), patched by
a quicsm set.

Not the Chromium *browser* (:mod:`quicsm.testbed.chromium` drives Debian's browser as an HTTP/3 client): this is
the 2017 gQUIC code Chromium shipped, the paper's subject, built from its own source tree.

Where things go (all under ``~/.cache/quicsm/chromium``, :func:`chromium_cache`):

* ``src/<version>-<key>/``: the source, unpacked once from ``proto-quic-<version>-src.tar.xz`` (``../shared/chromium``
  beside the clone, or ``$QUICSM_CHROMIUM_SOURCE``: that archive, a proto-quic checkout or its ``src/``), with the
  testbed's own build fixes and tool patches applied (``testbed/chromium-quic/patches/*.diff``);
* ``trees/<version>-<set>-<key>/``: one tree per patch set, hard links to ``src/`` except the files the set
  changes (the patch engine writes new files and renames them into place, so the shared source never changes),
  with its own ``out/quicsm`` build directory: applying another set never rebuilds this one's objects;
* ``ccache/``: every compile goes through ccache, so a second set (or a new tree after ``--force``) compiles
  only what its patch changed; the rest are cache hits;
* ``bin/<version>-<set>-<key>/``: the finished entry: ``quic_server``, ``quic_client``, the server's certificate
  (``server.pem``, PKCS#8 ``server.key``) and ``build.json``; written beside and renamed into place.

The build needs Python 2.7 (the 2017 build scripts), clang and lld (Debian's 14 work), ninja, NSS headers and
openssl; :func:`find_toolchain` names the command that installs whatever is missing.
"""

from __future__ import annotations

import base64
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quicsm.errors import TestbedError
from quicsm.instrumentation.patchset import PatchSet
from quicsm.testbed.buildtools import (
    FileLock,
    Progress,
    apply_patch_set,
    cache_entry,
    cache_root,
    format_duration,
    run_tool,
    staged_entry,
)
from quicsm.testbed.sources import testbed_root

__all__ = [
    "DEFAULT_VERSION",
    "GN_ARGS",
    "TARGETS",
    "ChromiumQuic",
    "Toolchain",
    "build_chromium_quic",
    "chromium_cache",
    "find_python2",
    "find_source",
    "find_toolchain",
    "gn_args",
    "prepared_source",
    "tool_patches",
]

DEFAULT_VERSION = "62.0.3187.0"
TARGETS = ("quic_server", "quic_client")
SOURCE_ENV = "QUICSM_CHROMIUM_SOURCE"
CERT_HOST = "quicsm.test"
"""The host name of the server's certificate and of the page's URLs (the client connects by address)."""

GN_ARGS: dict[str, Any] = {
    "is_debug": False,  # release: DCHECKs off, -O2 (no slower to compile than -O0 here, much faster to run)
    "symbol_level": 0,  # no debug info: the largest cut in compile and link time and in out/
    "use_sysroot": False,  # the snapshot's Debian sysroot is not in it; the system's headers are used
    "treat_warnings_as_errors": False,  # clang 14 warns on 2017 code
    "clang_use_chrome_plugins": False,  # the plugins are built for Chromium's own clang
    "use_lld": True,
    "use_custom_libcxx": False,  # libstdc++ of the system
    "use_gconf": False,
    "use_gio": False,
    "use_glib": False,
    "use_kerberos": False,
}
"""gn arguments of every build (``clang_base_path`` and ``cc_wrapper`` are added per machine)."""


def chromium_cache() -> Path:
    """``~/.cache/quicsm/chromium``: sources, per-set trees, ccache and finished builds."""
    return cache_root().parent / "chromium"


# ---- toolchain ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Toolchain:
    python2: str
    clang_base: Path
    ninja: str
    ccache: str | None
    openssl: str

    def describe(self) -> dict[str, str]:
        return {
            "python2": _first_line([self.python2, "--version"]),
            "clang": _first_line([str(self.clang_base / "bin" / "clang"), "--version"]),
            "ninja": _first_line([self.ninja, "--version"]),
            "ccache": _first_line([self.ccache, "--version"]) if self.ccache else "none",
        }


def _first_line(argv: list[str]) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    return ((p.stdout or "") + (p.stderr or "")).strip().splitlines()[0] if (p.stdout or p.stderr) else ""


PYTHON2_CANDIDATES = (
    "python2.7",
    "python2",
    "$PYENV_ROOT/versions/2.7*/bin/python2.7",
    "~/.pyenv/versions/2.7*/bin/python2.7",
    "/usr/bin/python2.7",
    "/usr/local/bin/python2.7",
    "/opt/python*/bin/python2.7",
)


def _is_python27(path: str) -> bool:
    try:
        p = subprocess.run(
            [path, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return p.returncode == 0 and p.stdout.strip() == "(2, 7)"


def find_python2(candidates: tuple[str, ...] = PYTHON2_CANDIDATES) -> str:
    """A Python 2.7 interpreter (``$QUICSM_PYTHON2`` first). A pyenv shim that has no 2.7 selected fails the
    check and the next candidate is tried, so a pyenv's 2.7.18 is found without ``pyenv global``."""
    env = os.environ.get("QUICSM_PYTHON2")
    tried = [env] if env else []
    for cand in candidates:
        if cand.startswith(("~", "/", "$")):
            pattern = os.path.expanduser(os.path.expandvars(cand))
            tried += sorted(glob.glob(pattern), reverse=True) if not pattern.startswith("$") else []
        elif found := shutil.which(cand):
            tried.append(found)
    for path in tried:
        if _is_python27(path):
            return path
    raise TestbedError(
        "Python 2.7 not found (Chromium 62's build scripts need it; Debian 12 has no python2 package): "
        "install it with pyenv (`pyenv install 2.7.18`) or point QUICSM_PYTHON2 at a python2.7"
    )


def find_toolchain() -> Toolchain:
    """Everything the build runs; a one-line error naming the install command for what is missing."""
    missing: list[str] = []
    clang = shutil.which("clang")
    clang_base = Path(os.path.realpath(clang)).parent.parent if clang else None
    if clang_base is None or not (clang_base / "bin" / "clang++").exists():
        missing.append("clang")
    elif not (clang_base / "bin" / "ld.lld").exists() and not shutil.which("ld.lld"):
        missing.append("lld")
    ninja = shutil.which("ninja")
    if ninja is None:
        missing.append("ninja-build")
    if not glob.glob("/usr/include/nss*/cert.h") or not glob.glob("/usr/include/nspr*/prtypes.h"):
        missing.append("libnss3-dev")
    openssl = shutil.which("openssl")
    if openssl is None:
        missing.append("openssl")
    if missing:
        raise TestbedError(
            f"building Chromium's QUIC needs {', '.join(missing)}: apt-get install -y {' '.join(missing)} "
            "(or .ci/install.d/chromium-quic.sh)"
        )
    assert clang_base is not None and ninja is not None and openssl is not None
    return Toolchain(find_python2(), clang_base, ninja, shutil.which("ccache"), openssl)


# ---- source ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceOrigin:
    """Where the Chromium source comes from: an archive of proto-quic, or a directory (checkout or ``src/``)."""

    path: Path
    kind: str  # "archive" or "directory"

    def key(self) -> str:
        if self.kind == "archive":
            st = self.path.stat()
            return hashlib.sha256(f"{self.path.name}\0{st.st_size}".encode()).hexdigest()[:10]
        return hashlib.sha256(str(self.path.resolve()).encode()).hexdigest()[:10]


def _shared_dirs() -> list[Path]:
    here = Path(__file__).resolve()
    return [p / "shared" / "chromium" for p in here.parents[2:4]] + [Path("/work/shared/chromium")]


def find_source(version: str, given: str | os.PathLike[str] | None = None) -> SourceOrigin:
    """The source of Chromium ``version``: ``given`` or ``$QUICSM_CHROMIUM_SOURCE`` (an archive, a proto-quic
    checkout, or its ``src/``), else ``proto-quic-<version>-src.tar.xz`` in ``../shared/chromium`` beside the clone."""
    spec = given or os.environ.get(SOURCE_ENV)
    if spec:
        p = Path(spec).expanduser()
        if p.is_file():
            return SourceOrigin(p, "archive")
        if (p / "src" / "chrome" / "VERSION").is_file():
            return SourceOrigin(p / "src", "directory")
        if (p / "chrome" / "VERSION").is_file():
            return SourceOrigin(p, "directory")
        raise TestbedError(f"{p}: not a Chromium source (no chrome/VERSION in it or in its src/) nor an archive of one")
    name = f"proto-quic-{version}-src.tar.xz"
    for d in _shared_dirs():
        if (d / name).is_file():
            return SourceOrigin(d / name, "archive")
    raise TestbedError(
        f"no Chromium {version} source: {name} is in none of {', '.join(str(d) for d in _shared_dirs())}; "
        f"set {SOURCE_ENV} to a proto-quic checkout (or its src/, or an archive of it)"
    )


def chrome_version(src: Path) -> str:
    """``MAJOR.MINOR.BUILD.PATCH`` from ``chrome/VERSION``."""
    try:
        parts = dict(line.split("=", 1) for line in (src / "chrome" / "VERSION").read_text().split() if "=" in line)
        return ".".join(parts[k] for k in ("MAJOR", "MINOR", "BUILD", "PATCH"))
    except (OSError, KeyError, ValueError) as exc:
        raise TestbedError(f"{src / 'chrome' / 'VERSION'}: cannot read the Chromium version ({exc})") from None


def tool_patches() -> list[Path]:
    """The testbed's own patches to the Chromium tree, in order: build fixes for today's toolchain and the
    toy tools' testbed switches (``testbed/chromium-quic/patches``)."""
    root = testbed_root("chromium-quic/README.md") / "chromium-quic" / "patches"
    return sorted(root.glob("*.diff"))


def _patches_key(patches: list[Path]) -> str:
    h = hashlib.sha256()
    for p in patches:
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:10]


def _unpack_archive(archive: Path, dest: Path, progress: Progress | None) -> None:
    """The archive's ``src/`` (under one top directory) into ``dest``."""
    if progress is not None:
        progress(f"unpacking {archive.name} ({archive.stat().st_size / 2**20:.1f} MiB)")
    tmp = dest.parent / f".unpack-{dest.name}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        run_tool(["tar", "-xf", str(archive), "-C", str(tmp)], cwd=tmp, what=f"unpacking {archive.name}")
        srcs = [p for p in tmp.glob("*/src") if (p / "chrome" / "VERSION").is_file()]
        srcs += [tmp / "src"] if (tmp / "src" / "chrome" / "VERSION").is_file() else []
        if len(srcs) != 1:
            raise TestbedError(f"{archive}: expected one <top>/src/chrome/VERSION in the archive, found {len(srcs)}")
        os.replace(srcs[0], dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _apply_tool_patch(patch: Path, src: Path) -> None:
    proc = subprocess.run(
        ["patch", "-p1", "--forward", "--batch", "-F0", "-i", str(patch)],
        cwd=src,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise TestbedError(
            f"{patch.name} does not apply to {src} (a Chromium other than 62.0.3187.0 may need its own): "
            + (proc.stdout + proc.stderr).strip().splitlines()[-1]
        )


def prepared_source(
    version: str, *, given: str | None = None, progress: Progress | None = None
) -> tuple[Path, dict[str, Any]]:
    """The source tree of ``version`` with the tool patches applied (made once, then shared by every set's
    tree), and what it was made from."""
    origin = find_source(version, given)
    patches = tool_patches()
    key = f"{origin.key()}-{_patches_key(patches)}"
    root = chromium_cache() / "src"
    dest = root / f"{version}-{key}"
    record = {
        "source": str(origin.path),
        "source_kind": origin.kind,
        "tool_patches": {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in patches},
    }
    with FileLock(root / f".{dest.name}.lock"):
        if (dest / ".quicsm-prepared").is_file():
            return dest, json.loads((dest / ".quicsm-prepared").read_text())
        shutil.rmtree(dest, ignore_errors=True)
        staging = root / f".prep-{dest.name}"
        shutil.rmtree(staging, ignore_errors=True)
        try:
            if origin.kind == "archive":
                _unpack_archive(origin.path, staging, progress)
            else:
                if progress is not None:
                    progress(f"copying {origin.path}")
                shutil.copytree(origin.path, staging, symlinks=True, ignore=shutil.ignore_patterns("out", ".git"))
            found = chrome_version(staging)
            if found != version:
                raise TestbedError(f"{origin.path}: is Chromium {found}, not {version} (give --stack-version {found})")
            # The ICU data blob is not in the public snapshot; the toy tools never load it, the copy step needs a file.
            icu = staging / "third_party" / "icu" / "common" / "icudtl.dat"
            if not icu.exists():
                icu.parent.mkdir(parents=True, exist_ok=True)
                icu.write_bytes(b"")
                record["icudtl_dat"] = "empty (not in the snapshot; the toy tools never load ICU data)"
            for patch in patches:
                _apply_tool_patch(patch, staging)
            if origin.kind == "archive":
                with open(origin.path, "rb") as fh:
                    record["source_sha256"] = hashlib.file_digest(fh, "sha256").hexdigest()
            record["version"] = version
            (staging / ".quicsm-prepared").write_text(json.dumps(record, indent=1))
            os.replace(staging, dest)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return dest, record


def _link_tree(src: Path, dest: Path) -> None:
    """``dest`` as a tree of hard links to ``src`` (``cp -al``: seconds for 25,000 files, no extra space)."""
    run_tool(["cp", "-al", str(src), str(dest)], cwd=src.parent, what=f"linking {dest.name}")


def _patched_tree(src: Path, ps: PatchSet, key: str, progress: Progress | None) -> Path:
    """The per-set tree: links to the prepared source, the set applied by the patch engine (which writes each
    changed file anew and renames it into place, so the links to the shared source are replaced, not written
    through)."""
    root = chromium_cache() / "trees"
    tree = root / f"{src.name.split('-')[0]}-{ps.name}-{key}"
    marker = tree / ".quicsm-tree"
    if marker.is_file():
        return tree
    shutil.rmtree(tree, ignore_errors=True)
    staging = root / f".link-{tree.name}"
    shutil.rmtree(staging, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    try:
        if progress is not None:
            progress(f"tree for {ps.name}: linking the source and applying the set")
        _link_tree(src, staging)
        for f in ps.files:  # the patched files become copies before the engine sees them
            p = staging / f.path
            if p.is_file():
                data = p.read_bytes()
                p.unlink()
                p.write_bytes(data)
        apply_patch_set(ps, staging, f"Chromium {src.name}")
        marker_tmp = staging / ".quicsm-tree"
        marker_tmp.write_text(json.dumps({"patch_set": ps.name, "files": [f.path for f in ps.files]}))
        os.replace(staging, tree)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return tree


def _tree_files(tree: Path) -> list[str] | None:
    """The files a tree's patch set changed (its marker), or None when unknown."""
    try:
        marker = json.loads((tree / ".quicsm-tree").read_text())
    except (OSError, ValueError):
        return None
    if isinstance(marker.get("files"), list):
        return [str(f) for f in marker["files"]]
    from quicsm.instrumentation.patchset import shipped_patch_sets  # trees made before the marker listed them

    for ps in shipped_patch_sets("chromium"):
        if ps.name == marker.get("patch_set"):
            return [f.path for f in ps.files]
    return None


def _seed_out(tree: Path, src: Path, ps: PatchSet, args: str, progress: Progress | None) -> bool:
    """Start a new tree's ``out/quicsm`` from a built sibling tree of the same source and gn args, so only what
    the two sets change is compiled: the sibling's objects are copied with their times, and the files its set
    changed (pristine here) and this set's files are made newer than them (as copies, so the shared source's
    times stay). ninja then rebuilds those files, their dependents and the two links. False when no sibling."""
    probe = "chrome/VERSION"
    for sib in sorted((chromium_cache() / "trees").iterdir()):
        out = sib / "out" / "quicsm"
        if sib == tree or not (out / "quic_server").is_file() or not (out / "args.gn").is_file():
            continue
        try:
            same_src = (sib / probe).stat().st_ino == (src / probe).stat().st_ino
        except OSError:
            continue
        files = _tree_files(sib)
        if not same_src or files is None or (out / "args.gn").read_text() != args:
            continue
        if progress is not None:
            progress(f"starting from the objects of {sib.name}: only the files of both sets are compiled")
        staging = tree / "out" / ".seed"
        shutil.rmtree(staging, ignore_errors=True)
        run_tool(["cp", "-a", str(out), str(staging)], cwd=tree, what=f"copying {sib.name}/out")
        now = time.time() + 1
        for rel in {*files, *(f.path for f in ps.files)}:
            p = tree / rel
            if p.is_file():
                data = p.read_bytes()
                p.unlink()
                p.write_bytes(data)
                os.utime(p, (now, now))
        os.replace(staging, tree / "out" / "quicsm")
        return True
    return False


def _niceness() -> str:
    """The build's ``nice`` value: ``$QUICSM_BUILD_NICE``, else 19 (it yields the machine to everything else)."""
    value = os.environ.get("QUICSM_BUILD_NICE", "19").strip()
    if not value.lstrip("-").isdigit() or not -20 <= int(value) <= 19:
        raise TestbedError(f"QUICSM_BUILD_NICE={value!r}: a nice value from -20 to 19")
    return value


def _foreign(out: Path, tree: Path) -> bool:
    """Whether ``out``'s ninja files were made for another tree (a seeded copy: gn's regeneration rule names
    its root), so gn must make them anew here (the commands are relative: the objects stay up to date)."""
    try:
        return f"--root={tree}" not in (out / "build.ninja").read_text()
    except OSError:
        return True


def gn_args(tc: Toolchain) -> str:
    """The ``args.gn`` of a build on this machine."""
    args = {**GN_ARGS, "clang_base_path": str(tc.clang_base)}
    if tc.ccache:
        args["cc_wrapper"] = tc.ccache
    lines = [f"{k} = {json.dumps(v)}" for k, v in args.items()]
    return "\n".join(lines) + "\n"


def _build_env(tc: Toolchain, shim: Path) -> dict[str, str]:
    """PATH with ``python`` = Python 2.7 first (gn's exec_script and the actions run ``python``), no .pyc files
    in the shared source, and ccache keyed by relative paths so every set's tree shares one cache."""
    shim.mkdir(parents=True, exist_ok=True)
    for name in ("python", "python2"):
        link = shim / name
        if not link.exists() or os.readlink(link) != tc.python2:
            tmp = shim / f".{name}.tmp"
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(tc.python2)
            os.replace(tmp, link)
    cache = chromium_cache()
    return {
        **os.environ,
        "PATH": f"{shim}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONDONTWRITEBYTECODE": "1",
        "CCACHE_DIR": os.environ.get("CCACHE_DIR", str(cache / "ccache")),
        "CCACHE_BASEDIR": str(cache),
        "CCACHE_NOHASHDIR": "1",
        "CCACHE_MAXSIZE": os.environ.get("CCACHE_MAXSIZE", "3G"),
    }


_STEP = re.compile(r"^\[(\d+)/(\d+)\]")


def ninja_progress(every: int = 50) -> Any:
    """A ``show`` filter for ninja's output: about ``every`` progress lines per build, and every failure line."""

    def show(line: str) -> bool:
        m = _STEP.match(line)
        if m is None:
            return "FAILED" in line or "error:" in line or line.startswith("ninja:")
        done, total = int(m.group(1)), int(m.group(2))
        return done == total or done % max(1, total // every) == 0

    return show


def _ccache_stats(tc: Toolchain, env: dict[str, str]) -> dict[str, int]:
    """ccache's hit and miss counters (to say how much of a build came from the cache)."""
    if not tc.ccache:
        return {}
    try:
        out = subprocess.run([tc.ccache, "--print-stats"], capture_output=True, text=True, env=env, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    stats = dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)
    keys = {"direct_cache_hit": "hit_direct", "preprocessed_cache_hit": "hit_preprocessed", "cache_miss": "miss"}
    return {v: int(stats[k]) for k, v in keys.items() if stats.get(k, "").isdigit()}


def _certificate(tc: Toolchain, out: Path) -> str:
    """A self-signed RSA certificate for :data:`CERT_HOST` (``server.pem``) and its key as PKCS#8 DER
    (``server.key``, what the 2017 ``ProofSourceChromium`` reads); returns the base64 SHA-256 of its SPKI."""
    key_pem = out / "server.key.pem"
    run_tool(
        [tc.openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-subj", f"/CN={CERT_HOST}",
         "-addext", f"subjectAltName=DNS:{CERT_HOST}", "-keyout", str(key_pem), "-out", str(out / "server.pem")],
        cwd=out, what="making the server certificate",
    )  # fmt: skip
    run_tool(
        [tc.openssl, "pkcs8", "-topk8", "-nocrypt", "-in", str(key_pem), "-outform", "DER", "-out", str(out / "server.key")],
        cwd=out, what="converting the server key to PKCS#8",
    )  # fmt: skip
    key_pem.unlink()
    pub = subprocess.run(
        [tc.openssl, "x509", "-in", str(out / "server.pem"), "-pubkey", "-noout"], capture_output=True, check=True
    ).stdout
    der = subprocess.run(
        [tc.openssl, "pkey", "-pubin", "-outform", "DER"], input=pub, capture_output=True, check=True
    ).stdout
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


@dataclass(frozen=True)
class ChromiumQuic:
    """A finished build: the toy server and client, the server's certificate, and how they were made."""

    dir: Path
    version: str
    patch_set: str
    cached: bool
    seconds: float
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def server(self) -> Path:
        return self.dir / "quic_server"

    @property
    def client(self) -> Path:
        return self.dir / "quic_client"

    @property
    def spki(self) -> str:
        return str(self.meta.get("spki", ""))


def build_chromium_quic(
    version: str,
    ps: PatchSet,
    *,
    source: str | None = None,
    progress: Progress | None = None,
    force: bool = False,
    jobs: int = 2,
) -> ChromiumQuic:
    """``quic_server`` and ``quic_client`` of Chromium ``version`` with ``ps`` applied, built (or from the cache).

    The build runs ``nice -n 19`` (``$QUICSM_BUILD_NICE``) with ``jobs`` ninja jobs (2: the testbed machines
    have two cores)."""
    t0 = time.monotonic()
    tc = find_toolchain()
    src, src_record = prepared_source(version, given=source, progress=progress)
    set_sha = hashlib.sha256(ps.diff_text.encode()).hexdigest()[:10]
    args = gn_args(tc)
    key = hashlib.sha256(f"{src.name}\0{set_sha}\0{args}".encode()).hexdigest()[:12]
    cache = chromium_cache()
    with cache_entry(cache / "bin", f"{version}-{ps.name}-{key}", "quic_server", force=force) as (entry, held):
        if held is not None:
            return ChromiumQuic(entry, version, ps.name, True, round(time.monotonic() - t0, 3), held)
        tree_key = hashlib.sha256(f"{src.name}\0{set_sha}".encode()).hexdigest()[:10]
        with FileLock(cache / "trees" / f".{version}-{ps.name}-{tree_key}.lock"):
            tree = _patched_tree(src, ps, tree_key, progress)
            out = tree / "out" / "quicsm"
            if not out.is_dir():
                (tree / "out").mkdir(exist_ok=True)
                _seed_out(tree, src, ps, args, progress)
            out.mkdir(parents=True, exist_ok=True)
            env = _build_env(tc, cache / "python2-shim")
            if force or not (out / "args.gn").is_file() or (out / "args.gn").read_text() != args or _foreign(out, tree):
                (out / "args.gn").write_text(args)
                run_tool(
                    [str(tree / "buildtools" / "linux64" / "gn"), "gen", "out/quicsm"],
                    cwd=tree, env=env, what="gn gen (Chromium's 2017 gn, Python 2.7)", progress=progress,
                )  # fmt: skip
            before = _ccache_stats(tc, env)
            plan = run_tool([tc.ninja, "-C", "out/quicsm", "-n", *TARGETS], cwd=tree, env=env, what="ninja -n")
            steps = len([ln for ln in plan.splitlines() if _STEP.match(ln)])
            if progress is not None:
                with_cache = f", ccache {cache / 'ccache'}" if tc.ccache else ", no ccache (apt-get install -y ccache)"
                progress(
                    f"building {' and '.join(TARGETS)} with {ps.name}: {steps} steps, nice -n {_niceness()}, -j{jobs}{with_cache}"
                )
            tb = time.monotonic()
            run_tool(
                ["nice", "-n", _niceness(), "sh", "-c", 'exec "$0" "$@" 1>&2', tc.ninja, "-C", "out/quicsm", f"-j{jobs}", *TARGETS],
                cwd=tree, env=env, what=f"building Chromium {version} ({ps.name})", progress=progress, show=ninja_progress(),
            )  # fmt: skip
            build_s = time.monotonic() - tb
            after = _ccache_stats(tc, env)
            meta: dict[str, Any] = {
                "version": version,
                "patch_set": ps.name,
                "targets": list(TARGETS),
                "gn_args": args,
                "toolchain": tc.describe(),
                "steps": steps,
                "ninja_seconds": round(build_s, 1),
                "ccache": {k: after.get(k, 0) - before.get(k, 0) for k in after},
                "tree": str(tree),
                **src_record,
            }
            with staged_entry(entry) as staging:
                for name in TARGETS:
                    shutil.copy2(out / name, staging / name)
                meta["spki"] = _certificate(tc, staging)
                meta["seconds"] = round(time.monotonic() - t0, 1)
                meta["built"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                (staging / "build.json").write_text(json.dumps(meta, indent=2))
            if progress is not None:
                progress(f"built {ps.name} in {format_duration(time.monotonic() - t0)} ({steps} steps)")
    return ChromiumQuic(entry, version, ps.name, False, round(time.monotonic() - t0, 3), meta)
