"""The porter on quinn-proto: every shipped ``quinn`` set ported to every crate version given.

    python bench/bench_port_quinn.py 0.8.0,0.9.6,0.10.6,0.11.3,0.11.11,0.11.17 [--check]

Crate sources come from cargo's registry (``~/.cargo/registry/src`` or the downloaded ``.crate`` in
``~/.cargo/registry/cache``; ``cargo fetch`` of a throw-away manifest fetches one that is missing). For each
(version, set): the porter (``plan_port``, which also checks the regenerated diff with git apply), and as
the baseline in the same process the unchanged set (``git apply --check``). With ``--check`` the ported
crate is compiled (``cargo check --lib --no-default-features``, else with default features, in a copy of the crate root
with the placed files), so a port that places every change but breaks the Rust is counted as a failure.
Prints one row per (version, set) and the success rates, split into versions shipped and not shipped.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from quicsm.instrumentation.appliers import default_applier
from quicsm.instrumentation.patchset import shipped_patch_sets
from quicsm.instrumentation.porter import plan_port

CARGO_HOME = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))


def crate_source(version: str, work: Path) -> Path:
    """quinn-proto ``version`` unpacked under ``work`` (registry src, cached .crate, or cargo fetch)."""
    dest = work / f"quinn-proto-{version}"
    for pattern in ("registry/src/*/quinn-proto-{v}", "registry/cache/*/quinn-proto-{v}.crate"):
        hits = glob.glob(str(CARGO_HOME / pattern.format(v=version)))
        if hits and hits[0].endswith(".crate"):
            with tarfile.open(hits[0]) as tar:
                tar.extractall(work, filter="data")
            return dest
        if hits:
            shutil.copytree(hits[0], dest)
            return dest
    fetch = work / "fetch"
    (fetch / "src").mkdir(parents=True)
    (fetch / "src/main.rs").write_text("fn main() {}\n")
    (fetch / "Cargo.toml").write_text(
        f'[package]\nname = "f"\nversion = "0.0.0"\nedition = "2021"\n\n'
        f'[dependencies]\nquinn-proto = {{ version = "={version}", default-features = false }}\n'
    )
    subprocess.run(["cargo", "fetch", "-q"], cwd=fetch, check=True)
    return crate_source(version, work)


def cargo_check(tree: Path, placed: dict[str, bytes], work: Path) -> str:
    """Compile the crate with the placed files: ``builds`` or the first error line."""
    copy = work / "check"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(tree, copy)
    for rel, data in placed.items():
        (copy / rel).chmod(0o644)
        (copy / rel).write_bytes(data)
    env = {**os.environ, "CARGO_TARGET_DIR": str(work / "target")}
    for features in (["--no-default-features"], []):  # the controller needs no TLS; old versions need defaults
        proc = subprocess.run(
            ["cargo", "check", "--lib", "-q", *features], cwd=copy, env=env, capture_output=True, text=True
        )
        if proc.returncode == 0:
            return "builds"
    err = next((ln for ln in proc.stderr.splitlines() if ln.startswith("error")), proc.stderr.strip()[-120:])
    return f"BUILD FAILS: {err[:120]}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("versions", help="comma-separated quinn-proto versions")
    ap.add_argument("--check", action="store_true", help="cargo check the ported crate")
    args = ap.parse_args()
    sets = shipped_patch_sets("quinn")
    shipped = {ps.extra.get("crate", {}).get("version") for ps in sets}
    applier = default_applier()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-port-quinn-") as tmp:
        work = Path(tmp)
        for v in args.versions.split(","):
            tree = crate_source(v.strip(), work)
            for ps in sets:
                base = applier.check(tree, ps.diff_text).ok
                t0 = time.perf_counter()
                res = plan_port(ps, tree, applier=applier)
                dt = time.perf_counter() - t0
                if not res.ok:
                    outcome = f"refused ({res.failures[0].reason[:70]})"
                else:
                    outcome = "ported"
                    if args.check:
                        outcome += ", " + cargo_check(tree, res.placed, work)
                ok = res.ok and "FAILS" not in outcome
                rows.append((v, ps.name, ok, base, outcome, dt, v in shipped))
                print(f"{v:8} {ps.name:20} {outcome}{'' if base else '; unchanged set does not apply'} ({dt:.2f} s)")
            shutil.rmtree(tree)
    for label, pick in (("versions not shipped", False), ("versions shipped", True)):
        sel = [r for r in rows if r[6] == pick]
        if sel:
            print(
                f"{label}: {sum(r[2] for r in sel)}/{len(sel)} ported"
                f"{' and compiled' if args.check else ''}, unchanged set applies {sum(r[3] for r in sel)}/{len(sel)}"
            )
    sys.exit(0)


if __name__ == "__main__":
    main()
