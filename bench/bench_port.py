"""Porter at scale: port the nearest pinned patch set to every google/quiche commit that touched a CC file.

Usage:
    python bench/bench_port.py [QUICHE_GIT_DIR] [--tsv commits.tsv] [--sets DIR ...] [--limit N] [--json OUT]

QUICHE_GIT_DIR is a (bare) clone of google/quiche (the `fetch` tool puts one at
/work/.mirror/google+quiche/repo). For each commit in the reference table
(/work/shared/reference/commits_touching_cc_files.tsv) the files of the nearest pinned set of the same
algorithm (by upstream date) are materialised from `git show COMMIT:PATH` into a temp dir, and the set is
ported with `quicsm.instrumentation.porter.plan_port` (which also verifies the regenerated diff with git
apply). Baseline, same process: applying the nearest pinned set unchanged (`git apply --check`).
Prints success rate per algorithm, time per version, and every failure with its reason.

    python bench/bench_port.py --quic-go v0.33.0,v0.56.0,v0.65.0 [--build]

ports every shipped quic-go set to each module version (from the Go module cache, fetched from the Go
proxy if missing) and, with --build, compiles internal/congestion and internal/ackhandler of the result.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from quicsm.instrumentation.appliers import default_applier
from quicsm.instrumentation.detection import detect, plan_for
from quicsm.instrumentation.patchset import PatchSet, load_patch_set, shipped_patch_sets
from quicsm.instrumentation.porter import PortResult, plan_port

ALGO_OF_FILE = {
    "tcp_cubic_sender_bytes": "cubic",
    "bbr_sender": "bbr",
    "bbr2_sender": "bbr2",
    "bbr2_probe_bw": "bbr2",
    "bbr3_sender": "bbr3",
}
DEFAULT_TSV = "/work/shared/reference/commits_touching_cc_files.tsv"
DEFAULT_GIT = "/work/.mirror/google+quiche/repo"


@dataclass
class Outcome:
    commit: str
    date: str
    algorithm: str
    set_name: str
    ok: bool
    baseline_ok: bool
    era: str
    seconds: float
    baseline_seconds: float
    reason: str
    min_score: float = 0.0
    same_function: int = 0
    placements: int = 0
    moved: str = ""
    fallback: str = ""
    """When the nearest set failed: the next-nearest set that ported completely ("" if none)."""


def git(repo: str, *args: str) -> bytes:
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, check=True).stdout


QUICHE_DIRS = ("quiche/quic/core", "quic/core")
PROTO_QUIC_DIRS = ("src/net/quic",)


def tree_paths(repo: str, commit: str, dirs: tuple[str, ...] = QUICHE_DIRS) -> dict[str, str]:
    """File name -> path for the quic core files at ``commit`` (any of the layouts under ``dirs``)."""
    out = git(repo, "ls-tree", "-r", "--name-only", commit, "--", *dirs).decode()
    names: dict[str, str] = {}
    for p in out.splitlines():
        if p.count("/") <= 5 and "/test" not in p and not p.endswith("_test.cc"):
            names.setdefault(p.rsplit("/", 1)[1], p)
    return names


def materialise(repo: str, commit: str, ps: PatchSet, dest: Path, dirs: tuple[str, ...] = QUICHE_DIRS) -> str | None:
    paths = tree_paths(repo, commit, dirs)
    for f in ps.files:
        p = paths.get(f.basename)
        if p is None:
            return f"{f.basename} does not exist at {commit}"
        (dest / p).parent.mkdir(parents=True, exist_ok=True)
        (dest / p).write_bytes(git(repo, "show", f"{commit}:{p}"))
    return None


def by_distance(sets: list[PatchSet], algorithm: str, date: str, target: str = "quiche") -> list[PatchSet]:
    """Pinned sets of ``target`` and ``algorithm``, nearest upstream date first."""
    from datetime import date as d

    pool = [s for s in sets if s.algorithm == algorithm and s.target == target and s.date]
    day = d.fromisoformat(date)
    return sorted(pool, key=lambda s: (abs((d.fromisoformat(s.date) - day).days), s.name))


def nearest(sets: list[PatchSet], algorithm: str, date: str, target: str = "quiche") -> PatchSet | None:
    pool = by_distance(sets, algorithm, date, target)
    return pool[0] if pool else None


_REFERENCE: dict[str, list[tuple[str, str | None]]] = {}


_CLASS = re.compile(r"^(?:class|struct)\s+(?:[A-Z_]+\s+)?(\w+)[^;]*$")  # top-level (column-0) classes
_ACCESS = re.compile(r"^\s*(public|private|protected):")


def scopes(res: PortResult) -> list[tuple[str, str | None]]:
    """(file name, scope) per placed change: the enclosing function in a .cc file, ``Class:section`` in a
    header (the class and public/private part a declaration went to)."""
    out: list[tuple[str, str | None]] = []
    for p in res.placements:
        name = p.file.rsplit("/", 1)[-1]
        if not name.endswith(".h"):
            out.append((name, p.function))
            continue
        lines = res.pristine[p.file].decode(errors="replace").splitlines()[: p.line - 1]
        cls = next((m.group(1) for x in reversed(lines) if (m := _CLASS.match(x))), None)
        acc = next((m.group(1) for x in reversed(lines) if (m := _ACCESS.match(x))), None)
        out.append((name, f"{cls}:{acc}"))
    return out


def reference_functions(repo: str, ps: PatchSet, dirs: tuple[str, ...] = QUICHE_DIRS) -> list[tuple[str, str | None]]:
    """(file name, scope) of every change of ``ps`` at its own commit: the yardstick for whether a ported
    change landed in the same function (or class section of a header)."""
    if ps.name not in _REFERENCE:
        with tempfile.TemporaryDirectory(prefix="bench-ref-") as tmp:
            why = materialise(repo, ps.upstream.commit or "HEAD", ps, Path(tmp), dirs)
            res = plan_port(ps, tmp) if why is None else None
            _REFERENCE[ps.name] = scopes(res) if res is not None and res.ok else []
    return _REFERENCE[ps.name]


def expected_era(date: str) -> str:
    return "E" if date >= "2022-04-07" else "D"


def quiche_versions(tsv: str) -> list[tuple[tuple[str, str], str]]:
    """((commit, algorithm), date) for every commit of the reference table."""
    with open(tsv, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    versions: dict[tuple[str, str], str] = {}
    for r in rows:
        algo = ALGO_OF_FILE.get(r["file"])
        if algo:
            versions.setdefault((r["hash"], algo), r["date"])
    print(f"{len(rows)} table rows -> {len(versions)} (commit, algorithm) versions")
    return sorted(versions.items(), key=lambda kv: (kv[0][1], kv[1]))


def proto_quic_versions(repo: str) -> list[tuple[tuple[str, str], str]]:
    """((commit, algorithm), date) for every google/proto-quic commit that changed src/net/quic senders."""
    out = git(repo, "log", "--format=%h %cs", "--", "src/net/quic").decode().split("\n")
    todo = []
    for line in out:
        if not line.strip():
            continue
        commit, date = line.split()
        names = tree_paths(repo, commit, PROTO_QUIC_DIRS)
        for algo, sender in (("cubic", "tcp_cubic_sender_base.cc"), ("bbr", "bbr_sender.cc")):
            if sender in names:
                todo.append(((commit, algo), date))
    print(f"google/proto-quic: {len(todo)} (commit, algorithm) versions")
    return sorted(todo, key=lambda kv: (kv[0][1], kv[1]))


def quic_go_matrix(versions: list[str], build: bool) -> int:
    """Port every shipped quic-go set to every module version (Go module cache); with ``build``, compile the
    ported packages. Baseline, same process: the set applied unchanged (``git apply --check``)."""
    import os
    import shutil

    go_mod = Path.home() / "go/pkg/mod/github.com/quic-go"
    sets = shipped_patch_sets("quic-go")
    applier = default_applier()
    # the Go toolchain a version's own sets name (v0.33 does not build with Go >= 1.21)
    toolchains = {m["version"]: m.get("toolchain") for s in sets if (m := s.extra.get("module"))}
    rows: list[tuple[str, str, str, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-port-go-") as tmp:
        for v in versions:
            tree = Path(tmp) / f"quic-go@{v}"
            if not (go_mod / f"quic-go@{v}").is_dir():
                subprocess.run(["go", "mod", "download", f"github.com/quic-go/quic-go@{v}"], cwd=tmp, check=False)
            shutil.copytree(go_mod / f"quic-go@{v}", tree)
            subprocess.run(["chmod", "-R", "u+w", str(tree)], check=True)
            det = detect(tree)
            for ps in sets:
                base = applier.check(tree, plan_for(ps, det.located).diff).ok
                t0 = time.perf_counter()
                res = plan_port(ps, tree, applier=applier)
                dt = time.perf_counter() - t0
                if not res.ok:
                    why = f"refused ({res.failures[0].reason[:70]})"
                    rows.append((v, ps.name, why + ("" if base else "; unchanged set does not apply"), dt))
                    continue
                outcome = "ported"
                if build:
                    work = Path(tmp) / "work"
                    shutil.rmtree(work, ignore_errors=True)
                    shutil.copytree(tree, work)
                    for rel, data in res.placed.items():
                        (work / rel).write_bytes(data)
                    toolchain = toolchains.get(v)
                    env = dict(os.environ, GOFLAGS="-mod=mod", **({"GOTOOLCHAIN": toolchain} if toolchain else {}))
                    b = subprocess.run(
                        ["go", "build", "./internal/congestion/", "./internal/ackhandler/"],
                        cwd=work,
                        env=env,
                        capture_output=True,
                        text=True,
                        check=False,
                    )
                    outcome += ", builds" if b.returncode == 0 else f", BUILD FAILS: {b.stderr.strip()[-120:]}"
                rows.append((v, ps.name, outcome + ("" if base else "; unchanged set does not apply"), dt))
            shutil.rmtree(tree)
    for v, name, outcome, dt in rows:
        print(f"{v:9} {name:24} {dt:5.2f}s {outcome}")
    ported = [r for r in rows if r[2].startswith("ported")]
    built = [r for r in ported if "builds" in r[2]]
    print(
        f"{len(rows)} ports: {len(ported)} ported"
        + (f" ({len(built)} build)" if build else "")
        + f", {len(rows) - len(ported)} refused; baseline (unchanged set applies): "
        f"{sum('does not apply' not in r[2] for r in rows)}/{len(rows)}"
    )
    return 0 if not build or len(built) == len(ported) else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("git_dir", nargs="?", default=DEFAULT_GIT)
    ap.add_argument("--tsv", default=DEFAULT_TSV)
    ap.add_argument(
        "--proto-quic",
        action="store_true",
        help="GIT_DIR is google/proto-quic: port the chromium sets over its Chromium snapshots",
    )
    ap.add_argument("--sets", nargs="*", default=[], help="extra patch set directories (default: shipped sets)")
    ap.add_argument("--no-shipped", action="store_true", help="use only --sets")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--json", help="write every outcome here")
    ap.add_argument("--quic-go", metavar="V1,V2,...", help="port the quic-go sets to these module versions instead")
    ap.add_argument("--build", action="store_true", help="with --quic-go: go build the ported packages")
    args = ap.parse_args(argv)
    if args.quic_go:
        return quic_go_matrix(args.quic_go.split(","), args.build)

    target = "chromium" if args.proto_quic else "quiche"
    dirs = PROTO_QUIC_DIRS if args.proto_quic else QUICHE_DIRS
    sets = [] if args.no_shipped else list(shipped_patch_sets(target))
    sets += [load_patch_set(p) for p in args.sets]
    if not sets:
        print(f"no patch sets (ship some in quicsm/patches/{target} or pass --sets)", file=sys.stderr)
        return 2
    print(f"pinned sets: {', '.join(f'{s.name} ({s.algorithm}, {s.date})' for s in sets)}")
    todo = proto_quic_versions(args.git_dir) if args.proto_quic else quiche_versions(args.tsv)
    if args.limit:
        todo = todo[: args.limit]
    applier = default_applier()
    outcomes: list[Outcome] = []
    for (commit, algo), date in todo:
        ps = nearest(sets, algo, date, target)
        if ps is None:
            outcomes.append(Outcome(commit, date, algo, "-", False, False, "?", 0, 0, f"no pinned {algo} set"))
            continue
        with tempfile.TemporaryDirectory(prefix="bench-port-") as tmp:
            root = Path(tmp)
            why = materialise(args.git_dir, commit, ps, root, dirs)
            if why:
                outcomes.append(Outcome(commit, date, algo, ps.name, False, False, "?", 0, 0, why))
                continue
            t0 = time.perf_counter()
            det = detect(root, sets=[ps], applier=applier, target=target)
            base_ok = applier.check(det.root, plan_for(ps, det.located).diff).ok
            t1 = time.perf_counter()
            res = plan_port(ps, root, applier=applier, detection=det)
            t2 = time.perf_counter()
            reason = "; ".join(f"{f.file.rsplit('/', 1)[-1]} hunk {f.hunk}: {f.reason}" for f in res.failures)
            ref = reference_functions(args.git_dir, ps, dirs)
            got = scopes(res)
            same = sum(a == b for a, b in zip(ref, got)) if res.ok and len(ref) == len(got) else 0
            moved = "; ".join(f"{a[0]}: {a[1]} -> {b[1]}" for a, b in zip(ref, got) if a != b) if res.ok else ""
            fallback = ""
            if not res.ok:  # what a user gets from `quicsm patch port SRC -a ALGO` (tries the next sets)
                for other in by_distance(sets, algo, date, target)[1:]:
                    with tempfile.TemporaryDirectory(prefix="bench-port-fb-") as tmp2:
                        if (
                            materialise(args.git_dir, commit, other, Path(tmp2), dirs) is None
                            and plan_port(other, tmp2, applier=applier).ok
                        ):
                            fallback = other.name
                            break
            outcomes.append(
                Outcome(
                    commit,
                    date,
                    algo,
                    ps.name,
                    res.ok,
                    base_ok,
                    det.identity.era,
                    t2 - t1,
                    t1 - t0,
                    reason,
                    min((p.score for p in res.placements), default=0.0),
                    same,
                    len(got) if res.ok else 0,
                    moved,
                    fallback,
                )
            )
        o = outcomes[-1]
        print(
            f"  {o.date} {o.commit} {o.algorithm:5} from {o.set_name:28} {'ok  ' if o.ok else 'FAIL'} "
            f"era {o.era} {o.seconds:5.2f}s{'' if o.ok else '  ' + o.reason[:150]}",
            flush=True,
        )

    print("\nper algorithm: ported ok / versions (baseline = nearest set applied unchanged)")
    by: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by[o.algorithm].append(o)
    for algo in sorted(by):
        os_ = by[algo]
        ok = sum(o.ok for o in os_)
        base = sum(o.baseline_ok for o in os_)
        print(
            f"  {algo:6} {ok:4}/{len(os_):<4} {ok / len(os_):6.1%}   baseline {base:4}/{len(os_)} "
            f"{base / len(os_):6.1%}"
        )
    total = len(outcomes)
    ok = sum(o.ok for o in outcomes)
    base = sum(o.baseline_ok for o in outcomes)
    print(
        f"  {'all':6} {ok:4}/{total:<4} {ok / total:6.1%}   baseline {base:4}/{total} {base / total:6.1%}"
        f"   ratio {ok / max(base, 1):.2f}x"
    )
    fb = sum(o.ok or bool(o.fallback) for o in outcomes)
    print(f"  with fallback to the next-nearest pinned set: {fb}/{total} {fb / total:.1%}")
    times = [o.seconds for o in outcomes if o.seconds]
    if times:
        print(
            f"time per version (port incl. verification): median {statistics.median(times):.3f}s, "
            f"max {max(times):.3f}s, total {sum(times):.1f}s; baseline check median "
            f"{statistics.median([o.baseline_seconds for o in outcomes if o.baseline_seconds]):.3f}s"
        )
    mins = sorted(o.min_score for o in outcomes if o.ok)
    if mins:
        print(
            f"weakest placement per ported version: min {mins[0]:.2f}, 5th percentile "
            f"{mins[len(mins) // 20]:.2f}, median {statistics.median(mins):.2f}"
        )
    n_pl = sum(o.placements for o in outcomes)
    n_same = sum(o.same_function for o in outcomes)
    if n_pl:
        print(
            f"ported changes in the same function (header: class and access section) as in the pinned set: "
            f"{n_same}/{n_pl} ({n_same / n_pl:.1%})"
        )
        for o in outcomes:
            if o.moved:
                print(f"  moved: {o.date} {o.commit} {o.algorithm}: {o.moved}")
    if not args.proto_quic:
        era_ok = sum(o.era == expected_era(o.date) for o in outcomes if o.era != "?")
        print(f"era detected from content matches the commit date: {era_ok}/{sum(o.era != '?' for o in outcomes)}")
    fails = [o for o in outcomes if not o.ok]
    if fails:
        print(f"\nfailures ({len(fails)}):")
        for o in fails:
            print(
                f"  {o.date} {o.commit} {o.algorithm} from {o.set_name}: {o.reason}"
                + (f"  [ports from {o.fallback}]" if o.fallback else "  [no pinned set ports]")
            )
    if args.json:
        Path(args.json).write_text(json.dumps([o.__dict__ for o in outcomes], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
