"""Golden outputs of quicsm: what a user sees, from one tree's code, to compare two trees byte for byte.

A refactoring that must not change any output (issue 32 item 7) is checked by running the same commands with
each tree's ``quicsm`` (``PYTHONPATH=TREE python3 -m quicsm ...``) on the same inputs, then comparing::

    python3 scripts/golden.py run /tmp/base /tmp/golden-base     # base tree (its C extensions built)
    python3 scripts/golden.py run . /tmp/golden-new              # this tree
    python3 scripts/golden.py diff /tmp/golden-base /tmp/golden-new

Every case runs in its own directory with the inputs reached through a link ``data`` (the data tree, this
checkout unless ``--data``), so paths in outputs are the same whichever tree runs. A case keeps its exit
status, stdout, stderr and every file it wrote. Cases: ``--help`` of every command and subcommand (the lazy
groups walked); ``infer`` with each engine and ``diagram`` (SVG and JSON) on every bundled set; ``render``,
``export`` and ``parse``; ``compare`` (text, JSON, CSV, Markdown, HTML, diagrams, heatmap) on two-set,
three-set, multi-flow (fairness) and rate-schedule sets; ``baseline`` and ``check``; the ``patch`` verbs on
copies of the quic-go sources in the Go module cache; ``testbed matrix --dry-run`` and ``grid run
--dry-run`` on every experiment file; ``grid report`` on a grid made with the tests' fake testbed.
``diff`` compares with only timing fields normalised (:data:`TIMING`).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GO_MOD = Path.home() / "go/pkg/mod/github.com/quic-go"
ENGINES = ("dfg", "ktails", "synoptic")
TIMING = re.compile(
    rb'("(?:\w*_seconds|elapsed|elapsed_s|seconds|wall_s|cpu_s|took_s|duration_s|generated|created|started|'
    rb'finished|date|at|built)":\s*)("[^"]*"|[0-9.eE+-]+)'
    rb"|()\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?"
)
"""Timing fields and phrases: the only bytes ``diff`` normalises."""

Case = tuple[str, list[str], str]  # (name, quicsm arguments, what to copy in first: "" or "quic-go@vX")


def _env(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUICSM_")}
    env.update(PYTHONPATH=str(tree), COLUMNS="100", LC_ALL="C.UTF-8", PYTHONHASHSEED="0", TZ="UTC")
    return env


def _sets(data: Path) -> list[str]:
    """Every bundled set, relative to ``data``: a directory holding logs, qlogs or stores, or run directories
    that do (the outermost such directory)."""

    def inputs(d: Path) -> bool:
        return any(p.is_file() and p.suffix in (".gz", ".sqlog", ".qlog", ".parquet") for p in d.iterdir())

    out: list[str] = []

    def walk(d: Path) -> None:
        kids = sorted(p for p in d.iterdir() if p.is_dir())
        if inputs(d) or any(inputs(k) or (k / "meta.json").is_file() for k in kids):
            out.append(str(d.relative_to(data)))
            return
        for k in kids:
            walk(k)

    walk(data / "traces")
    for d in sorted((data / "tests/data").iterdir()):
        if d.is_dir() and d.name != "synoptic":  # synoptic/: recorded runs of the jar, not traces
            walk(d)
    return out


def _commands(tree: Path) -> list[list[str]]:
    """Paths of every command and subcommand, lazy groups loaded."""
    walk = (
        "import click, json\n"
        "from quicsm.cli.main import cli\n"
        "def walk(cmd, path, ctx):\n"
        "    yield path\n"
        "    if isinstance(cmd, click.Group):\n"
        "        for n in cmd.list_commands(ctx):\n"
        "            sub = cmd.get_command(ctx, n)\n"
        "            yield from walk(sub, path + [n], click.Context(sub, info_name=n, parent=ctx))\n"
        "print(json.dumps(list(walk(cli, [], click.Context(cli, info_name='quicsm')))))\n"
    )
    res = subprocess.run([sys.executable, "-c", walk], env=_env(tree), capture_output=True, text=True, check=True)
    return json.loads(res.stdout)


def cases(tree: Path, data: Path) -> list[Case]:
    out: list[Case] = []
    for path in _commands(tree):
        out.append(("help-" + "-".join(path or ["quicsm"]), [*path, "--help"], ""))
    d = "data/"
    for s in _sets(data):
        tag = s.replace("/", "_")
        for e in ENGINES:
            out.append((f"infer-{e}-{tag}", ["infer", d + s, "--engine", e, "-o", "model.json"], ""))
        out.append((f"diagram-{tag}", ["diagram", d + s, "-o", "d.svg", "--json", "d.json"], ""))
    fig13 = [d + "traces/fig13/desktop", d + "traces/fig13/mobile"]
    out += [
        ("infer-text", ["infer", fig13[0], "--format", "text", "-o", "m.txt"], ""),
        ("infer-graphml", ["infer", fig13[0], "-o", "m.graphml", "--report", "r.json"], ""),
        ("infer-k3", ["infer", fig13[1], "--engine", "ktails", "-k", "3", "--no-phases", "-o", "m.json"], ""),
        ("infer-where", ["infer", d + "traces/fig13", "--where", "profile=mobile", "-o", "m.json"], ""),
        ("infer-bad-engine", ["infer", fig13[0], "--engine", "foo"], ""),
        ("infer-missing", ["infer", d + "traces/nonexistent.log"], ""),
        ("render", ["render", d + "traces/fig13/desktop", "-o", "r.svg"], ""),
        ("diagram-dot", ["diagram", fig13[1], "--engine", "dfg", "--min-prob", "0.05", "-o", "d.dot"], ""),
        ("export", ["export", fig13[0], "-o", "exp"], ""),
        ("parse-jsonl", ["parse", *fig13, "-o", "t.jsonl"], ""),
        ("parse-parquet", ["parse", *fig13, "-o", "t.parquet"], ""),
        ("parse-qlog", ["parse", d + "tests/data/qlog", "-o", "t.jsonl"], ""),
    ]
    for name, sets in (
        ("fig13", fig13),
        ("chromium", [d + f"traces/chromium-compare/{s}" for s in ("chromium", "quic-go", "quiche")]),
        ("table4", [d + "traces/table4/quicgo-tcp1", d + "traces/table4/quicgo-tcp2"]),
        ("fig11", [d + "traces/quiche-bbr2-fig11/bbr2-varying", d + "traces/quiche-bbr2-fig11/cubic-varying"]),
        ("bbrlong", [d + "traces/bbr-long/quinn-60s", d + "traces/bbr-long/quiche-60s"]),
    ):
        out.append((f"compare-{name}-json", ["compare", *sets, "--format", "json", "-o", "c.json"], ""))
        out.append((f"compare-{name}-html", ["compare", *sets, "-q", "--html", "c.html", "--heatmap", "h.svg"], ""))
    out += [
        ("compare-fig13-text", ["compare", *fig13], ""),
        ("compare-fig13-md", ["compare", *fig13, "--format", "markdown", "--test", "mwu", "--edge-test", "z"], ""),
        ("compare-fig13-csv", ["compare", *fig13, "--format", "csv", "--engine", "dfg", "--bootstrap", "50"], ""),
        ("compare-fig13-diagrams", ["compare", *fig13, "-q", "--diagram", "s.svg", "--diff-diagram", "x.svg"], ""),
        ("compare-by", ["compare", d + "traces/fig13", "--by", "profile", "--format", "json", "-o", "c.json"], ""),
        ("compare-where", ["compare", d + "traces/fig13", "--where", "profile=desktop", "--vs", "profile=mobile"], ""),
        ("compare-table4-one", ["compare", d + "traces/table4/quicgo-tcp1", "--html", "f.html"], ""),
        ("compare-bad-engine", ["compare", *fig13, "--engine", "foo"], ""),
    ]
    chk = d + "traces/check/"
    save = ["baseline", "save", chk + "cubic-a", "-o", "base.qsb"]
    out += [
        ("baseline-save", save, ""),
        ("baseline-by", ["baseline", "save", d + "traces/check/calibration", "--by", "scenario", "-o", "b.qsb"], ""),
    ]
    for new in ("cubic-b", "cubic-loss", "inject-a"):
        argv = ["check", "base.qsb", chk + new, "--format", "json", "-o", "c.json", "--junit", "c.xml"]
        out.append((f"check-{new}", ["@", *save, "--", *argv, "--markdown", "c.md", "--html", "c.html"], ""))
    out.append(("check-show", ["@", *save, "--", "baseline", "show", "base.qsb"], ""))
    out.append(("check-text", ["@", *save, "--", "check", "base.qsb", chk + "cubic-b", chk + "reno-b"], ""))
    out.append(("patch-list", ["patch", "list"], ""))
    for v in ("v0.33.0", "v0.43.1", "v0.52.0", "v0.65.0"):
        src = f"quic-go@{v}"
        out.append((f"patch-detect-{v}", ["patch", "detect", "src"], src))
        out.append((f"patch-check-{v}", ["patch", "check", "src"], src))
    seq = ["patch", "apply", "src", "--", "patch", "status", "src", "--", "patch", "revert", "src"]
    out.append(("patch-apply-revert", ["@", *seq, "--", "patch", "status", "src"], "quic-go@v0.65.0"))
    out.append(
        (
            "patch-apply-reno",
            ["@", "patch", "apply", "src", "-a", "reno", "--", "patch", "status", "src"],
            "quic-go@v0.52.0",
        )
    )
    port = ["patch", "port", "src", "--from", "quic-go-v0.52.0-reno", "--name", "golden-port", "-o", "set"]
    out.append(("patch-port", port, "quic-go@v0.65.0"))
    out.append(
        ("patch-port-dry", ["patch", "port", "src", "--from", "quic-go-v0.43.1-cubic", "--dry-run"], "quic-go@v0.52.0")
    )
    for f in sorted((data / "experiments").glob("*.toml")):
        out.append((f"matrix-{f.stem}", ["testbed", "matrix", d + f"experiments/{f.name}", "--dry-run"], ""))
        out.append((f"gridrun-{f.stem}", ["grid", "run", d + f"experiments/{f.name}", "--out", "g", "--dry-run"], ""))
    out.append(("grid-report", ["grid", "report", "grid", "-o", "rep"], "grid"))
    out.append(
        (
            "grid-report-opts",
            ["grid", "report", "grid", "-o", "rep", "--no-diagrams", "--metric", "plt", "--timeline", "rate=10"],
            "grid",
        )
    )
    return out


GRID = """
import sys, numpy as np
from pathlib import Path
from grid_fixtures import FakeTestbed
from quicsm.grids.execute import run_grid
from quicsm.grids.spec import grid_from_data
rng = np.random.default_rng(5)
def plt(cfg, r):
    return float(rng.normal(1000 * (1.5 if cfg.name == "mobile" and cfg.rate_mbps == 50 else 1.0), 20))
data = {"name": "golden", "description": "fake page-load times over real fig13 logs", "runs": 4,
        "axes": {"rate": [10, 50]}, "arms": {"desktop": {"cc": "reno"}, "mobile": {"cc": "reno", "cpu_quota": "10%"}},
        "report": {"timelines": [{"rate": 50}]}}
tb = FakeTestbed(plt, mobile_arm="mobile")
run_grid(grid_from_data(data), Path(sys.argv[1]), build=tb.build, run=tb.run)
"""


def _prepare(what: str, where: Path, tree: Path, data: Path) -> None:
    if what.startswith("quic-go@"):
        shutil.copytree(GO_MOD / what, where / "src")
        for p in [where / "src", *(where / "src").rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)
    elif what == "grid":
        env = _env(tree)
        env["PYTHONPATH"] += os.pathsep + str(data / "tests/grids")
        subprocess.run([sys.executable, "-c", GRID, str(where / "grid")], env=env, check=True, capture_output=True)


def run_case(case: Case, tree: Path, data: Path, out: Path) -> str:
    name, argv, prep = case
    where = out / "cases" / name
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    (where / "data").symlink_to(data)
    if prep:
        _prepare(prep, where, tree, data)
    steps = [argv]
    if argv and argv[0] == "@":
        steps, cur = [], []
        for a in argv[1:]:
            if a == "--":
                steps.append(cur)
                cur = []
            else:
                cur.append(a)
        steps.append(cur)
    log = []
    for k, step in enumerate(steps):
        res = subprocess.run(
            [sys.executable, "-m", "quicsm", *step],
            cwd=where,
            env=_env(tree),
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=900,
        )
        log.append(f"$ quicsm {' '.join(step)}\nexit {res.returncode}\n".encode())
        (where / f"_stdout{k}").write_bytes(res.stdout)
        (where / f"_stderr{k}").write_bytes(res.stderr)
    (where / "_log").write_bytes(b"".join(log))
    (where / "data").unlink()
    if prep == "grid":
        shutil.rmtree(where / "grid")  # the input, made by the tree: its report is what is compared
    return name


def cmd_run(args: argparse.Namespace) -> int:
    tree, data, out = Path(args.tree).resolve(), Path(args.data).resolve(), Path(args.out).resolve()
    todo = [c for c in cases(tree, data) if re.search(args.only, c[0])]
    out.mkdir(parents=True, exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for k, name in enumerate(pool.map(lambda c: run_case(c, tree, data, out), todo)):
            print(f"{k + 1}/{len(todo)} {name}", file=sys.stderr, flush=True)
    return 0


def _norm(b: bytes, out: Path) -> bytes:
    """``b`` with its timing fields and timestamps, and the run directory's own path, made the same."""
    b = b.replace(bytes(out.resolve()), b"OUT")
    return TIMING.sub(lambda m: (m.group(1) or b"") + b"T", b)


def cmd_diff(args: argparse.Namespace) -> int:
    a, b = Path(args.a) / "cases", Path(args.b) / "cases"
    names = sorted(
        {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
        | {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    )
    bad = 0
    for rel in names:
        pa, pb = a / rel, b / rel
        if not (pa.is_file() and pb.is_file()):
            print(f"only in {'A' if pa.is_file() else 'B'}: {rel}")
            bad += 1
        elif not filecmp.cmp(pa, pb, shallow=False) and _norm(pa.read_bytes(), a.parent) != _norm(
            pb.read_bytes(), b.parent
        ):
            print(f"differs: {rel}")
            bad += 1
    print(f"{len(names)} files, {bad} differences", file=sys.stderr)
    return 1 if bad else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run every case with TREE's quicsm into OUT")
    r.add_argument("tree")
    r.add_argument("out")
    r.add_argument("--data", default=str(ROOT), help="tree whose traces/, tests/data, experiments/ are the inputs")
    r.add_argument("--jobs", type=int, default=2)
    r.add_argument("--only", default="", help="regex: only cases whose name matches")
    dd = sub.add_parser("diff", help="compare two run directories byte for byte (timing normalised)")
    dd.add_argument("a")
    dd.add_argument("b")
    args = p.parse_args()
    return cmd_run(args) if args.cmd == "run" else cmd_diff(args)


if __name__ == "__main__":
    sys.exit(main())
