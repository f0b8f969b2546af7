"""One testbed run, end to end: path up, instrumented server, relay, client, collect, tear down.

Each run writes ``<out>/<run-id>/`` with ``server.log`` (contract lines), ``meta.json`` (all
parameters, versions, page load time, timestamps, emulator summary) and the children's stderr.
``meta.json`` carries ``implementation``/``version``/``cc``/``labels`` the way ``quicsm parse``
reads a sidecar, so ``quicsm parse <out>/*/server.log`` labels traces without extra flags.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import re
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from quicsm.errors import TestbedError
from quicsm.files import write_output
from quicsm.testbed import cpu, netns, registry, stacks
from quicsm.testbed.config import CLIENTS, HTTP_PROTOCOLS, LATE_P99_LIMIT_US, RunParams, ServerClient
from quicsm.testbed.emulator import SERVER_PORT, Emulator, RateSchedule
from quicsm.testbed.relay import RelayBinaries, RelayConfig, build_relay
from quicsm.testbed.system import require_root
from quicsm.traces import runmeta
from quicsm.traces.runmeta import EmulatorMeta, ResultMeta, RunMeta, dump_meta
from quicsm.version import __version__

__all__ = [
    "CLIENTS",
    "RunConfig",
    "RunResult",
    "ServerClient",
    "relay_lateness",
    "run_once",
    "run_many",
    "run_attempts",
    "read_meta",
    "LATE_P99_LIMIT_US",
    "REJECTED",
]

REJECTED = "_rejected"


def relay_lateness(stats: dict[str, Any] | None, limit_us: float = LATE_P99_LIMIT_US) -> tuple[int | None, bool]:
    """(the relay's worst per-direction p99 send lateness in us, whether it is within ``limit_us``).

    No relay statistics (the relay died) is never within the limit."""
    if not stats:
        return None, False
    late_p99 = max(stats.get(d, {}).get("late_us", {}).get("p99", 0) for d in ("down", "up"))
    return late_p99, late_p99 <= limit_us


@dataclass(frozen=True, slots=True)
class RunConfig(RunParams):
    """All parameters of a run (they all land in ``meta.json``), checked by the run's stack too."""

    def __post_init__(self) -> None:
        if self.client == "go" and "go" not in self.server_stack.clients:  # the default: the stack's own client
            object.__setattr__(self, "client", self.server_stack.clients[0])
        if not self.cc:  # the default: the stack's own controller
            object.__setattr__(self, "cc", self.server_stack.ccs[0])
        if self.client not in CLIENTS:
            raise TestbedError(f"client {self.client!r}: choose one of {', '.join(CLIENTS)}")
        self.server_stack.validate(self)
        RunParams.__post_init__(self)

    def label_dict(self) -> dict[str, str]:
        """The labels traces of this run carry (scenario parameters as strings)."""
        out = {
            "scenario": self.name,
            "client": self.client,
            "profile": "mobile" if self.cpu_quota else "desktop",
            "cpu_quota": f"{self.cpu_quota:g}" if self.cpu_quota else "none",
            "rate_mbps": f"{self.rate_mbps:g}",
            "rtt_ms": f"{self.rtt_ms:g}",
            "jitter_ms": f"{self.jitter_ms:g}",
            "loss": f"{self.loss:g}",
            "queue": self.queue,
            "objects": str(self.objects),
            "size": str(self.size),
            "schedule": self.schedule or "fixed",
            "packet_threshold": str(self.packet_threshold) if self.packet_threshold else "default",
        }
        if self.duration_s is not None:  # runs without one keep the labels they always had
            out["duration_s"] = f"{self.duration_s:g}"
        if self.rtt_step is not None:
            out["rtt_step"] = self.rtt_step.replace(" ", "")
        if self.outage is not None:
            out["outage"] = self.outage.replace(" ", "")
        # added with 0-RTT, HTTP/1.1 and max cwnd runs; runs without them keep the labels they always had
        if self.zero_rtt:
            out["zero_rtt"] = "on"
        if self.http is not None:
            out["http"] = self.http_version
        if self.max_cwnd is not None:
            out["max_cwnd"] = str(self.max_cwnd)
        if self.page is not None:
            out["page"] = self.page.replace(" ", "")
        out.update(self.server_stack.labels(self))
        out.update(dict(self.labels))
        return out

    @property
    def http_version(self) -> str:
        """The HTTP version the page comes over: ``http``, else the stack's own."""
        return self.http or self.server_stack.protocol

    @property
    def server_stack(self) -> stacks.Stack:
        return stacks.get(self.stack)

    @property
    def version(self) -> str:
        """The stack's version this run uses."""
        return self.server_stack.version(self)

    @property
    def implementation(self) -> tuple[str, str]:
        """(implementation, version) as ``quicsm parse`` reads them from meta.json."""
        return self.server_stack.implementation, self.version


@dataclass(frozen=True, slots=True)
class RunResult:
    run_dir: Path
    ok: bool
    plt_ms: float | None
    emulator_ok: bool
    error: str | None = None
    redone: tuple[str, ...] = ()
    """Why each earlier attempt of this run was rejected and where it was kept (``run_many``)."""
    late_limit_ms: float = LATE_P99_LIMIT_US / 1000

    @property
    def good(self) -> bool:
        """Usable: the page load (or long flow) finished and the emulator kept its timing."""
        return self.ok and self.emulator_ok

    def reason(self) -> str:
        """Why the run is not good (empty when it is)."""
        if not self.ok:
            return self.error or "failed"
        return (
            "" if self.emulator_ok else f"emulator late (1 % of packets sent more than {self.late_limit_ms:g} ms late)"
        )


def _tool_versions() -> dict[str, str]:
    out = {"quicsm": __version__, "kernel": platform.release(), "python": platform.python_version()}
    try:
        import subprocess

        out["go"] = subprocess.run(["go", "version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, Exception):
        pass
    return out


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


def run_once(
    cfg: RunConfig,
    bins: ServerClient,
    run_dir: Path,
    *,
    relay_bins: RelayBinaries | None = None,
    index: int = 0,
    extra_meta: dict[str, Any] | None = None,
) -> RunResult:
    """Run one page load and write ``server.log`` + ``meta.json`` into ``run_dir``."""
    require_root("a testbed run")
    relay_bins = relay_bins or build_relay()
    run_dir.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:6]
    started, t0 = _now(), time.monotonic()
    relay_cfg = RelayConfig(
        cfg.rtt_ms / 2,
        cfg.jitter_ms,
        cfg.loss,
        seed=cfg.seed * 1000 + index,
        delay_step=cfg.delay_step,
        outages=cfg.outages,
    )
    tbf = netns.TbfConfig(cfg.rate_bps, cfg.queue_bytes())
    schedule = RateSchedule.parse(cfg.schedule, seed=cfg.seed * 1000 + index) if cfg.schedule else None
    client_out: dict[str, Any] = {}
    ready: dict[str, Any] = {}
    error: str | None = None
    group: cpu.CpuGroup | None = None
    cpu_used: float | None = None
    log_path = run_dir / "server.log"
    emu = Emulator(tag=tag, tbf=tbf, relay_cfg=relay_cfg, bins=relay_bins, work_dir=run_dir, schedule=schedule)
    try:
        # registered before anything is created, so `quicsm testbed cleanup` can tell our leftovers (this
        # process gone) from another user's running testbed
        with registry.registered(tag, netns.PREFIX, run_dir), emu:
            addr = f"{emu.topo.server_ip}:{SERVER_PORT}"
            server = emu.procs.start(
                "server", cfg.server_stack.server_argv(cfg, bins, addr, log_path), ns=emu.topo.ns("srv")
            )
            ready = emu.procs.wait_ready(server, timeout=20)
            spki = str(ready.get("spki", ""))
            if cfg.cpu_quota:
                group = cpu.create_group(f"{netns.PREFIX}{tag}-client", cfg.cpu_quota)
            url = f"https://{emu.client_target}/"
            ctx = stacks.RunContext(
                cfg, bins, run_dir, log_path, emu.topo.ns("srv"), emu.topo.ns("cli"), addr, emu.procs
            )
            with cfg.server_stack.session(ctx):
                emu.start_schedule()
                try:
                    client_out = _run_client(cfg, bins, emu, url, spki, group, run_dir)
                except TestbedError as exc:
                    error = str(exc)
                if group is not None:
                    cpu_used = group.usage_s()
                emu.stop_relay()
                emu.procs.stop(server, grace=10)
    except TestbedError as exc:  # the path or the server failed: record it, so the run can be redone
        error = error or f"testbed: {exc}"
    finally:
        if group is not None:
            group.remove()
    ok = error is None and bool(client_out.get("ok"))
    if error is None and not ok:
        error = str(client_out.get("error", "client reported failure"))
    stats = emu.relay_stats
    late_p99, emulator_ok = relay_lateness(stats, cfg.late_limit_ms * 1000)
    plt = client_out.get("plt_ms")
    impl, impl_version = cfg.implementation
    built = getattr(bins, "meta", None)
    meta = RunMeta(
        implementation=impl,
        version=impl_version,
        cc=cfg.cc,
        labels={**cfg.label_dict(), "run": run_dir.name},
        params={
            **asdict(cfg),
            "rtt_ms": cfg.rtt_ms,
            "one_way_delay_ms": cfg.rtt_ms / 2,
            "queue_bytes": cfg.queue_bytes(),
            "tbf_burst_bytes": tbf.burst(),
            "relay_seed": relay_cfg.seed,
        },
        result=ResultMeta(ok=ok, plt_ms=plt, client=client_out, error=error, client_cpu_s=cpu_used),
        emulator=EmulatorMeta(
            ok=emulator_ok,
            late_p99_us=late_p99,
            late_limit_us=round(cfg.late_limit_ms * 1000),
            namespaces=list(emu.topo.namespaces),
            relay=stats,
            tbf=emu.tbf_stats,
            rate_log=list(emu.rate_log),
        ),
        timestamps={"start": started, "end": _now(), "seconds": round(time.monotonic() - t0, 3)},
        versions={
            **_tool_versions(),
            "server": str(bins.server),
            "client": str(bins.client),
            "relay": str(relay_bins.relay),
            "patch_set": getattr(bins, "patch_set", None),
            **cfg.server_stack.run_meta(cfg, bins, ready),
        },
        build=dict(built) if isinstance(built, Mapping) else None,
        run_index=index,
        **(extra_meta or {}),
    )
    write_output(str(run_dir / "meta.json"), dump_meta(meta))
    return RunResult(
        run_dir=run_dir, ok=ok, plt_ms=plt, emulator_ok=emulator_ok, error=error, late_limit_ms=cfg.late_limit_ms
    )


def _run_client(
    cfg: RunConfig, bins: ServerClient, emu: Emulator, url: str, spki: str, group: cpu.CpuGroup | None, run_dir: Path
) -> dict[str, Any]:
    preexec = group.preexec if group is not None else None
    if cfg.client == "chromium":
        from quicsm.testbed.chromium import load_page

        return load_page(
            url,
            spki=spki,
            ns=emu.topo.ns("cli"),
            procs=emu.procs,
            work_dir=run_dir,
            preexec=preexec,
            timeout_s=cfg.client_timeout_s,
            expect_bytes=cfg.page_bytes,
            protocol=HTTP_PROTOCOLS[cfg.http_version],  # what DevTools must report for every response
        )
    child = emu.procs.start(
        "client", cfg.server_stack.client_argv(cfg, bins, url, spki), ns=emu.topo.ns("cli"), preexec=preexec
    )
    return emu.procs.read_json(child, timeout=cfg.client_timeout_s + 15)


def run_many(
    cfg: RunConfig,
    bins: ServerClient,
    out_dir: Path,
    *,
    runs: int = 1,
    retries: int = 1,
    on_result: Callable[[RunResult], None] | None = None,
) -> list[RunResult]:
    """``runs`` more runs of ``cfg`` into ``out_dir/<name>-NN`` (numbering continues after existing
    ones); a failed or emulator-late run is redone
    up to ``retries`` times. The bad attempt is kept as ``out_dir/_rejected/<name>-NN-attemptK``, out
    of the way of ``out_dir/*/server.log``."""
    relay_bins = build_relay()
    results = []
    first = _next_index(out_dir, cfg.name)
    for i in range(first, first + runs):
        res = run_attempts(cfg, bins, out_dir / f"{cfg.name}-{i:02d}", index=i, retries=retries, relay_bins=relay_bins)
        results.append(res)
        if on_result:
            on_result(res)
    return results


def run_attempts(
    cfg: RunConfig,
    bins: ServerClient,
    run_dir: Path,
    *,
    index: int = 0,
    retries: int = 1,
    relay_bins: RelayBinaries | None = None,
    rejected_dir: Path | None = None,
    extra_meta: dict[str, Any] | None = None,
) -> RunResult:
    """One run of ``cfg`` into ``run_dir``, redone up to ``retries`` times while it fails or the emulator is
    late (each attempt with another seed); a bad attempt is moved to ``rejected_dir`` (default
    ``run_dir.parent/_rejected``) as ``<run>-attemptK``. The last attempt stays, good or not."""
    relay_bins = relay_bins or build_relay()
    rejected_dir = rejected_dir if rejected_dir is not None else run_dir.parent / REJECTED
    res: RunResult | None = None
    redone: list[str] = []
    for attempt in range(retries + 1):
        res = run_once(
            replace(cfg, seed=cfg.seed + attempt * 7919),
            bins,
            run_dir,
            relay_bins=relay_bins,
            index=index,
            extra_meta=extra_meta,
        )
        if res.good:
            break
        if attempt < retries:
            rejected = rejected_dir / f"{run_dir.name}-attempt{attempt}"
            rejected.parent.mkdir(parents=True, exist_ok=True)
            if rejected.exists():
                shutil.rmtree(rejected)
            os.replace(run_dir, rejected)
            redone.append(f"{res.reason()} (kept in {rejected})")
    assert res is not None
    return replace(res, redone=tuple(redone))


def _next_index(out_dir: Path, name: str) -> int:
    """Runs already in ``out_dir`` are kept: new ones continue the numbering."""
    taken = [
        int(m.group(1)) for p in out_dir.glob(f"{name}-*") if (m := re.fullmatch(re.escape(name) + r"-(\d+)", p.name))
    ]
    return max(taken) + 1 if taken else 0


def read_meta(run_dir: Path | str) -> RunMeta:
    """A run directory's ``meta.json`` (:func:`quicsm.traces.runmeta.read_meta`)."""
    return runmeta.read_meta(str(Path(run_dir) / "meta.json"), RunMeta)
