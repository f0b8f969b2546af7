"""The kernel's TCP (Linux Cubic, Reno, BBR) behind a Go HTTP/2 + TLS 1.3 server (``testbed/tcp``),
traced by :mod:`quicsm.testbed.ktrace`: bpftrace turns the server namespace's TCP events into the
contract lines of ``server.log`` while the page loads. The page is loaded by the Go HTTP/2 client or
by Chromium with QUIC off; with ``http = "h1"`` both speak HTTP/1.1 over TLS instead, over up to six
connections as a browser does (Carlucci et al.'s third protocol). It needs the IP-layer relay (emulator
mode ``ip``): a TCP client dials the server itself."""

from __future__ import annotations

import contextlib
import platform
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from quicsm.errors import TestbedError
from quicsm.testbed.stacks import Built, Progress, RunContext, Stack, page_flag, register

if TYPE_CHECKING:
    from quicsm.testbed.config import RunParams, ServerClient

__all__ = ["TcpStack"]


class TcpStack(Stack):
    name: ClassVar[str] = "tcp"
    implementation: ClassVar[str] = "linux-tcp"
    description: ClassVar[str] = "the kernel's TCP (cubic, reno, bbr) with HTTP/2 + TLS 1.3, traced with bpftrace"
    ccs: ClassVar[tuple[str, ...]] = ("reno", "cubic", "bbr")  # reno first: what runs naming none always used
    protocol: ClassVar[str] = "h2"
    http_versions: ClassVar[tuple[str, ...]] = ("h2", "h1")
    pages: ClassVar[bool] = True

    def version(self, cfg: RunParams) -> str:
        return platform.release()

    def versions(self) -> list[str]:
        return [platform.release()]

    def validate(self, cfg: RunParams) -> None:
        from quicsm.testbed.emulator import default_mode

        super().validate(cfg)
        if default_mode() != "ip":
            raise TestbedError(
                "stack tcp needs the IP-layer relay (the default): unset QUICSM_EMULATOR or set it to ip"
            )
        if cfg.stack_version and cfg.stack_version != platform.release():
            raise TestbedError(f"stack tcp runs this kernel ({platform.release()}), not {cfg.stack_version}")

    def build(self, cfg: RunParams, *, progress: Progress | None = None, force: bool = False) -> Built:
        from quicsm.testbed.tcp import build_tcp

        t0 = time.monotonic()
        bins = build_tcp()
        return Built(
            stack=self.name,
            version=platform.release(),
            cc=cfg.cc,
            server=bins.server,
            client=bins.client,
            patch_set=None,
            cached=True,
            seconds=round(time.monotonic() - t0, 3),
            meta={"tracer": "bpftrace (quicsm.testbed.ktrace)"},
        )

    def server_argv(self, cfg: RunParams, bins: ServerClient, addr: str, log_path: Path) -> list[str]:
        from quicsm.testbed.tcp import TcpBinaries, TcpTuning, server_argv

        own_log = log_path.with_name("h2server.log")  # server.log is the tracer's
        tb = TcpBinaries(bins.server, bins.client)
        argv = server_argv(
            tb, addr=addr, objects=cfg.objects, size=cfg.size, cc=cfg.cc, tuning=TcpTuning(), log=own_log
        )
        return argv + (["-http", "1.1"] if (cfg.http or self.protocol) == "h1" else []) + page_flag(cfg)

    def client_argv(self, cfg: RunParams, bins: ServerClient, url: str, spki: str) -> list[str]:
        argv = super().client_argv(cfg, bins, url, spki)
        return argv + (["-http", "1.1"] if (cfg.http or self.protocol) == "h1" else [])

    @contextlib.contextmanager
    def session(self, ctx: RunContext) -> Iterator[None]:
        """Stock TCP settings without cached metrics, and the kernel tracer writing ``server.log``."""
        from quicsm.testbed import netns
        from quicsm.testbed.ktrace import KernelTracer
        from quicsm.testbed.system import sh

        sh(netns.ns_argv(ctx.server_ns, ["sysctl", "-q", "-w", "net.ipv4.tcp_no_metrics_save=1"]))
        with KernelTracer(ctx.server_ns, ctx.log_path):
            yield

    def labels(self, cfg: RunParams) -> dict[str, str]:
        return {"stack": self.name, "kernel": platform.release()}

    def run_meta(self, cfg: RunParams, bins: ServerClient, ready: Mapping[str, Any]) -> dict[str, Any]:
        return {"server_tcp": {"cc": ready.get("cc"), "proto": ready.get("proto")}}


register(TcpStack())
