"""Several flows of any stacks (quic-go, quiche, the kernel's TCP) through one emulated bottleneck.

Every server listens in the server namespace on its own port, every client starts in the client
namespace at its own offset, and all packets cross the same tbf queue and the same IP-layer relay
(``Emulator(mode="ip")``). The relay counts each flow's bytes at the bottleneck's egress in 100 ms
bins, which gives every flow's throughput over time whatever its stack. Each flow gets a
directory with its own ``server.log`` (contract lines: the patched QUIC server's, or the kernel
tracer's lines for that flow's port) and ``meta.json`` (labels for ``quicsm parse``); the run's
``meta.json`` holds the scenario, the throughput series and the clock offsets that put every
flow's ``t_us`` on one time axis (:func:`quicsm.compare.fairness.load_flows` reads them).

Long flows: each client fetches one object larger than the link can carry in ``duration_s``; at
``duration_s`` every client and server is stopped.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from quicsm.errors import TestbedError
from quicsm.files import write_output
from quicsm.testbed import netns, stacks
from quicsm.testbed.emulator import Emulator
from quicsm.testbed.procs import Child, last_json_object
from quicsm.testbed.relay import RelayConfig, build_relay
from quicsm.testbed.runner import RunConfig, ServerClient, relay_lateness
from quicsm.testbed.system import require_root
from quicsm.testbed.tcp import TCP_CCS, TcpTuning, apply_tuning, build_tcp, client_argv, server_argv
from quicsm.traces.runmeta import EmulatorMeta, FlowEntry, FlowSeries, FlowsRunMeta, RunMeta, dump_meta

__all__ = ["FlowSpec", "FlowScenario", "FlowResult", "run_flows", "parse_flow", "BASE_PORT"]

BASE_PORT = 4433
_GO_LOG_TIME = re.compile(rb"^(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{6}) .*?QUICSM .*?\bt_us=(-?\d+)")


@dataclass(frozen=True, slots=True)
class FlowSpec:
    """One flow: its server stack and controller, and when its client starts (s after the first)."""

    stack: str
    cc: str
    start_s: float = 0.0
    name: str = ""
    version: str = ""
    """quic-go module version or quiche crate version (default: the testbed's)."""

    def __post_init__(self) -> None:
        ccs = TCP_CCS if self.stack == "tcp" else stacks.get(self.stack).ccs  # any registered stack
        if self.cc not in ccs:
            raise TestbedError(f"cc {self.cc!r} on {self.stack}: choose {', '.join(ccs)}")
        if self.start_s < 0:
            raise TestbedError(f"flow start {self.start_s}: must not be negative")

    @property
    def implementation(self) -> tuple[str, str]:
        if self.stack == "tcp":
            import platform

            return "linux-tcp", platform.release()
        st = stacks.get(self.stack)
        return st.implementation, st.normalize_version(self.version or st.default_version)

    def run_config(self, *, objects: int = 1, size: int = 1) -> RunConfig:
        """The flow as a single run's configuration (how a registered stack builds and starts it)."""
        return RunConfig(stack=self.stack, cc=self.cc, stack_version=self.version or None, objects=objects, size=size)


def parse_flow(text: str) -> FlowSpec:
    """``STACK:CC[@START_S][=NAME]``, e.g. ``quic-go:cubic``, ``tcp:cubic@2``, ``tcp:bbr@0=tcp1``."""
    m = re.fullmatch(r"([a-z-]+):([a-z0-9]+)(?:@([0-9.]+))?(?:=([A-Za-z0-9_.-]+))?", text.strip())
    if not m:
        raise TestbedError(f"flow {text!r}: expected STACK:CC[@START_S][=NAME], e.g. tcp:cubic@2")
    return FlowSpec(m.group(1), m.group(2), float(m.group(3) or 0), m.group(4) or "")


@dataclass(frozen=True, slots=True)
class FlowScenario:
    """A shared bottleneck and the flows through it."""

    flows: tuple[FlowSpec, ...]
    rate_mbps: float = 5.0
    rtt_ms: float = 36.0
    queue: str = "30kb"
    loss: float = 0.0
    jitter_ms: float = 0.0
    duration_s: float = 30.0
    name: str = "flows"
    seed: int = 1
    tuning: TcpTuning = field(default_factory=TcpTuning)
    qlog: bool = True
    """quic-go flows also write qlog (metrics on every ACK: the cwnd timelines of Fig. 5)."""
    objects: int = 1
    size: int | None = None
    """Bytes per object; None: one object larger than the link carries in ``duration_s`` (a long
    flow, stopped at the end). With a size, clients load a page of ``objects`` objects and the run
    ends when every client has finished (``duration_s`` is then a time limit)."""
    up_rate_mbps: float | None = None
    """Client-to-server rate when it differs from ``rate_mbps``."""
    loss_up: float | None = None
    """Client-to-server loss when it differs from ``loss``."""
    trace_tcp: bool = True
    """Trace TCP flows with the kernel tracer (off: page load times only, no 10 s bpftrace start)."""

    def __post_init__(self) -> None:
        if not self.flows:
            raise TestbedError("a flow scenario needs at least one flow")
        if self.duration_s <= max(f.start_s for f in self.flows):
            raise TestbedError(f"duration {self.duration_s} s ends before the last flow starts")
        if self.objects < 1 or (self.size is not None and self.size < 1):
            raise TestbedError("objects and size must be at least 1")
        RelayConfig(self.rtt_ms / 2, self.jitter_ms, self.loss, loss_up=self.loss_up)

    def flow_names(self) -> list[str]:
        names = []
        for i, f in enumerate(self.flows):
            names.append(f.name or f"{i:02d}-{f.stack}-{f.cc}")
        if len(set(names)) != len(names):
            raise TestbedError(f"flow names must differ: {names}")
        return names

    def object_size(self) -> int:
        """Bytes per object: the scenario's, or more than the whole link carries in the run."""
        if self.size is not None:
            return self.size
        return int(self.rate_mbps * 1e6 / 8 * self.duration_s * 1.5) + 1_000_000


@dataclass(frozen=True, slots=True)
class FlowResult:
    run_dir: Path
    ok: bool
    emulator_ok: bool
    throughput_mbps: dict[str, float]
    error: str | None = None


def _binaries(sc: FlowScenario) -> dict[int, tuple[Path, Path]]:
    """(server, client) per flow index, each stack built (or taken from the cache) once."""
    out: dict[int, tuple[Path, Path]] = {}
    cache: dict[tuple[str, str, str], tuple[Path, Path]] = {}
    for i, f in enumerate(sc.flows):
        key = (f.stack, f.cc, f.version)
        if key not in cache:
            if f.stack == "tcp":
                tb = build_tcp()
                cache[key] = (tb.server, tb.client)
            else:
                from quicsm.testbed.stack import stack_for

                built = stack_for(f.run_config())
                cache[key] = (built.server, built.client)
        out[i] = cache[key]
    return out


def run_flows(sc: FlowScenario, run_dir: Path, *, index: int = 0) -> FlowResult:
    """Run every flow of ``sc`` through one emulated bottleneck; write ``run_dir`` (see module doc)."""
    require_root("a multi-flow run")
    names = sc.flow_names()
    bins = _binaries(sc)
    relay_bins = build_relay()
    run_dir.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:6]
    rate_bps = int(sc.rate_mbps * 1e6)
    up_bps = int(sc.up_rate_mbps * 1e6) if sc.up_rate_mbps else None
    tbf = netns.TbfConfig(
        rate_bps, netns.parse_queue(sc.queue, rate_bps=rate_bps, rtt_ms=sc.rtt_ms), up_rate_bps=up_bps
    )
    relay_cfg = RelayConfig(sc.rtt_ms / 2, sc.jitter_ms, sc.loss, seed=sc.seed * 1000 + index, loss_up=sc.loss_up)
    size = sc.object_size()
    started, t_mono0 = _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds"), time.monotonic()
    flow_meta: list[dict[str, Any]] = []
    error: str | None = None
    tracer_stats: dict[str, int] = {}
    emu = Emulator(tag=tag, tbf=tbf, relay_cfg=relay_cfg, bins=relay_bins, work_dir=run_dir, mode="ip")
    flow_dirs = [run_dir / f"flow-{n}" for n in names]
    for d in flow_dirs:
        d.mkdir(parents=True, exist_ok=True)
    tracer = None
    try:
        with emu:
            apply_tuning(emu.topo, sc.tuning)
            if sc.trace_tcp and any(f.stack == "tcp" for f in sc.flows):
                from quicsm.testbed.ktrace import KernelTracer

                tracer = KernelTracer(emu.topo.ns("srv"), run_dir / "ktrace.log")
                tracer.start()
            servers: list[Child] = []
            readies: list[dict[str, Any]] = []
            for i, f in enumerate(sc.flows):
                port = BASE_PORT + i
                addr = f"{emu.topo.server_ip}:{port}"
                log = flow_dirs[i] / ("h2server.log" if f.stack == "tcp" else "server.log")
                argv = _server_argv(f, bins[i][0], addr, sc.objects, size, log, sc)
                child = emu.procs.start(f"server-{names[i]}", argv, ns=emu.topo.ns("srv"))
                servers.append(child)
                readies.append(emu.procs.wait_ready(child, timeout=20))
            clients: list[Child | None] = [None] * len(sc.flows)
            starts: list[int] = [0] * len(sc.flows)
            t0 = time.monotonic()
            order = sorted(range(len(sc.flows)), key=lambda k: sc.flows[k].start_s)
            for i in order:
                f = sc.flows[i]
                _sleep_until(t0 + f.start_s)
                url = f"https://{emu.target(BASE_PORT + i)}/"
                spki = str(readies[i].get("spki", ""))
                timeout = sc.duration_s + 60
                if f.stack == "tcp":
                    from quicsm.testbed.tcp import TcpBinaries

                    argv = client_argv(TcpBinaries(bins[i][0], bins[i][1]), url=url, spki=spki, timeout_s=timeout)
                else:
                    argv = [str(bins[i][1]), "-url", url, "-spki", spki, "-timeout", f"{int(timeout)}s"]
                starts[i] = time.time_ns()
                clients[i] = emu.procs.start(f"client-{names[i]}", argv, ns=emu.topo.ns("cli"))
            _sleep_until(t0 + sc.duration_s, clients if sc.size is not None else None)
            results = []
            for c in clients:
                assert c is not None
                finished = c.popen.poll() is not None
                out = _client_result(c) if finished else {"ok": False, "error": "still loading at the end"}
                emu.procs.stop(c, grace=1)
                out["finished"] = finished
                results.append(out)
            for s in servers:
                emu.procs.stop(s, grace=5)
            if tracer is not None:
                tracer_stats = tracer.stop()
                tracer = None
            emu.stop_relay()
    except TestbedError as exc:
        error = f"testbed: {exc}"
        results = []
        starts = [0] * len(sc.flows)
        readies = []
    finally:
        if tracer is not None:
            tracer.stop()
    stats = emu.relay_stats
    late_p99, emulator_ok = relay_lateness(stats)
    series = _series(stats, emu.topo.server_ip, len(sc.flows))
    bin_s = float(stats.get("bin_ms", 100)) / 1000 if stats else 0.1
    t0_relay = int(stats.get("t0_unix_ns", 0)) if stats else 0
    # Relay clock (bin 0 = the relay's start): where each client started, and the measurement
    # window from 2 s after the last start (or a tenth of the run) to the end of the run.
    firsts = [(starts[i] - t0_relay) / 1e9 if starts[i] and t0_relay else f.start_s for i, f in enumerate(sc.flows)]
    origin = min(first - f.start_s for first, f in zip(firsts, sc.flows, strict=True))
    lead = max(f.start_s for f in sc.flows) + min(2.0, sc.duration_s / 10)
    window = (origin + lead, origin + sc.duration_s)
    thr: dict[str, float] = {}
    ktrace = run_dir / "ktrace.log"
    for i, f in enumerate(sc.flows):
        mbps = _mean_mbps(series[i], bin_s, window[0], window[1])
        thr[names[i]] = mbps
        log = flow_dirs[i] / "server.log"
        if f.stack == "tcp":
            _split_ktrace(ktrace, BASE_PORT + i, log)
        impl, version = f.implementation
        offset = _clock_offset_us(log, starts[i], sc.rtt_ms)
        flow = {
            "index": i,
            "name": names[i],
            "stack": f.stack,
            "cc": f.cc,
            "start_s": f.start_s,
            "port": BASE_PORT + i,
            "start_unix_ns": starts[i],
            "t_us_to_unix_us": offset,
            "throughput_mbps": mbps,
            "bytes": sum(series[i]),
            "client": results[i] if i < len(results) else None,
            "server": readies[i] if i < len(readies) else None,
        }
        flow_meta.append(flow)
        meta = RunMeta(
            implementation=impl,
            version=version,
            cc=f.cc,
            labels={
                "scenario": sc.name,
                "run": run_dir.name,
                "flow": names[i],
                "stack": f.stack,
                "rate_mbps": f"{sc.rate_mbps:g}",
                "rtt_ms": f"{sc.rtt_ms:g}",
                "loss": f"{sc.loss:g}",
                "queue": sc.queue,
                "flows": str(len(sc.flows)),
            },
            flow=flow,
        )
        write_output(str(flow_dirs[i] / "meta.json"), dump_meta(meta))
    ok = error is None and all(r.get("finished") is False or r.get("ok") for r in results)
    if not ok and error is None:
        error = _failed_flows(run_dir, names, results)
    run_meta = FlowsRunMeta(
        kind="flows",
        scenario={**asdict(sc), "flows": [asdict(f) for f in sc.flows], "object_size": size},
        flows=[FlowEntry(**fm) for fm in flow_meta],
        series=FlowSeries(bin_s, t0_relay, {names[i]: series[i] for i in range(len(names))}),
        window_s=window,
        clients_start_s=origin,
        throughput_mbps=thr,
        result={"ok": ok, "error": error},
        emulator=EmulatorMeta(
            ok=emulator_ok, late_p99_us=late_p99, mode="ip", relay={k: v for k, v in stats.items() if k != "flows"}
        ),
        tracer=tracer_stats,
        timestamps={
            "start": started,
            "end": _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds"),
            "seconds": round(time.monotonic() - t_mono0, 3),
        },
    )
    write_output(str(run_dir / "meta.json"), dump_meta(run_meta))
    return FlowResult(run_dir, ok, emulator_ok, thr, error)


def _server_argv(
    f: FlowSpec, server: Path, addr: str, objects: int, size: int, log: Path, sc: FlowScenario
) -> list[str]:
    if f.stack == "tcp":
        from quicsm.testbed.tcp import TcpBinaries

        return server_argv(
            TcpBinaries(server, server), addr=addr, objects=objects, size=size, cc=f.cc, tuning=sc.tuning, log=log
        )
    cfg = f.run_config(objects=objects, size=size)
    bins: ServerClient = stacks.Built(f.stack, "", f.cc, server, server, None, True, 0.0)
    argv = stacks.get(f.stack).server_argv(cfg, bins, addr, log)
    if f.stack == "quic-go" and sc.qlog:
        argv += ["-qlog", str(log.parent / "qlog")]
    return argv


def _sleep_until(t: float, clients: list[Child | None] | None = None) -> None:
    """Until ``t``, or until every one of ``clients`` has exited (page loads)."""
    while (left := t - time.monotonic()) > 0:
        if clients is not None and all(c is not None and c.popen.poll() is not None for c in clients):
            return
        time.sleep(min(left, 0.05))


def _failed_flows(run_dir: Path, names: list[str], results: list[dict[str, Any]]) -> str:
    """One line naming each flow whose client ended without a good result, with its error and the
    last line its client wrote to stderr (e.g. a binary that vanished from the build cache)."""
    parts = []
    for name, r in zip(names, results, strict=False):
        if r.get("finished") is False or r.get("ok"):
            continue
        last = ""
        try:
            lines = (run_dir / f"client-{name}.stderr").read_text(errors="replace").strip().splitlines()
            last = lines[-1][:200] if lines else ""
        except OSError:
            pass
        parts.append(f"flow {name}: {r.get('error') or 'no result'}" + (f" ({last})" if last else ""))
    return "; ".join(parts)


def _client_result(c: Child) -> dict[str, Any]:
    out = b""
    if c.popen.stdout is not None:
        try:
            out = c.popen.stdout.read() or b""
        except (OSError, ValueError):
            out = b""
    return last_json_object(out) or {
        "ok": False,
        "error": f"client exited with status {c.popen.poll()} without a result",
    }


def _series(stats: dict[str, Any], server_ip: str, n: int) -> list[list[int]]:
    """Bytes per bin leaving the relay towards the client, per flow (by the server's port)."""
    out: list[list[int]] = [[] for _ in range(n)]
    for fl in stats.get("flows", []) if stats else []:
        ip, _, port = str(fl.get("src", "")).rpartition(":")
        if ip != server_ip or not port.isdigit():
            continue
        i = int(port) - BASE_PORT
        if 0 <= i < n:
            b = [int(x) for x in fl.get("bins", [])]
            cur = out[i]
            for k, v in enumerate(b):
                if k < len(cur):
                    cur[k] += v
                else:
                    cur.append(v)
    return out


def _mean_mbps(bins: list[int], bin_s: float, lo: float, hi: float) -> float:
    """Mean rate over [lo, hi) seconds of the relay's clock (bins outside the list count as zero)."""
    a, b = max(0, int(lo / bin_s)), max(0, int(hi / bin_s))
    if b <= a:
        return 0.0
    return sum(bins[a:b]) * 8 / ((b - a) * bin_s) / 1e6


def _split_ktrace(ktrace: Path, port: int, dest: Path) -> None:
    """The kernel tracer's lines of the connections served on ``port`` (conn ``tcp<port>/...``)."""
    mark = f"conn=tcp{port}/".encode()
    tmp = dest.with_name(dest.name + ".tmp")
    with open(tmp, "wb") as out:
        if ktrace.exists():
            with open(ktrace, "rb") as src:
                for line in src:
                    if mark in line:
                        out.write(line)
    os.replace(tmp, dest)


def _clock_offset_us(log: Path, start_unix_ns: int, rtt_ms: float) -> int | None:
    """What to add to the flow's ``t_us`` to get Unix microseconds: from the first contract line's
    Go-log wall-clock prefix (quic-go, kernel TCP), else assuming the first event comes one RTT
    after the client started (quiche logs no wall clock)."""
    first_t: int | None = None
    try:
        with open(log, "rb") as f:
            for line in f:
                if b"QUICSM" not in line:
                    continue
                m = _GO_LOG_TIME.match(line)
                if m:
                    wall = _dt.datetime.strptime(m.group(1).decode(), "%Y/%m/%d %H:%M:%S.%f")
                    return int(wall.timestamp() * 1e6) - int(m.group(2))
                t = re.search(rb"\bt_us=(-?\d+)", line)
                if t and first_t is None:
                    first_t = int(t.group(1))
                break
    except OSError:
        return None
    if first_t is None or not start_unix_ns:
        return None
    return start_unix_ns // 1000 + int(rtt_ms * 1000) - first_t
