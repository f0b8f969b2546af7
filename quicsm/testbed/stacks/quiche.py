"""Cloudflare quiche from crates.io, patched by a quicsm set, serving HTTP/3 from ``testbed/quiche-server``
(:mod:`quicsm.testbed.quiche_build`); the page is loaded by the Go client (built with quic-go, which
carries no instrumentation on the client side) or by Chromium."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from quicsm.testbed.stacks import Built, Progress, Stack, get, register

if TYPE_CHECKING:
    from quicsm.testbed.runner import RunConfig, ServerClient

__all__ = ["QuicheStack"]


class QuicheStack(Stack):
    name: ClassVar[str] = "quiche"
    implementation: ClassVar[str] = "cloudflare-quiche"
    description: ClassVar[str] = "Cloudflare quiche (crates.io) with instrumented Reno/Cubic/BBR2; Rust HTTP/3 server"
    ccs: ClassVar[tuple[str, ...]] = ("reno", "cubic", "bbr2")
    version_field: ClassVar[str] = "quiche_version"
    default_version: ClassVar[str] = "0.30.0"

    def normalize_version(self, version: str) -> str:
        return version.removeprefix("v")

    def versions(self) -> list[str]:
        from quicsm.instrumentation.patchset import shipped_patch_sets
        from quicsm.testbed.quiche_build import TARGET

        found: dict[str, set[str]] = {}
        for ps in shipped_patch_sets(TARGET):
            crate = ps.extra.get("crate")
            if isinstance(crate, dict) and crate.get("version"):
                found.setdefault(str(crate["version"]), set()).add(ps.algorithm)
        ok = [v for v, ccs in found.items() if set(self.ccs) <= ccs]
        return sorted(ok, key=lambda v: tuple(int(x) for x in v.split(".") if x.isdigit()))

    def build(self, cfg: RunConfig, *, progress: Progress | None = None, force: bool = False) -> Built:
        from dataclasses import replace

        from quicsm.testbed.quiche_build import build_quiche_server

        version = self.version(cfg)
        server = build_quiche_server(version, cfg.cc, progress=progress)
        # the client carries no instrumentation: the quic-go client of the run's quic_go_version
        client = get("quic-go").build(replace(cfg, stack="quic-go", cc="reno", stack_version=None), progress=progress)
        return Built(
            stack=self.name,
            version=version,
            cc=cfg.cc,
            server=server.binary,
            client=client.client,
            patch_set=server.patch_set,
            cached=server.cached and client.cached,
            seconds=round(server.seconds + client.seconds, 3),
            meta={**server.meta, "client": {"quic_go": client.version, "patch_set": client.patch_set}},
        )

    def server_argv(self, cfg: RunConfig, bins: ServerClient, addr: str, log_path: Path) -> list[str]:
        return [*super().server_argv(cfg, bins, addr, log_path), "-cc", cfg.cc]

    def labels(self, cfg: RunConfig) -> dict[str, str]:
        return {"stack": self.name, "quiche_version": self.version(cfg)}

    def run_meta(self, cfg: RunConfig, bins: ServerClient, ready: Mapping[str, Any]) -> dict[str, Any]:
        return {"server_quiche": ready.get("quiche")}


register(QuicheStack())
