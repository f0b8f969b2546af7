"""Versions no set was shipped for, end to end, as a user runs them: fetch -> instrument -> build -> one run.

For each (version, controller), with the CLI (whole processes, start-up included):

1. fetch:      ``quicsm patch fetch STACK V DIR``
2. instrument: ``quicsm patch apply DIR --port -a CC`` (the engine picks or ports a set for the tree),
               then ``quicsm patch status`` must say ``tree patched`` and ``revert`` must bring it back
3. build:      ``quicsm testbed build --stack S --version V --cc CC`` (the testbed picks the shipped set or
               ports one, builds server and client; ``cold`` when it compiled a toolchain's first build)
4. run:        ``quicsm testbed run --stack S --stack-version V --cc CC --runs 1`` through the emulator
               (50 Mbit/s, 36 ms RTT, 1 % loss, 2 MB), under ``flock /tmp/quicsm-testbed.lock`` (taken
               here, for the run only), then the run's server.log must parse into contract lines with at
               least two states, all of them among the set's states.

The baseline, measured the same way in the same process first, is the newest shipped version of the
stack; each row's time (build excluded when it was a cold build) is given as a ratio to it. Needs root
(namespaces), Go, and for quiche cargo and libclang.

    python bench/bench_versions.py --stack quic-go                      # every served version not shipped
    python bench/bench_versions.py --stack quiche --versions 0.28.0,0.29.3 --cc bbr2
    python bench/bench_versions.py --stack quic-go --json out.json --markdown out.md
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

LOCK = "/tmp/quicsm-testbed.lock"
RUN_ARGS = ["--rate", "50", "--delay", "36", "--loss", "1%", "--size", "2MB", "--runs", "1", "--timeout", "60"]


@dataclass
class Row:
    stack: str
    version: str
    cc: str
    ok: bool = False
    stage: str = ""
    """The stage that failed (empty when all passed)."""
    error: str = ""
    patch_set: str = ""
    how: str = ""
    fetch_s: float = 0.0
    instrument_s: float = 0.0
    build_s: float = 0.0
    cold: bool = False
    cached: bool = False
    """The build came from the testbed's cache (an earlier build of the same version, set and sources)."""
    run_s: float = 0.0
    lines: int = 0
    states: list[str] = field(default_factory=list)
    late: bool = False
    """The run completed with the emulator late (the machine too busy for the path's timing): its contract
    lines are still checked, its timing is not a measurement."""
    group: str = ""
    """The Go toolchain a quic-go build used (its first build in a run compiles the standard library)."""

    @property
    def total_s(self) -> float:
        return self.fetch_s + self.instrument_s + self.build_s + self.run_s

    @property
    def steps_s(self) -> float:
        """Everything but the build (which the cache may have held for one row and not for another)."""
        return self.fetch_s + self.instrument_s + self.run_s

    @property
    def warm_s(self) -> float:
        """Time without a cold build (what the goal counts)."""
        return self.total_s - (self.build_s if self.cold else 0.0)


def quicsm(*args: str, lock: bool = False) -> tuple[int, str, float]:
    """Run the quicsm CLI as a user would; (exit status, output, seconds)."""
    argv = [sys.executable, "-m", "quicsm", *args]
    t0 = time.perf_counter()
    if lock:
        with open(LOCK, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            t0 = time.perf_counter()  # waiting for another agent's experiment is not our time
            proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    else:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - t0


def quic_go_versions() -> list[str]:
    """Every version the Go module proxy lists for quic-go."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    out = subprocess.run(
        [go, "list", "-m", "-versions", "github.com/quic-go/quic-go"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tempfile.gettempdir(),
        env={**os.environ, "GOFLAGS": "", "GOTOOLCHAIN": "local"},
    ).stdout.split()
    return out[1:]


def quiche_versions(since: tuple[int, int] = (0, 20)) -> list[str]:
    """Every version of quiche in cargo's index cache (filled by any cargo fetch of quiche), not yanked,
    from 0.20 on."""
    home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    found: list[str] = []
    for cache in home.glob("registry/index/*/.cache/qu/ic/quiche"):
        for chunk in cache.read_bytes().split(b"\0"):
            if chunk.strip().startswith(b"{"):
                try:
                    entry = json.loads(chunk)
                except ValueError:
                    continue
                v = str(entry.get("vers", ""))
                if not entry.get("yanked") and re.fullmatch(r"\d+\.\d+\.\d+", v):
                    found.append(v)
    key = lambda v: tuple(int(x) for x in v.split("."))  # noqa: E731
    return sorted({v for v in found if key(v)[:2] >= since}, key=key)


def shipped(stack: str) -> set[str]:
    from quicsm.testbed import stacks

    return set(stacks.get(stack).versions())


def one(stack: str, version: str, cc: str, work: Path, force: bool = False) -> Row:
    from quicsm.traces import parse_inputs

    row = Row(stack, version, cc)
    tree = work / f"{stack}-{version}-{cc}"
    code, out, row.fetch_s = quicsm("patch", "fetch", stack, version, str(tree))
    if code:
        row.stage, row.error = "fetch", out.strip().splitlines()[-1]
        return row
    t = 0.0
    code, out, dt = quicsm("patch", "apply", str(tree), "--port", "-a", cc)
    t += dt
    if code == 0:
        code2, status, dt = quicsm("patch", "status", str(tree))
        t += dt
        if code2 or "tree patched" not in status:
            code, out = 1, status
    if code == 0:
        code, out, dt = quicsm("patch", "revert", str(tree))
        t += dt
    row.instrument_s = t
    if code:
        row.stage, row.error = "instrument", " ".join(out.split())[-400:]
        return row
    build = ["testbed", "build", "--stack", stack, "--version", version, "--cc", cc] + (["--force"] if force else [])
    code, out, row.build_s = quicsm(*build)
    row.cached = bool(re.search(r": cached; server ", out))
    m = re.search(r"patch set: (\S+) ", out)
    if m:
        row.patch_set, row.how = m.group(1), "ported"
    toolchain = re.search(r"\bwith (go[\d.]+), tags", out)
    row.group = toolchain.group(1) if toolchain else ""
    row.cold = "BoringSSL is compiled" in out  # quic-go: the first build per Go toolchain, decided in main()
    if code:
        row.stage, row.error = "build", " ".join(out.split())[-400:]
        return row
    out_dir = work / "runs" / f"{stack}-{version}-{cc}"
    code, out, row.run_s = quicsm(
        "testbed", "run", "--stack", stack, "--stack-version", version, "--cc", cc, *RUN_ARGS, "--out", str(out_dir),
        lock=True,
    )  # fmt: skip
    row.late = "emulator was late" in out or "with the emulator late" in out
    if code and not row.late:
        row.stage, row.error = "run", " ".join(out.split())[-400:]
        return row
    logs = sorted(out_dir.glob("run-*/server.log"))
    meta = json.loads((logs[-1].parent / "meta.json").read_text()) if logs else {}
    choice = (meta.get("build") or {}).get("patch_set_choice") or {}
    row.patch_set, row.how = choice.get("name", row.patch_set), choice.get("how", row.how)
    parsed = parse_inputs([str(p) for p in logs])
    main = max(parsed.traces, key=lambda t: len(t.events), default=None)
    row.lines = sum(len(t.events) for t in parsed.traces)
    row.states = sorted({s for t in parsed.traces for s in t.states()})
    allowed = _set_states(meta)
    if main is None or len(set(main.states())) < 2 or (allowed and not set(row.states) <= allowed):
        row.stage, row.error = "check", f"states {row.states} (set: {sorted(allowed)})"
        return row
    row.ok = True
    return row


def _set_states(meta: dict) -> set[str]:
    from quicsm.instrumentation.patchset import find_patch_set

    origin = ((meta.get("build") or {}).get("patch_set_choice") or {}).get("origin", "")
    name = (meta.get("versions") or {}).get("patch_set")
    try:
        ps = find_patch_set(origin if origin and not origin.startswith("shipped:") else str(name))
    except Exception:
        return set()
    return set(ps.states)


def markdown(rows: list[Row], base: Row | None) -> str:
    out = [
        "| stack | version | cc | result | patch set (how) | fetch s | instrument s | build s | run s | total s "
        "| fetch+instrument+run vs baseline | contract lines | states |",
        "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in ([base] if base else []) + rows:
        assert r is not None
        ratio = f"{r.steps_s / base.steps_s:.2f}x" if base and base.ok and r.ok and r is not base else "baseline"
        res = ("ok (emulator late)" if r.late else "ok") if r.ok else f"FAILED at {r.stage}: {r.error[:160]}"
        build = f"{r.build_s:.0f}" + (" (cold)" if r.cold else " (cached)" if r.cached else "")
        out.append(
            f"| {r.stack} | {r.version} | {r.cc} | {res} | {r.patch_set} ({r.how}) | {r.fetch_s:.1f} | "
            f"{r.instrument_s:.1f} | {build} | {r.run_s:.1f} | {r.total_s:.0f} | {ratio if r.ok else '-'} | "
            f"{r.lines} | {', '.join(r.states)} |"
        )
    ok = [r for r in rows if r.ok]
    if rows:
        slow = [r for r in ok if r.warm_s > 120]
        out.append("")
        out.append(
            f"{len(ok)}/{len(rows)} ok; {len(ok) - len(slow)}/{len(rows)} in under 2 minutes without a cold build; "
            f"load average at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stack", choices=["quic-go", "quiche"], default="quic-go")
    ap.add_argument("--versions", help="comma-separated; default: every registry version not shipped")
    ap.add_argument("--cc", action="append", help="controller (repeatable; default: every one of the stack)")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument(
        "--force", action="store_true", help="rebuild what the testbed's cache holds (testbed build --force)"
    )
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--markdown", help="write the table here")
    ap.add_argument("--work", help="keep trees and runs here (default: a temporary directory)")
    args = ap.parse_args(argv)
    from quicsm.testbed import stacks

    st = stacks.get(args.stack)
    have = shipped(args.stack)
    if args.versions:
        versions = [st.normalize_version(v) for v in args.versions.split(",")]
    else:
        served = quic_go_versions() if args.stack == "quic-go" else quiche_versions()
        versions = [v for v in served if v not in have]
    ccs = args.cc or list(st.ccs)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="bench-versions-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"{args.stack}: {len(versions)} versions x {len(ccs)} controllers, work in {work}", file=sys.stderr)
    base = None
    if not args.no_baseline:
        newest = sorted(have, key=lambda v: tuple(int(x) for x in re.findall(r"\d+", v)))[-1]
        base = one(args.stack, newest, ccs[0], work / "baseline", args.force)
        print(f"baseline {newest} {ccs[0]}: {'ok' if base.ok else base.error} in {base.total_s:.0f} s", file=sys.stderr)
    rows: list[Row] = []
    seen_groups = {base.group} if base else set()
    for v in versions:
        for cc in ccs:
            if args.stack == "quiche" and cc == "bbr2" and tuple(int(x) for x in v.split(".")) < (0, 23, 6):
                # gcongestion's BBRv2 (what the sets instrument) is in quiche from 0.23.6; `testbed run` says so
                print(f"quiche {v} bbr2: not run (no src/recovery/gcongestion/bbr2.rs before 0.23.6)", file=sys.stderr)
                continue
            r = one(args.stack, v, cc, work, args.force)
            if r.group and r.group not in seen_groups:
                r.cold = True
            seen_groups.add(r.group)
            rows.append(r)
            what = "ok" if r.ok else f"FAILED at {r.stage}: {r.error[:200]}"
            print(f"{args.stack} {v} {cc}: {what} ({r.total_s:.0f} s, {r.patch_set})", file=sys.stderr)
            if args.json:
                Path(args.json).write_text(
                    json.dumps([asdict(x) for x in ([base] if base else []) + rows], indent=1) + "\n"
                )
    table = markdown(rows, base)
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table + "\n")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
