"""Cloudflare quiche from crates.io, patched by a quicsm set, serving HTTP/3 from ``testbed/quiche-server``
(:mod:`quicsm.testbed.quiche_build`); the page is loaded by the Go client (built with quic-go, which
carries no instrumentation on the client side) or by Chromium."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from quicsm.testbed.stacks import Built, Progress, Source, Stack, register, with_go_client

if TYPE_CHECKING:
    from quicsm.testbed.config import RunParams, ServerClient

__all__ = ["QuicheStack"]


class QuicheStack(Stack):
    name: ClassVar[str] = "quiche"
    implementation: ClassVar[str] = "cloudflare-quiche"
    description: ClassVar[str] = "Cloudflare quiche (crates.io) with instrumented Reno/Cubic/BBR2; Rust HTTP/3 server"
    ccs: ClassVar[tuple[str, ...]] = ("reno", "cubic", "bbr2")
    version_field: ClassVar[str] = "quiche_version"
    default_version: ClassVar[str] = "0.30.0"
    target: ClassVar[str | None] = "cloudflare-quiche"
    zero_rtt: ClassVar[bool] = True

    def pristine_source(self, version: str, *, progress: Progress | None = None) -> Source:
        from quicsm.instrumentation.targets import get_target
        from quicsm.testbed.quiche_build import registry_source

        if progress is not None:
            progress(f"fetching quiche {version} from crates.io")
        path = registry_source(version)
        target = get_target("cloudflare-quiche")
        located = target.locate(path)
        rel = target.release(located) if located else None
        if rel is None:
            from quicsm.errors import TestbedError

            raise TestbedError(f"{path}: not a quiche crate (no Cargo.toml naming quiche {version})")
        return Source(version, path, dict(rel.manifest), "crates.io (cargo fetch)")

    def normalize_version(self, version: str) -> str:
        return version.removeprefix("v")

    def versions(self) -> list[str]:
        from quicsm.testbed.sets import shipped_versions

        return shipped_versions(self, "cloudflare-quiche")

    def build(self, cfg: RunParams, *, progress: Progress | None = None, force: bool = False) -> Built:
        from quicsm.testbed.quiche_build import build_quiche_server
        from quicsm.testbed.sets import resolve_set

        version = self.version(cfg)
        chosen = resolve_set(self, version, cfg.cc, cfg.patch_set, progress=progress)
        server = build_quiche_server(version, cfg.cc, progress=progress, patch_set=chosen.patch_set, force=force)
        return with_go_client(self, cfg, server, progress, patch_set_choice=chosen.to_json())

    def server_argv(self, cfg: RunParams, bins: ServerClient, addr: str, log_path: Path) -> list[str]:
        return [*super().server_argv(cfg, bins, addr, log_path), "-cc", cfg.cc]  # -0rtt: quiche's enable_early_data

    def labels(self, cfg: RunParams) -> dict[str, str]:
        return {"stack": self.name, "quiche_version": self.version(cfg)}

    def run_meta(self, cfg: RunParams, bins: ServerClient, ready: Mapping[str, Any]) -> dict[str, Any]:
        return {"server_quiche": ready.get("quiche")}


register(QuicheStack())
