"""The C extensions under AddressSanitizer and UndefinedBehaviorSanitizer: the tests that drive them, in a copy.

    python3 -m tests.sanitize                      # build, then the C scanners' and checker's tests (~4 min)
    python3 -m tests.sanitize --keep /tmp/san -- tests/fuzz -k found   # other tests; the copy kept
    python3 -m tests.sanitize --keep /tmp/san --fuzz 1000000           # the long fuzz run, sanitized

The SIMD record scanner (_scan.c) loads 16 bytes at a time near the end of a window: a load past it is
an out-of-bounds read that the agreement tests cannot see when the bytes happen to be valid memory. The
extensions are built with -fsanitize=address,undefined into a copy of the tree (the checkout's own build
stays usable without the sanitizer runtime), and the tests run there with the runtime preloaded and
Python's allocator off (PYTHONMALLOC=malloc: every bytes object its own allocation, so a read one byte
past its end is reported). The first report aborts the run (exit status non-zero, the report on stderr).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.conftest import SHARED

REPO = Path(__file__).resolve().parents[1]

TESTS = ["tests/traces", "tests/fuzz", "tests/inference/test_check_c.py", "tests/inference/test_synoptic_replay.py"]
"""What exercises the C code: the readers (qlog and text-log scanners, the fuzzer with its found inputs and its
windows down to a few bytes) and the invariant checker's walks."""

FLAGS = "-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"

EXTENSIONS = ("quicsm/traces/_scan", "quicsm/inference/fastcheck")


def runtime() -> str:
    """LD_PRELOAD for a Python that was not linked with the sanitizers: libasan first, and libstdc++ (or
    ASan's __cxa_throw interceptor finds no real function when pyarrow throws, and aborts)."""
    libs = []
    for name in ("libasan.so", "libstdc++.so.6"):
        out = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True, check=True)
        path = out.stdout.strip()
        if not os.path.isabs(path) or not os.path.exists(path):
            raise SystemExit(f"sanitize: gcc has no {name} (apt-get install gcc: libasan comes with it)")
        libs.append(path)
    return " ".join(libs)


def build(dest: Path) -> Path:
    """A copy of the package and its tests at ``dest/repo``, its extensions built with the sanitizers."""
    repo = dest / "repo"
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    ignore = shutil.ignore_patterns("*.so", "__pycache__", "build", "target", ".mypy_cache", ".ruff_cache")
    for name in ("quicsm", "tests"):
        shutil.copytree(REPO / name, repo / name, ignore=ignore)
    for name in ("setup.py", "README.md", "pyproject.toml", "MANIFEST.in"):
        shutil.copy2(REPO / name, repo / name)
    for entry in REPO.iterdir():  # the rest (bundled traces, bench, docs, ...) only read: linked
        if not (repo / entry.name).exists() and entry.name != "build" and not entry.name.startswith("."):
            (repo / entry.name).symlink_to(entry)
    shared = dest / "shared"
    if not shared.exists() and SHARED.exists():
        shared.symlink_to(SHARED)  # ../shared beside the copy, as beside the clone
    env = {**os.environ, "CFLAGS": FLAGS, "LDFLAGS": FLAGS.split(" -fno-omit")[0]}
    subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace", "-q"],
        cwd=repo,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    for ext in EXTENSIONS:  # the extensions are optional in setup.py: a failed build must not pass unnoticed
        built = list((repo / ext).parent.glob(Path(ext).name + ".*.so"))
        if not built:
            raise SystemExit(f"sanitize: {ext}.c did not build with {FLAGS}")
        deps = subprocess.run(["ldd", str(built[0])], capture_output=True, text=True, check=True).stdout
        if "libasan" not in deps:
            raise SystemExit(f"sanitize: {built[0]} is not linked with the sanitizer runtime")
    return repo


def environment() -> dict[str, str]:
    return {
        **os.environ,
        "LD_PRELOAD": runtime(),
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1",  # CPython's interned objects would read as leaks
        "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
        "PYTHONMALLOC": "malloc",
        "QUICSM_SANITIZED": "1",
    }


def check_loaded(repo: Path, env: dict[str, str]) -> None:
    """Both extensions import from the copy, with their ABI numbers right (a stale or missing build would
    make every test run the pure-Python twins and prove nothing)."""
    probe = (
        "import warnings; warnings.simplefilter('error');"
        "from quicsm.traces import native; from quicsm.inference import checker;"
        "s = native.load('quicsm.traces._scan', native.SCAN_ABI);"
        "f = native.load('quicsm.inference.fastcheck', checker.FASTCHECK_ABI);"
        "assert s is not None and f is not None;"
        f"assert all(m.__file__.startswith({str(repo)!r}) for m in (s, f)), (s.__file__, f.__file__)"
    )
    subprocess.run([sys.executable, "-c", probe], cwd=repo, env=env, check=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tests.sanitize", description=__doc__.split("\n")[0])
    ap.add_argument("--keep", type=Path, help="build the copy here and keep it (default: a temporary folder)")
    ap.add_argument("--fuzz", type=int, metavar="INPUTS", help="run the fuzzer for this many inputs instead of tests")
    ap.add_argument("pytest_args", nargs="*", help=f"pytest arguments (default: {' '.join(TESTS)} -m 'not slow')")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="quicsm-sanitize-") as tmp:
        repo = build(args.keep or Path(tmp))
        env = environment()
        check_loaded(repo, env)
        if args.fuzz:
            cmd = [sys.executable, "-m", "tests.fuzz.run", "--inputs", str(args.fuzz), "--save", str(repo / "found")]
        else:
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-s", "-m", "not slow"]
            cmd += args.pytest_args or TESTS
        # -s: pytest's capture would swallow a sanitizer report written to fd 2 by a dying process
        return subprocess.run(cmd, cwd=repo, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
