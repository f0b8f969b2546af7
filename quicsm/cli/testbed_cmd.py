"""``quicsm testbed``: run instrumented quic-go or quiche through the emulated network; emulator report; cleanup."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from quicsm.errors import TestbedError
from quicsm.testbed import stacks
from quicsm.testbed.config import CLIENTS

__all__ = ["build_with_progress", "sigterm_as_interrupt", "testbed"]


class _Registry(click.Choice):
    """A choice read from the stack registry when used (a stack registered later is offered too)."""

    def __init__(self, values: Callable[[], list[str]]) -> None:
        self._values = values
        super().__init__(values())

    @property  # type: ignore[override, unused-ignore]  # click 8.4 declares a Sequence, 8.5 a tuple
    def choices(self) -> tuple[str, ...]:
        return tuple(self._values())

    @choices.setter
    def choices(self, value: Any) -> None:
        pass


_STACKS = _Registry(stacks.names)
_CCS = _Registry(lambda: sorted({cc for s in stacks.all_stacks() for cc in s.ccs}))


def sigterm_as_interrupt() -> None:
    """SIGTERM/SIGHUP unwind like Ctrl-C, so every ``finally`` tears the testbed down."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def _echo_result(res: Any) -> None:
    state = "ok" if res.ok else f"FAILED ({res.error})"
    late = "" if res.emulator_ok else "  [emulator late]"
    plt = f"{res.plt_ms:.0f} ms" if res.plt_ms else "-"
    again = f"  [redone {len(res.redone)}x]" if res.redone else ""
    click.echo(f"{res.run_dir}: {state}, PLT {plt}{late}{again}", err=True)


def _summary(results: list[Any], out: Path) -> list[str]:
    """The closing lines: how many runs are good, then every redone and every bad run with its reason."""
    bad = [r for r in results if not r.good]
    lines = [
        f"{len(results) - len(bad)}/{len(results)} run(s) ok in {out}; parse with: quicsm parse {out}/*/server.log"
    ]
    redone = [r for r in results if r.redone]
    if redone:
        lines.append(f"redone: {sum(len(r.redone) for r in redone)} attempt(s) of {len(redone)} run(s)")
        for r in redone:
            lines += [f"  {r.run_dir.name} attempt {k}: {why}" for k, why in enumerate(r.redone)]
    if bad:
        lines.append(f"not usable: {len(bad)} run(s) (still bad after the retries)")
        lines += [f"  {r.run_dir.name}: {r.reason()}" for r in bad]
    return lines


def _all_bad(results: list[Any], out: Path) -> str:
    """Why no run is usable: failed runs and runs that completed but whose emulator was late are told apart."""
    failed = sum(not r.ok for r in results)
    late = len(results) - failed
    if not failed:
        return (
            f"all {late} run(s) completed but the emulator was late in each (the machine was too busy to hold "
            f"the path's timing); their traces are in {out}, not usable for measurements: run again on a quieter machine"
        )
    if not late:
        return f"all {failed} run(s) failed; see meta.json and *.stderr in {out}"
    return (
        f"no usable run: {failed} failed (see meta.json and *.stderr in {out}), {late} completed with the emulator late"
    )


def _describe(cfg: Any) -> str:
    """``quiche 0.30.0 bbr2``: the stack, version and controller of a configuration."""
    return f"{cfg.stack} {cfg.version} {cfg.cc}"


def _progress(label: str) -> Callable[[str], None]:
    """Build progress on stderr, each line with the label and the time since the build started."""
    from quicsm.testbed.buildtools import format_duration

    t0 = time.monotonic()

    def say(line: str) -> None:
        click.echo(f"  [{label}, {format_duration(time.monotonic() - t0)}] {line}", err=True)

    return say


def build_with_progress(cfg: Any, *, force: bool = False, report: bool = True) -> Any:
    """Build (or take from the cache) the binaries of ``cfg``, with progress, and say what it took."""
    from quicsm.testbed.buildtools import format_duration

    label = _describe(cfg)
    built = cfg.server_stack.build(cfg, progress=_progress(label), force=force)
    if report and not built.cached:
        click.echo(f"{label}: built in {format_duration(built.seconds)} ({built.patch_set})", err=True)
    return built


def _run_scenarios(
    items: list[tuple[Any, int]], out: Path, retries: int, keep_going: bool = False, *, bad_exit: int = 1
) -> list[Path]:
    """Run the scenarios; the good runs' directories (``bad_exit``: the status when some stayed bad)."""
    from quicsm.testbed import netns
    from quicsm.testbed.runner import run_many
    from quicsm.testbed.system import require_root

    require_root("quicsm testbed")
    sigterm_as_interrupt()
    out.mkdir(parents=True, exist_ok=True)
    results: list[Any] = []
    try:
        for cfg, runs in items:
            bins = build_with_progress(cfg)
            results += run_many(cfg, bins, out, runs=runs, retries=retries, on_result=_echo_result)
    except KeyboardInterrupt:
        # Each run's own try/finally has already torn down its namespaces, relay, server and cgroup.
        leftovers = [n for n in netns.list_namespaces() if n.startswith(netns.PREFIX)]
        click.echo(
            "interrupted; runs cleaned up"
            + (f" (other testbeds still up: {len(leftovers)} namespaces)" if leftovers else ""),
            err=True,
        )
        raise SystemExit(130) from None
    click.echo("\n".join(_summary(results, out)), err=True)
    bad = sum(not r.good for r in results)
    if bad == len(results) and results:
        raise TestbedError(_all_bad(results, out))
    if bad and not keep_going:
        raise SystemExit(bad_exit)  # the summary above names them; --keep-going makes this exit 0
    return [r.run_dir for r in results if r.good]


@click.group()
def testbed() -> None:
    """Run instrumented quic-go or Cloudflare quiche servers through an emulated network (needs root).

    \b
    Topology: server ns -- tbf (rate, queue) -- relay ns (delay, jitter, loss, outages) -- client ns.
    Each run writes <out>/<run-id>/server.log and meta.json (all parameters), ready for
    `quicsm parse <out>/*/server.log`.
    """


@testbed.command()
@click.option("--rate", default="50", help="Bottleneck rate: Mbit/s or e.g. 500kbit, 50mbit.")
@click.option("--delay", "rtt", default=36.0, type=float, help="Added round-trip delay in ms (half each way).")
@click.option(
    "--jitter", default=0.0, type=float, help="Uniform +- jitter in ms per packet and direction (reorders, like netem)."
)
@click.option("--loss", default="0", help="Loss per packet and direction: 0.01 or 1%.")
@click.option("--queue", default="1bdp", help="Bottleneck queue: bytes (150kb) or BDP multiple (1bdp).")
@click.option("--schedule", help="Bandwidth schedule random:MIN:MAX[:PERIOD_S] in Mbit/s (Fig. 11).")
@click.option("--rtt-step", help="RTT step within the run, AFTER:RTT (20s:80ms): the added RTT from then on.")
@click.option(
    "--outage",
    metavar="AT:FOR[,AT:FOR]",
    help="Link blackout: from AT past the first packet, for FOR, nothing crosses in either direction (1s:1500ms).",
)
@click.option(
    "--client",
    type=click.Choice(CLIENTS),
    default="go",
    help="go (the Go HTTP/3 client), chromium (Debian's browser, HTTP/3), quic_client (Chromium 62's gQUIC toy "
    "client, stack chromium's; go means it there).",
)
@click.option("--cpu-quota", help="Client CPU quota as share of a core: 0.1 or 10% (mobile-like).")
@click.option("--objects", default=1, type=int, help="Objects on the page.")
@click.option("--size", default="10MB", help="Bytes per object (10MB, 100KB, 5000).")
@click.option(
    "--zero-rtt",
    is_flag=True,
    default=None,
    help="Resume with 0-RTT: a warm-up connection gets a session ticket, the page load resumes with it.",
)
@click.option(
    "--http",
    type=click.Choice(["h3", "h2", "h1"]),
    help="HTTP version (default: the stack's; h1 = HTTP/1.1 over TLS with stack tcp).",
)
@click.option("--max-cwnd", type=int, help="Rebuild the quic-go server with this maximum congestion window (packets).")
@click.option(
    "--duration",
    help="Long flow: fetch the objects back to back for this long (60s, 2m) instead of loading the page once.",
)
@click.option("--runs", default=1, type=int)
@click.option("--quic-go-version", default="v0.65.0", help="quic-go of the server and of the Go client.")
@click.option(
    "--stack",
    type=_STACKS,
    default="quic-go",
    help="Server: instrumented quic-go, or Cloudflare quiche (testbed/quiche-server; needs Rust and libclang).",
)
@click.option("--quiche-version", default="0.30.0", help="Crate version with --stack quiche.")
@click.option("--stack-version", help="Version of the --stack (any stack; wins over the two above).")
@click.option(
    "--set",
    "patch_set",
    metavar="NAME|DIR",
    help="Patch set for the server (default: the shipped one for the version, else one ported to it).",
)
@click.option(
    "--cc",
    type=_CCS,
    help="Congestion controller (default: the stack's, the first here; "
    + "; ".join(f"{s.name}: {', '.join(s.ccs)}" for s in stacks.all_stacks())
    + ").",
)
@click.option(
    "--packet-threshold",
    type=int,
    help="Rebuild the server with this fixed reordering threshold (quic-go versions with packetThreshold).",
)
@click.option("--name", default="run", help="Scenario name (run directories are NAME-NN).")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="Extra trace label (repeatable).")
@click.option("--seed", default=1, type=int)
@click.option(
    "--qlog", is_flag=True, default=None, help="Also keep the server's own qlog in RUN/qlog/ (quic-go servers)."
)
@click.option("--timeout", default=120.0, type=float, help="Seconds a page load may take.")
@click.option("--retries", default=1, type=int, help="Redo a failed or emulator-late run this often.")
@click.option(
    "--late-limit",
    default="2ms",
    metavar="MS",
    help="Count a run as emulator-late when 1 % of packets leave the relay later than this.",
)
@click.option("--keep-going", is_flag=True, help="Exit 0 even when some runs stayed bad after the retries.")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Output directory.")
def run(runs: int, retries: int, keep_going: bool, out: str, **kw: Any) -> None:
    """Run page loads through the emulator and keep each run's server log and metadata.

    \b
    Example (the paper's Fig. 13 mobile case):
      sudo quicsm testbed run --rate 50 --delay 36 --queue 1bdp --size 10MB \\
           --cpu-quota 10% --runs 10 --name mobile --out runs/fig13
    """
    from quicsm.testbed.matrix import config_from_mapping
    from quicsm.traces import parse_label

    kw["labels"] = dict(parse_label(x) for x in kw["labels"])
    given = {k: v for k, v in kw.items() if v is not None}  # the options a scenario file would set
    cfg, runs = config_from_mapping({**given, "runs": runs}, where="")
    _run_scenarios([(cfg, runs)], Path(out), retries, keep_going)


@testbed.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--out", type=click.Path(file_okay=False), help="Output directory (default: the file's `out`).")
@click.option("--retries", default=1, type=int)
@click.option(
    "--late-limit",
    metavar="MS",
    help="Count a run as emulator-late when 1 % of packets leave the relay later than this (overrides the file's late_limit; default 2ms).",
)
@click.option(
    "--set",
    "patch_set",
    metavar="NAME|DIR",
    help="Patch set for every scenario (refused when the file names another one for a scenario).",
)
@click.option("--keep-going", is_flag=True, help="Exit 0 even when some runs stayed bad after the retries.")
@click.option("--dry-run", is_flag=True, help="Only check the file and list the runs.")
@click.option(
    "--check",
    "baseline",
    type=click.Path(dir_okay=False),
    help="Then gate the new runs against a baseline (quicsm check); exit 0 same, 1 changed, 2 bad input or bad runs.",
)
@click.option("--check-config", type=click.Path(dir_okay=False), help="Tolerances for --check (TOML).")
def matrix(
    file: str,
    out: str | None,
    retries: int,
    late_limit: str | None,
    patch_set: str | None,
    keep_going: bool,
    dry_run: bool,
    baseline: str | None,
    check_config: str | None,
) -> None:
    """Run every scenario of a TOML scenario file (see quicsm.testbed.matrix for the format).

    With --check BASELINE the good new runs are then checked like `quicsm check BASELINE <runs>`, reports
    go to OUT/check.{txt,json,xml,md,html}, and the exit status is the check's (0 same, 1 changed, 2 bad
    input); runs still bad after the retries make it 2 (with --keep-going the good ones are checked).

    --set NAME|DIR gives a patch set to every scenario, like `testbed run --set`; a scenario the file gives
    another set is refused, not overridden. Every scenario's set is checked against its stack and --cc
    before the first run (also with --dry-run).
    """
    from quicsm.testbed.matrix import load_matrix, with_set

    m = with_set(load_matrix(Path(file)), patch_set)
    if late_limit is not None:
        from dataclasses import replace

        from quicsm.testbed.config import parse_late_limit

        limit = parse_late_limit(late_limit)
        m = replace(
            m, scenarios=tuple(replace(sc, config=replace(sc.config, late_limit_ms=limit)) for sc in m.scenarios)
        )
    target = Path(out) if out else m.out
    if target is None:
        raise TestbedError(f"{file}: no `out` in the file and no --out given")
    for sc in m.scenarios:
        c = sc.config
        click.echo(
            f"{c.name}: {sc.runs} run(s), {c.rate_mbps:g} Mbit/s, {c.rtt_ms:g} ms RTT, "
            f"jitter {c.jitter_ms:g} ms, quota {c.cpu_quota or 'none'}, {_describe(c)}"
            + (f", schedule {c.schedule}" if c.schedule else "")
            + (f", outage {c.outage}" if c.outage else "")
            + (f", packet threshold {c.packet_threshold}" if c.packet_threshold else "")
            + (f", long flow {c.duration_s:g} s" if c.duration_s is not None else "")
            + (", 0-RTT" if c.zero_rtt else "")
            + (f", {c.http}" if c.http else "")
            + (f", max cwnd {c.max_cwnd}" if c.max_cwnd else "")
            + (f", set {c.patch_set}" if c.patch_set else ""),
            err=True,
        )
    if baseline:
        from quicsm.cli.check_cmd import preflight

        preflight(baseline, check_config)  # a bad baseline or config stops before the runs, with exit 2
    if dry_run:
        return
    if not baseline:
        _run_scenarios([(sc.config, sc.runs) for sc in m.scenarios], target, retries, keep_going)
        return
    from quicsm.cli.check_cmd import BadInput, check_runs

    try:
        runs = _run_scenarios([(sc.config, sc.runs) for sc in m.scenarios], target, retries, keep_going, bad_exit=2)
    except TestbedError as exc:
        raise BadInput(str(exc)) from exc
    check_runs(baseline, [str(d) for d in runs], check_config, target)


@testbed.command("build")
@click.option("--stack", "stack_names", multiple=True, type=_STACKS, help="Default: every stack.")
@click.option(
    "--version",
    "versions",
    multiple=True,
    help="Stack version (repeatable; `all`: every version with shipped sets). Default: the stack's default.",
)
@click.option("--cc", "ccs", multiple=True, type=_CCS, help="Default: every controller of the stack.")
@click.option("--quic-go-version", default="v0.65.0", help="quic-go of the Go client.")
@click.option("--set", "patch_set", metavar="NAME|DIR", help="Patch set (one --stack, one --cc).")
@click.option("--force", is_flag=True, help="Rebuild even what the cache holds.")
def build_cmd(
    stack_names: tuple[str, ...],
    versions: tuple[str, ...],
    ccs: tuple[str, ...],
    quic_go_version: str,
    patch_set: str | None,
    force: bool,
) -> None:
    """Build the instrumented servers and clients ahead of time (no root needed), with progress.

    \b
    Builds are cached under ~/.cache/quicsm/build (chromium: ~/.cache/quicsm/chromium);
    `testbed run` then starts at once. A cold build of quic-go takes about a minute; of quiche,
    10-15 minutes (BoringSSL is compiled once per version); of chromium, 2,128 ninja steps (the
    README says how long), then its other controller's set only the files the two sets change.
      quicsm testbed build --stack quiche --version 0.30.0 --cc bbr2
      quicsm testbed build --stack quic-go --version all
    """
    from quicsm.testbed.buildtools import cache_root, dir_size, format_duration
    from quicsm.testbed.runner import RunConfig

    chosen = [stacks.get(n) for n in dict.fromkeys(stack_names)] or list(stacks.all_stacks())
    if versions and len(chosen) != 1:
        raise TestbedError("--version names the version of one stack: give exactly one --stack with it")
    jobs: list[Any] = []
    for st in chosen:
        wanted = [c for c in (ccs or st.ccs) if c in st.ccs]
        if not wanted:
            continue
        vers = list(dict.fromkeys(v for x in versions for v in (st.versions() if x == "all" else [x])))
        for v in vers or [st.default_version]:
            for cc in wanted:
                jobs.append(
                    RunConfig(
                        stack=st.name, stack_version=v, cc=cc, quic_go_version=quic_go_version, patch_set=patch_set
                    )
                )
    if patch_set and len(jobs) != 1:
        raise TestbedError("--set is one patch set: give one --stack, one --version and one --cc with it")
    if not jobs:
        raise TestbedError(f"no stack among {', '.join(s.name for s in chosen)} runs {', '.join(ccs)}")
    t0 = time.monotonic()
    failed: list[str] = []
    for cfg in jobs:
        label = _describe(cfg)
        try:
            built = build_with_progress(cfg, force=force, report=False)
        except TestbedError as exc:
            failed.append(label)
            click.echo(f"{label}: FAILED: {exc}", err=True)
            continue
        how = "cached" if built.cached else f"built in {format_duration(built.seconds)}"
        click.echo(f"{label}: {how}; server {built.server}")
    root = cache_root()
    size = dir_size(root) / 1e6 if root.is_dir() else 0.0
    click.echo(
        f"{len(jobs) - len(failed)}/{len(jobs)} build(s) ready in {format_duration(time.monotonic() - t0)}; "
        f"{root} holds {size:.0f} MB",
        err=True,
    )
    if failed:
        raise TestbedError(f"{len(failed)} build(s) failed: {', '.join(failed)}")


@testbed.command()
@click.option("--out", default="testbed-accuracy", type=click.Path(file_okay=False))
@click.option("--seconds", default=4.0, type=float, help="Probe duration per measurement.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of Markdown tables.")
def accuracy(out: str, seconds: float, as_json: bool) -> None:
    """Measure the emulator: rate at 5/10/50/100 Mbit/s, delay error percentiles, reordering with jitter."""
    from quicsm.testbed.accuracy import measure_accuracy

    sigterm_as_interrupt()
    report = measure_accuracy(Path(out), seconds=seconds)
    click.echo(json.dumps(report.to_json(), indent=2) if as_json else report.markdown())


@testbed.command()
@click.option(
    "--all", "everything", is_flag=True, help="Remove every qsm* namespace and cgroup, whoever made it (the old way)."
)
def cleanup(everything: bool) -> None:
    """Remove what this user's killed runs left behind: their namespaces (with veths, qdiscs, processes)
    and cgroups, found through the run registry. Runs still in progress and namespaces no registered run
    of this user owns (another user's testbed) are left alone unless --all."""
    from quicsm.testbed import cpu, netns, registry
    from quicsm.testbed.system import require_root

    require_root("quicsm testbed cleanup")
    if everything:
        gone = netns.cleanup_all() + cpu.cleanup_all(netns.PREFIX)
        for e in registry.entries():
            if not registry.owner_alive(e):
                registry.unregister(e.tag)
        click.echo("\n".join(f"removed {g}" for g in gone) if gone else "nothing to clean up", err=True)
        return
    plan = registry.plan_cleanup(netns.list_namespaces(netns.PREFIX), netns.PREFIX)
    gone = []
    for e in plan.leftovers:
        gone += netns.cleanup_all(e.stem) + cpu.cleanup_all(e.stem)
        registry.unregister(e.tag)
    lines = [f"removed {g}" for g in gone] or ["nothing of this user's runs to clean up"]
    if plan.running:
        lines.append(
            f"left alone: {len(plan.running)} run(s) in progress ({', '.join(e.run_dir for e in plan.running)})"
        )
    if plan.others:
        lines.append(f"left alone: {len(plan.others)} leftover run(s) of other users")
    if plan.unregistered:
        lines.append(
            f"left alone: {len(plan.unregistered)} {netns.PREFIX}* namespace(s) no registered run of this user owns "
            f"({', '.join(plan.unregistered[:6])}{', ...' if len(plan.unregistered) > 6 else ''}); --all removes them"
        )
    click.echo("\n".join(lines), err=True)
