"""One testbed run, end to end: path up, instrumented server, relay, client, collect, tear down.

Each run writes ``<out>/<run-id>/`` with ``server.log`` (contract lines), ``meta.json`` (all
parameters, versions, page load time, timestamps, emulator summary) and the children's stderr.
``meta.json`` carries ``implementation``/``version``/``cc``/``labels`` the way ``quicsm parse``
reads a sidecar, so ``quicsm parse <out>/*/server.log`` labels traces without extra flags.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from quicsm import __version__
from quicsm.errors import TestbedError
from quicsm.files import write_output
from quicsm.testbed import cpu, netns, registry, stacks
from quicsm.testbed.emulator import SERVER_PORT, Emulator, RateSchedule
from quicsm.testbed.relay import RelayBinaries, RelayConfig, build_relay
from quicsm.testbed.system import require_root

__all__ = [
    "CLIENTS",
    "RunConfig",
    "RunResult",
    "ServerClient",
    "parse_size",
    "parse_loss",
    "parse_quota",
    "parse_duration",
    "parse_delay",
    "parse_late_limit",
    "relay_lateness",
    "run_once",
    "run_many",
    "run_attempts",
    "labels_for",
    "read_meta",
    "read_json_object",
    "LATE_P99_LIMIT_US",
    "REJECTED",
]

CLIENTS = ("go", "chromium", "quic_client")
"""``go`` (testbed/client), ``chromium`` (the browser), ``quic_client`` (Chromium's gQUIC toy client, stack chromium)."""
HTTP_PROTOCOLS = {"h3": "h3", "h2": "h2", "h1": "http/1.1"}
"""HTTP version of a run -> the protocol DevTools reports for a response that came over it."""
REJECTED = "_rejected"
LATE_P99_LIMIT_US = 2000
"""A run whose relay sent 1 % of packets later than this is flagged ``emulator_ok: false`` (the default of
``RunConfig.late_limit_ms``)."""


def relay_lateness(stats: dict[str, Any] | None, limit_us: float = LATE_P99_LIMIT_US) -> tuple[int | None, bool]:
    """(the relay's worst per-direction p99 send lateness in us, whether it is within ``limit_us``).

    No relay statistics (the relay died) is never within the limit."""
    if not stats:
        return None, False
    late_p99 = max(stats.get(d, {}).get("late_us", {}).get("p99", 0) for d in ("down", "up"))
    return late_p99, late_p99 <= limit_us


class ServerClient(Protocol):
    """What the build step returns: paths of the instrumented server and the Go client."""

    @property
    def server(self) -> Path: ...

    @property
    def client(self) -> Path: ...


@dataclass(frozen=True, slots=True)
class RunConfig:
    """All parameters of a run (they all land in ``meta.json``)."""

    rate_mbps: float = 50.0
    rtt_ms: float = 36.0
    """Added round-trip delay, half each way."""
    jitter_ms: float = 0.0
    """Uniform +- jitter per packet and direction (reorders, as netem does)."""
    loss: float = 0.0
    """Drop probability per packet and direction (0.01 = 1 %)."""
    queue: str = "1bdp"
    client: str = "go"
    cpu_quota: float | None = None
    """Share of one core for the client (0.1 = 10 %), or unthrottled."""
    objects: int = 1
    size: int = 10_000_000
    quic_go_version: str = "v0.65.0"
    cc: str = "reno"
    packet_threshold: int | None = None
    """Rebuild the server with this fixed reordering threshold (versions that have the constant)."""
    schedule: str | None = None
    """Bandwidth schedule ``random:MIN:MAX[:PERIOD]`` (Mbit/s), or a fixed rate."""
    seed: int = 1
    timeout_s: float = 120.0
    name: str = "run"
    labels: tuple[tuple[str, str], ...] = ()
    """Extra labels for the traces (e.g. ``(("profile", "mobile"),)``)."""
    stack: str = "quic-go"
    """Server stack, a name of :mod:`quicsm.testbed.stacks` (``quic-go``, ``quiche``, ...)."""
    quiche_version: str = "0.30.0"
    """Crate version of quiche when ``stack`` is ``quiche``."""
    stack_version: str | None = None
    """The stack's version, for any stack (wins over ``quic_go_version``/``quiche_version``, which name
    the quic-go and quiche versions; quic_go_version also picks the Go client's quic-go)."""
    rtt_step: str | None = None
    """An RTT step within the run, ``AFTER:RTT`` (``20s:80ms``): from AFTER past the first packet on, the added
    round trip is RTT (half each way), e.g. to see when BBR enters ProbeRtt."""
    duration_s: float | None = None
    """Long flow: the client fetches the page's objects back to back until this many seconds have passed
    (instead of loading the page once); ``size`` is then the size of each fetch."""
    patch_set: str | None = None
    """A patch set (shipped name or directory) for the server instead of the one the testbed picks
    (:mod:`quicsm.testbed.sets`)."""
    qlog: bool = False
    """Also keep the server stack's own qlog (where it writes one: quic-go) in ``<run>/qlog/``, beside the
    contract lines: the instrumented truth that the metric-state reader is measured against."""
    late_limit_ms: float = LATE_P99_LIMIT_US / 1000
    """A run is emulator-late (redone, then not usable) when the relay sent 1 % of its packets later than
    this. 2 ms keeps the emulated delay true for measurements; a loaded machine checking that a stack
    works end to end, not how it performs, may allow more."""
    zero_rtt: bool = False
    """Resume with 0-RTT (IMC'17 Fig. 7): the client first opens a connection for a session ticket and keeps
    it open, then loads the page over a second connection that sends its requests as 0-RTT data. The page
    load time is the second connection's; its ``warmup`` connection is the first in ``server.log``."""
    http: str | None = None
    """HTTP version of the page load: ``h3`` (QUIC stacks), ``h2`` or ``h1`` (HTTP/1.1 over TLS, up to six
    connections like a browser; stack ``tcp``). None: the stack's own (h3, or h2 for tcp)."""
    max_cwnd: int | None = None
    """Rebuild the server with this maximum congestion window in packets (IMC'17 Fig. 15's MACW)."""
    page: str | None = None
    """A page of objects of mixed sizes, ``18x2.6KB+3x86.5KB`` (Carlucci et al.'s pages), instead of
    ``objects`` objects of ``size`` bytes (stacks whose server can: quic-go, tcp)."""

    def __post_init__(self) -> None:
        if self.client == "go" and "go" not in self.server_stack.clients:  # the default: the stack's own client
            object.__setattr__(self, "client", self.server_stack.clients[0])
        if self.client not in CLIENTS:
            raise TestbedError(f"client {self.client!r}: choose one of {', '.join(CLIENTS)}")
        self.server_stack.validate(self)
        if self.rate_mbps <= 0 or self.rtt_ms < 0 or self.objects < 1 or self.size < 1:
            raise TestbedError("rate must be positive, rtt non-negative, objects and size at least 1")
        if self.cpu_quota is not None and not 0 < self.cpu_quota <= (os.cpu_count() or 1):
            raise TestbedError(f"cpu quota {self.cpu_quota}: a share of a core, e.g. 0.1 for 10 %")
        RelayConfig(self.rtt_ms / 2, self.jitter_ms, self.loss, delay_step=self.delay_step)  # validates
        netns.parse_queue(self.queue, rate_bps=1_000_000, rtt_ms=10)
        if self.schedule:
            RateSchedule.parse(self.schedule)
        if self.packet_threshold is not None and self.packet_threshold < 1:
            raise TestbedError(f"packet threshold {self.packet_threshold}: must be at least 1")
        if self.duration_s is not None:
            if not 0 < self.duration_s <= 3600:
                raise TestbedError(f"duration {self.duration_s:g} s: between 0 and 3600 seconds")
            if self.client != "go":
                raise TestbedError("a duration (long flow) needs the Go client (--client go)")
        if not 0 < self.late_limit_ms <= 1000:
            raise TestbedError(f"late limit {self.late_limit_ms:g} ms: between 0 and 1000 ms")
        if self.page is not None:
            self.page_groups  # noqa: B018  (validates)
        if self.max_cwnd is not None and not 2 <= self.max_cwnd <= 1_000_000:
            raise TestbedError(f"max cwnd {self.max_cwnd}: between 2 and 1000000 packets")

    @property
    def delay_step(self) -> tuple[float, float] | None:
        """The relay's delay step (after seconds, one-way ms) of ``rtt_step``."""
        if self.rtt_step is None:
            return None
        m = re.fullmatch(r"\s*([0-9.]+)\s*s?\s*:\s*([0-9.]+)\s*(?:ms)?\s*", self.rtt_step)
        if not m:
            raise TestbedError(f"rtt step {self.rtt_step!r}: expected AFTER:RTT, e.g. 20s:80ms")
        return float(m.group(1)), float(m.group(2)) / 2

    @property
    def client_timeout_s(self) -> float:
        """What the client may take: ``timeout_s``, and for a long flow at least its duration plus 60 s."""
        return self.timeout_s if self.duration_s is None else max(self.timeout_s, self.duration_s + 60)

    @property
    def rate_bps(self) -> int:
        return int(self.rate_mbps * 1e6)

    def queue_bytes(self) -> int:
        return netns.parse_queue(self.queue, rate_bps=self.rate_bps, rtt_ms=self.rtt_ms)

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
    def page_groups(self) -> tuple[tuple[int, int], ...]:
        """The page as (objects, bytes each) groups: ``page``'s, or ``objects`` x ``size``."""
        if self.page is None:
            return ((self.objects, self.size),)
        groups = []
        for part in self.page.replace(" ", "").split("+"):
            m = re.fullmatch(r"(\d+)[x*](.+)", part)
            if not m or int(m.group(1)) < 1:
                raise TestbedError(f"page {self.page!r}: expected NxSIZE+NxSIZE, e.g. 18x2.6KB+3x86.5KB")
            groups.append((int(m.group(1)), parse_size(m.group(2))))
        return tuple(groups)

    @property
    def page_bytes(self) -> int:
        """Bytes of all the page's objects."""
        return sum(n * size for n, size in self.page_groups)

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


_SIZE = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 10**6, "mb": 10**6, "kib": 1024, "mib": 1 << 20}


def parse_size(text: str | int) -> int:
    """``10MB`` / ``500kb`` / ``1000`` -> bytes (decimal units, like the paper's Table 2)."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*([0-9.]+)\s*([a-z]*)\s*", text.lower())
    if not m or m.group(2) not in _SIZE:
        raise TestbedError(f"size {text!r}: expected bytes or e.g. 100KB, 10MB")
    return int(float(m.group(1)) * _SIZE[m.group(2)])


_DURATION = {"": 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "ms": 0.001}


def parse_duration(text: str | float | None) -> float | None:
    """``60s`` / ``2m`` / ``1500ms`` / ``60`` -> seconds; None or ``none`` -> None."""
    if text is None or isinstance(text, (int, float)):
        return None if text is None else float(text)
    t = text.strip().lower()
    if t in ("", "none"):
        return None
    m = re.fullmatch(r"([0-9.]+)\s*([a-z]*)", t)
    if not m or m.group(2) not in _DURATION:
        raise TestbedError(f"duration {text!r}: expected seconds or e.g. 60s, 2m")
    return float(m.group(1)) * _DURATION[m.group(2)]


def parse_delay(text: str | float) -> float:
    """``36ms`` / ``0.036s`` / ``36`` (ms) -> milliseconds, not negative."""
    if isinstance(text, bool):
        raise TestbedError(f"delay {text!r}: expected milliseconds or e.g. 36ms")
    if isinstance(text, (int, float)):
        val = float(text)
    else:
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(ms|s)?\s*", text.lower())
        if not m:
            raise TestbedError(f"delay {text!r}: expected milliseconds or e.g. 36ms")
        val = float(m.group(1)) * (1000.0 if m.group(2) == "s" else 1.0)
    if val < 0:
        raise TestbedError(f"delay {text!r}: must not be negative")
    return val


def parse_late_limit(text: str | float) -> float:
    """``20ms`` / ``0.02s`` / ``20`` (ms) -> milliseconds."""
    if isinstance(text, (int, float)):
        return float(text)
    t = text.strip().lower()
    if re.fullmatch(r"[0-9.]+", t):
        return float(t)
    try:
        sec = parse_duration(t)
    except TestbedError:
        sec = None
    if sec is None:
        raise TestbedError(f"late limit {text!r}: expected milliseconds or e.g. 20ms, 0.05s")
    return sec * 1000


def parse_loss(text: str | float) -> float:
    """``1%`` or ``0.01`` -> 0.01."""
    if isinstance(text, float):
        return text
    t = text.strip()
    val = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    if not 0 <= val < 1:
        raise TestbedError(f"loss {text!r}: a probability below 1 (0.01) or a percentage (1%)")
    return val


def parse_quota(text: str | float | None) -> float | None:
    """``10%`` / ``0.1`` -> 0.1; ``none``/empty -> None."""
    if text is None or (isinstance(text, str) and text.strip().lower() in ("", "none", "0")):
        return None
    if isinstance(text, float):
        return text
    t = text.strip()
    return float(t[:-1]) / 100 if t.endswith("%") else float(t)


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


def _write_json(path: Path, obj: Any) -> None:
    write_output(str(path), json.dumps(obj, indent=2, sort_keys=True, default=str))


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
        cfg.rtt_ms / 2, cfg.jitter_ms, cfg.loss, seed=cfg.seed * 1000 + index, delay_step=cfg.delay_step
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
    meta = {
        "implementation": impl,
        "version": impl_version,
        "cc": cfg.cc,
        "labels": {**cfg.label_dict(), "run": run_dir.name},
        "params": {
            **asdict(cfg),
            "rtt_ms": cfg.rtt_ms,
            "one_way_delay_ms": cfg.rtt_ms / 2,
            "queue_bytes": cfg.queue_bytes(),
            "tbf_burst_bytes": tbf.burst(),
            "relay_seed": relay_cfg.seed,
        },
        "result": {"ok": ok, "plt_ms": plt, "client": client_out, "error": error, "client_cpu_s": cpu_used},
        "emulator": {
            "ok": emulator_ok,
            "late_p99_us": late_p99,
            "late_limit_us": round(cfg.late_limit_ms * 1000),
            "namespaces": list(emu.topo.namespaces),
            "relay": stats,
            "tbf": emu.tbf_stats,
            "rate_log": emu.rate_log,
        },
        "timestamps": {"start": started, "end": _now(), "seconds": round(time.monotonic() - t0, 3)},
        "versions": {
            **_tool_versions(),
            "server": str(bins.server),
            "client": str(bins.client),
            "relay": str(relay_bins.relay),
            "patch_set": getattr(bins, "patch_set", None),
            **cfg.server_stack.run_meta(cfg, bins, ready),
        },
        "build": dict(built) if isinstance(built, Mapping) else None,
        "run_index": index,
        **(extra_meta or {}),
    }
    _write_json(run_dir / "meta.json", meta)
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


def read_json_object(path: Path, missing: str) -> dict[str, Any]:
    """A JSON file holding an object; one-line TestbedErrors: ``PATH: missing`` when it is not there, the
    line of a syntax error, or that it holds no object."""
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise TestbedError(f"{path}: {missing}") from None
    except UnicodeDecodeError as exc:
        raise TestbedError(f"{path}: not UTF-8 text at byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise TestbedError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from None
    if not isinstance(doc, dict):
        raise TestbedError(f"{path}: {Path(path).name} must hold a JSON object")
    return doc


def read_meta(run_dir: Path) -> dict[str, Any]:
    return read_json_object(Path(run_dir) / "meta.json", "no meta.json (not a testbed run directory)")


def labels_for(run_dir: Path | str) -> dict[str, str]:
    """Labels of a run for ``quicsm parse --label`` / ``parse_inputs(labels=...)``: the scenario
    parameters plus implementation, version and cc."""
    meta = read_meta(Path(run_dir))
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    for key in ("implementation", "version", "cc"):
        if meta.get(key):
            labels.setdefault(key, str(meta[key]))
    return labels
