"""Record the original Synoptic's models on the inputs of ``recorded-at-size.json.gz`` (issue 24).

Runs nothing but a jar you already have, through quicsm's own ``synoptic-jar`` engine: one
``java -jar JAR ...`` process per (input, seed), with the command line of
:func:`quicsm.inference.export.synoptic_arguments` (``-j --noModelOutput -q --randomSeed=S``). Each run
is written as soon as it ends (``DIR/<input>.s<seed>.json``), so a long recording can stop and go on;
``--collect`` gathers them with the inputs' state sequences into the recording the tests read.

    nice -n 19 python tests/data/synoptic/record_at_size.py --jar synoptic.jar --dir runs/
    python tests/data/synoptic/record_at_size.py --dir runs/ --collect recorded-at-size.json.gz  # adds to it
    # a run timed whole elsewhere (its model its DOT): into runs/, then under ten_k
    python tests/data/synoptic/record_at_size.py --dir runs/ --from-dot orig.dot --only NAME --seeds 1 --cpu S --wall S
    python tests/data/synoptic/record_at_size.py --dir runs/ --add-to recorded-buildxml.json.gz --only NAME

Inputs (:func:`inputs`): random Markov congestion-control logs of several shapes (seeded), the
bundled trace sets (``traces/``) and real qlog files with the quiche testbed sets.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from quicsm.inference import infer_sequences

ROOT = Path(__file__).resolve().parents[3]
QLOG_SAMPLES = Path(os.environ.get("QUICSM_SHARED", "/work/shared")) / "reference" / "qlog-samples"

Sequences = list[list[str]]

CC_STATES = (
    "Init",
    "SlowStart",
    "CongestionAvoidance",
    "CongestionAvoidanceMaxed",
    "Recovery",
    "TailLossProbe",
    "RetransmissionTimeout",
    "ApplicationLimited",
    "Startup",
    "Drain",
    "ProbeBW",
    "ProbeRTT",
)


def random_markov(events: int, *, states: int, mean_length: int, modes: int, fanout: int, seed: int) -> Sequences:
    """Connections of geometric length walking one of ``modes`` random chains over the same states.

    Each chain gives every state ``1..fanout`` successors with Dirichlet weights; a connection picks
    its chain (a hidden mode, as throttled and unthrottled clients) and starts in the first state.
    """
    rng = np.random.default_rng(seed)
    names = CC_STATES[:states]
    chains = []
    for _ in range(modes):
        m = np.zeros((states, states))
        for a in range(states):
            succ = rng.choice(
                [b for b in range(states) if b != a], size=int(rng.integers(1, fanout + 1)), replace=False
            )
            m[a, succ] = rng.dirichlet(np.ones(len(succ)))
        chains.append(np.cumsum(m, axis=1))
    out: Sequences = []
    total = 0
    while total < events:
        length = min(int(rng.geometric(1 / mean_length)) + 1, events - total)
        chain = chains[int(rng.integers(modes))]
        state = 0
        seq = [names[0]]
        for _ in range(length - 1):
            state = min(int(np.searchsorted(chain[state], rng.random(), side="right")), states - 1)
            seq.append(names[state])
        out.append(seq)
        total += length
    return out


def bench_shape(events: int, *, mean_length: int = 100, throttled: float = 0.3, seed: int = 7) -> Sequences:
    """``bench/bench_infer.py``'s Cubic-like chains (desktop and CPU-throttled clients)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_infer import synth

    return synth(events, mean_length=mean_length, throttled=throttled, seed=seed)


def parsed(*paths: Path) -> Sequences:
    from quicsm.traces import parse_inputs

    return [t.states() for t in parse_inputs([str(p) for p in paths]).traces]


def _traces(*names: str) -> Callable[[], Sequences]:
    return lambda: parsed(*(ROOT / "traces" / n for n in names))


FIG10 = ("fig10/v0.33.0", "fig10/v0.43.1", "fig10/v0.52.0", "fig10/v0.65.0")
QUICHE = ("quiche-bbr2-fig11", "quiche-bbr2-vs-cubic", "quiche-fig13-bbr2")
QLOG = [ROOT / "tests" / "data" / "qlog", QLOG_SAMPLES / "picoquic"]


def inputs() -> dict[str, Callable[[], Sequences]]:
    """Name -> how to make the input's state sequences, smallest first (the order they are recorded in)."""
    out: dict[str, Callable[[], Sequences]] = {}
    out["bench-1k"] = lambda: bench_shape(1000)  # bench/bench_vs_synoptic.py's 10^3-event input
    for seed in (1, 2, 3):
        out[f"bench-1k-s{seed}"] = lambda seed=seed: bench_shape(1000, seed=seed)
    out["bench-short-1k"] = lambda: bench_shape(1000, mean_length=20, seed=11)
    out["bench-long-1k"] = lambda: bench_shape(1000, mean_length=400, seed=12)
    out["bench-desktop-1k"] = lambda: bench_shape(1000, throttled=0.0, seed=13)
    out["bench-throttled-1k"] = lambda: bench_shape(1000, throttled=1.0, seed=14)
    shapes = (  # (states, mean_length, modes, fanout)
        (5, 50, 2, 2),
        (6, 100, 2, 3),
        (8, 30, 3, 2),
        (7, 200, 1, 3),
        (6, 60, 3, 3),
    )
    for i, (states, mean_length, modes, fanout) in enumerate(shapes):
        out[f"markov-{states}st-m{mean_length}-x{modes}-f{fanout}-1k"] = (
            lambda i=i, s=states, m=mean_length, x=modes, f=fanout: random_markov(
                1000, states=s, mean_length=m, modes=x, fanout=f, seed=100 + i
            )
        )
    for i, (states, mean_length, modes, fanout) in enumerate(((5, 40, 2, 3), (7, 80, 2, 2), (4, 100, 2, 2))):
        out[f"markov-{states}st-m{mean_length}-x{modes}-f{fanout}-1k"] = (
            lambda i=i, s=states, m=mean_length, x=modes, f=fanout: random_markov(
                1000, states=s, mean_length=m, modes=x, fanout=f, seed=110 + i
            )
        )
    out["bench-1k-s4"] = lambda: bench_shape(1000, seed=4)
    out["quiche-vs-cubic"] = _traces("quiche-bbr2-vs-cubic")
    out["quiche-fig11-fig13"] = _traces("quiche-bbr2-fig11", "quiche-fig13-bbr2")
    out["fig13"] = _traces("fig13")
    out["fig13-fig10-v0.65.0"] = _traces("fig13", "fig10/v0.65.0")
    out["fig13-desktop-fig10-v0.33.0"] = _traces("fig13/desktop", "fig10/v0.33.0")
    out["fig13-mobile-fig10-v0.43.1"] = _traces("fig13/mobile", "fig10/v0.43.1")
    out["fig10-v0.33.0-v0.43.1"] = _traces("fig10/v0.33.0", "fig10/v0.43.1")
    out["fig10-v0.52.0-jitter"] = lambda: parsed(*sorted((ROOT / "traces").glob("fig10/v0.52.0/jitter*")))
    out["bench-1500"] = lambda: bench_shape(1500, seed=21)
    out["markov-6st-m80-x2-f2-1500"] = lambda: random_markov(
        1500, states=6, mean_length=80, modes=2, fanout=2, seed=121
    )
    out["fig10-v0.52.0"] = _traces("fig10/v0.52.0")
    out["bench-2k"] = lambda: bench_shape(2000, seed=22)
    out["bench-short-2k"] = lambda: bench_shape(2000, mean_length=20, seed=23)
    out["markov-5st-m100-x2-f2-2k"] = lambda: random_markov(
        2000, states=5, mean_length=100, modes=2, fanout=2, seed=122
    )
    out["quiche-all"] = _traces(*QUICHE)
    out["qlog-quiche"] = lambda: parsed(*QLOG) + parsed(*(ROOT / "traces" / n for n in QUICHE))
    out["fig10-jitter"] = lambda: parsed(*sorted((ROOT / "traces").glob("fig10/*/jitter*")))
    out["bench-3k"] = lambda: bench_shape(3000, seed=31)
    out["fig10-all"] = _traces(*FIG10)
    out["markov-7st-m150-x2-f3-3k"] = lambda: random_markov(
        3000, states=7, mean_length=150, modes=2, fanout=3, seed=131
    )
    out["traces-all"] = _traces("fig13", *FIG10, *QUICHE)
    # round 3 (issue 24): 1.5k-4k events of new shapes and real testbed sets the original finishes in minutes
    out["check-reno-a"] = _traces("check/reno-a")  # quic-go v0.65.0 Reno, clean link
    for i, (events, states, mean_length, modes, fanout) in enumerate(
        ((2000, 5, 30, 2, 3), (2500, 4, 60, 3, 2), (3500, 6, 250, 1, 2), (4000, 8, 120, 2, 2))
    ):
        name = f"markov-{states}st-m{mean_length}-x{modes}-f{fanout}-{events / 1000:g}k"
        out[name] = lambda i=i, n=events, s=states, m=mean_length, x=modes, f=fanout: random_markov(
            n, states=s, mean_length=m, modes=x, fanout=f, seed=141 + i
        )
    out["check-quiche-cubic-0.24.0"] = _traces("check/quiche-cubic-0.24.0")  # quiche Cubic, clean and jitter
    out["check-cubic-loss"] = _traces("check/cubic-loss")  # quic-go v0.65.0 Cubic, 1 % loss
    out["table4-quicgo-tcp4"] = _traces("table4/quicgo-tcp4")  # quic-go and kernel TCP Cubic, one bottleneck
    # round 4 (issue 31): 10^2-event inputs and the real samples, recorded with the build.xml build
    for i in range(1, 6):
        out[f"bench-100-s{i}"] = lambda i=i: bench_shape(100, mean_length=20, seed=200 + i)
        out[f"markov-6st-m15-x2-f2-100-s{i}"] = lambda i=i: random_markov(
            100, states=6, mean_length=15, modes=2, fanout=2, seed=210 + i
        )
    out["qlog-real"] = lambda: parsed(*QLOG, ROOT / "tests" / "data" / "quic-go-v0.65")  # real qlogs and a log
    out["fig13-desktop"] = _traces("fig13/desktop")  # real text logs (quic-go, patched)
    out["bench-5k"] = lambda: bench_shape(5000, seed=51)
    out["bench-10k"] = lambda: bench_shape(10_000)  # bench/bench_vs_synoptic.py's input
    # round 4 (issue 31): 10^4 events of real logs (quiche BBR2, quinn BBR, kernel TCP BBR testbed runs)
    out["bbr-long"] = _traces("bbr-long")
    # quic-go v0.65.0 Cubic and Reno testbed runs, clean link and 1 % loss (10,975 events, 50 traces)
    out["check-10k"] = _traces("check/cubic-loss", "check/reno-loss", "check/reno-a", "check/reno-b", "check/cubic-a")
    return out


def java_version(java: str) -> str:
    proc = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    return " / ".join(line.strip() for line in proc.stderr.splitlines()[:2])


def record(name: str, seqs: Sequences, seed: int, jar: str, java: str, target: Path, timeout: float = 4 * 3600) -> None:
    """One run of the original (``java -jar JAR``) on ``seqs`` with ``--randomSeed=seed``, written to ``target``;
    ``timeout``: wall seconds it may take (10^4 events: about an hour of CPU, longer on a shared machine)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = infer_sequences(seqs, "synoptic-jar", synoptic_jar=jar, java=java, seed=seed, timeout=timeout)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    model = res.model
    run = {
        "input": name,
        "seed": seed,
        "labels": [n.state for n in model.nodes],
        "edges": [[e.src, e.dst] for e in model.edges],
        "seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "command": ["java", "-jar", "synoptic.jar", *res.details["command"][2:]],
    }
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(json.dumps(run))
    tmp.replace(target)
    print(f"{name} seed {seed}: {len(model.nodes)} nodes, {wall:.1f} s wall, {cpu:.1f} s cpu", flush=True)


DOT_NODE = re.compile(r'\s*(\d+) \[label="([^"\\]*)"(?:,shape=\w+)?\];')
DOT_EDGE = re.compile(r'(\d+)->(\d+) \[label="P: [0-9.]+"\];')


def run_from_dot(dot: Path, name: str, seed: int, cpu: float, wall: float) -> dict:
    """A run read from the original's DOT (``java -jar synoptic.jar ... -o model --randomSeed=S traces.log``,
    without ``-j``: a run timed whole, whose model is its DOT): its nodes numbered as quicsm numbers models
    (INITIAL first, states by name, the DOT's order among equal names, TERMINAL last), its edges."""
    labels: dict[int, str] = {}
    edges: list[tuple[int, int]] = []
    for no, line in enumerate(dot.read_text().splitlines(), 1):
        if (m := DOT_NODE.fullmatch(line)) is not None:
            labels[int(m[1])] = m[2]
        elif (m := DOT_EDGE.fullmatch(line)) is not None:
            edges.append((int(m[1]), int(m[2])))
        elif line.strip() not in ("digraph G {", "}", ""):
            raise ValueError(f"{dot}:{no}: not a node or edge of Synoptic's DOT: {line!r}")
    rank = {"INITIAL": (0, ""), "TERMINAL": (2, "")}
    order = sorted(labels, key=lambda n: (rank.get(labels[n], (1, labels[n])), n))
    new = {old: i for i, old in enumerate(order)}
    return {
        "input": name,
        "seed": seed,
        "labels": [labels[n] for n in order],
        "edges": sorted([new[a], new[b]] for a, b in edges),
        "seconds": wall,
        "cpu_seconds": cpu,
        "command": [
            "java",
            "-jar",
            "synoptic.jar",
            "-r",
            "^(?<trace>\\d+) (?<TYPE>.+)$",
            "-m",
            "\\k<trace>",
            "-o",
            "model",
            f"--randomSeed={seed}",
            "traces.log",
        ],
    }


def _normalised(run: dict) -> dict:
    """A run without its temporary paths (the command's -o prefix and log become model and traces.log)."""
    cmd = list(run["command"])
    cmd[cmd.index("-o") + 1] = "model"
    cmd[-1] = "traces.log"
    return {**run, "command": cmd}


def collect(runs: Path, dest: Path, java: str) -> None:
    """Every input with all five seeds recorded, with its state sequences, into ``dest``; the inputs an
    existing ``dest`` holds are kept as they are (recordings made in earlier sessions, other run dirs)."""
    made = inputs()
    kept: dict[str, dict] = {}
    if dest.exists():
        with gzip.open(dest, "rt", encoding="utf-8") as fh:
            kept = json.load(fh)["inputs"]
    data: dict[str, dict] = {}
    for name, make in made.items():
        if name in kept:
            data[name] = kept[name]
            continue
        files = sorted(runs.glob(f"{name}.s*.json"))
        if len(files) < 5:
            if files:
                print(f"{name}: {len(files)} of 5 seeds recorded, left out")
            continue
        models = sorted((_normalised(json.loads(f.read_text())) for f in files), key=lambda r: r["seed"])
        reruns = sorted(
            (_normalised(json.loads(f.read_text())) for f in runs.glob(f"{name}.rerun*.json")), key=lambda r: r["seed"]
        )
        data[name] = {"sequences": make(), "synoptic": models, "reruns": reruns}
    with gzip.open(dest, "wt", encoding="utf-8") as fh:
        json.dump({"java": java_version(java), "inputs": data}, fh, separators=(",", ":"))
    print(f"{dest}: {len(data)} inputs")


def add_to(runs: Path, dest: Path, key: str, names: list[str]) -> None:
    """Put the runs of ``names`` in ``runs`` (whatever seeds they hold) under ``key`` of the recording
    ``dest`` (``recorded-buildxml.json.gz``'s ``ten_k``): ``{NAME: {"sequences", "synoptic": [runs]}}``,
    keeping everything else it holds."""
    made = inputs()
    with gzip.open(dest, "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    section = data.setdefault(key, {})
    for name in names:
        files = sorted(runs.glob(f"{name}.s*.json"))
        if not files:
            print(f"{name}: no run in {runs}")
            continue
        models = sorted((_normalised(json.loads(f.read_text())) for f in files), key=lambda r: r["seed"])
        section[name] = {"sequences": made[name](), "synoptic": models}
        print(f"{name}: seeds {[m['seed'] for m in models]} under {key}")
    tmp = dest.with_name(f".{dest.name}.tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as fh:
        json.dump(data, fh, separators=(",", ":"))
    tmp.replace(dest)


def table(recording: Path) -> None:
    """The README's table: per input, the seeds' node counts and languages, and our engine's models: the
    default (the replay of seed 1 where affordable) and ``refine="stitch"``."""
    sys.path.insert(0, str(ROOT / "tests" / "inference"))
    from model_language import Automaton, language_classes, same_language

    from quicsm.inference.synoptic import infer_synoptic

    with gzip.open(recording, "rt", encoding="utf-8") as fh:
        data = json.load(fh)["inputs"]
    print(
        "| input | events | traces | Synoptic nodes, seeds 1-5 | languages among seeds "
        "| default: nodes | default = seed | stitch: nodes | stitch = seed |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, rec in data.items():
        models = [Automaton.from_edges(dict(enumerate(m["labels"])), map(tuple, m["edges"])) for m in rec["synoptic"]]
        groups = language_classes(models)
        sizes = [len(m["labels"]) for m in rec["synoptic"]]
        cells = []
        for refine in (None, "stitch"):
            ours = infer_synoptic(rec["sequences"], refine=refine).model
            inside = "" if min(sizes) <= len(ours.nodes) <= max(sizes) else " (outside)"
            equal = [str(i + 1) for i, m in enumerate(models) if same_language(ours, m)]
            cells.append(f"{len(ours.nodes)}{inside} | {','.join(equal) or 'none'}")
        langs = " ".join("{" + ",".join(str(i + 1) for i in g) + "}" for g in groups)
        print(
            f"| {name} | {sum(map(len, rec['sequences']))} | {len(rec['sequences'])} | {', '.join(map(str, sizes))} "
            f"| {len(groups)}: {langs} | {cells[0]} | {cells[1]} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jar")
    ap.add_argument("--java", default="java")
    ap.add_argument("--dir", type=Path, default=Path("synoptic-runs"))
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--only", nargs="*", help="input names (default: all, smallest first)")
    ap.add_argument("--rerun", action="store_true", help="run seed 1 again in a new JVM (<input>.rerun1.json)")
    ap.add_argument("--collect", type=Path, help="write the recording here from the runs in --dir")
    ap.add_argument("--list", action="store_true", help="print the inputs and their sizes")
    ap.add_argument("--table", type=Path, help="print the README's table of this recording")
    ap.add_argument("--add-to", type=Path, help="put the runs of --only (any seeds) under --key of this recording")
    ap.add_argument("--key", default="ten_k")
    ap.add_argument("--from-dot", type=Path, help="write DIR/<--only>.s<--seeds>.json from this DOT of the original's")
    ap.add_argument("--cpu", type=float, help="with --from-dot: the run's CPU seconds")
    ap.add_argument("--wall", type=float, help="with --from-dot: the run's wall seconds")
    opts = ap.parse_args()
    if opts.from_dot:
        (name,), seed = opts.only, int(opts.seeds)
        run = run_from_dot(opts.from_dot, name, seed, opts.cpu, opts.wall)
        opts.dir.mkdir(parents=True, exist_ok=True)
        (opts.dir / f"{name}.s{seed}.json").write_text(json.dumps(run))
        return
    if opts.add_to:
        add_to(opts.dir, opts.add_to, opts.key, opts.only or [])
        return
    if opts.table:
        table(opts.table)
        return
    opts.dir.mkdir(parents=True, exist_ok=True)
    if opts.collect:
        collect(opts.dir, opts.collect, opts.java)
        return
    made = inputs()
    names = opts.only or list(made)
    if opts.list:
        for name in names:
            seqs = made[name]()
            print(f"{name}: {len(seqs)} traces, {sum(map(len, seqs))} events")
        return
    seeds = [int(s) for s in opts.seeds.split(",")]
    for name in names:
        seqs = made[name]()
        for seed in seeds:
            target = opts.dir / (f"{name}.rerun{seed}.json" if opts.rerun else f"{name}.s{seed}.json")
            claim = target.with_name(f".{target.name}.claim")  # several recorders may share a directory
            try:
                os.close(os.open(claim, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                continue
            try:
                if not target.exists():
                    record(name, seqs, seed, opts.jar, opts.java, target)
            except BaseException:
                claim.unlink()
                raise


if __name__ == "__main__":
    main()
