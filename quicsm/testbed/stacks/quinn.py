"""quinn (quinn-proto from crates.io) with its BBR patched by a quicsm set, serving HTTP/3 from
``testbed/quinn-server`` (h3 + h3-quinn; :mod:`quicsm.testbed.quinn_build`); the page is loaded by the Go
client. quinn's BBR is a port of Chromium's BBR v1, a second BBR beside quiche's BBR2."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from quicsm.errors import TestbedError
from quicsm.testbed.stacks import Built, Progress, Stack, register, with_go_client

if TYPE_CHECKING:
    from quicsm.testbed.config import RunParams, ServerClient

__all__ = ["QuinnStack"]


class QuinnStack(Stack):
    name: ClassVar[str] = "quinn"
    implementation: ClassVar[str] = "quinn"
    description: ClassVar[str] = "quinn-proto (crates.io) with instrumented BBR (v1); Rust HTTP/3 server (h3-quinn)"
    ccs: ClassVar[tuple[str, ...]] = ("bbr",)
    clients: ClassVar[tuple[str, ...]] = ("go",)
    default_version: ClassVar[str] = "0.11.19"
    qlog: ClassVar[bool] = True
    QLOG_FROM: ClassVar[tuple[int, ...]] = (0, 11, 14)
    """The first quinn-proto whose quinn writes qlogs (feature ``qlog``)."""

    def normalize_version(self, version: str) -> str:
        return version.removeprefix("v")

    def versions(self) -> list[str]:
        from quicsm.testbed.sets import shipped_versions

        return shipped_versions(self, "quinn")

    def validate(self, cfg: RunParams) -> None:
        super().validate(cfg)
        version = self.version(cfg)
        if cfg.qlog and self.version_key(version) < self.QLOG_FROM:
            first = ".".join(map(str, self.QLOG_FROM))
            raise TestbedError(f"qlog: quinn-proto {version} has no qlog writer (from {first} on)")

    def build(self, cfg: RunParams, *, progress: Progress | None = None, force: bool = False) -> Built:
        from quicsm.testbed.quinn_build import build_quinn_server

        return with_go_client(self, cfg, build_quinn_server(self.version(cfg), progress=progress), progress)

    def server_argv(self, cfg: RunParams, bins: ServerClient, addr: str, log_path: Path) -> list[str]:
        argv = [*super().server_argv(cfg, bins, addr, log_path), "-cc", cfg.cc]
        return [*argv, "-qlog", str(log_path.parent / "qlog")] if cfg.qlog else argv

    def labels(self, cfg: RunParams) -> dict[str, str]:
        return {"stack": self.name, "quinn_proto_version": self.version(cfg)}

    def run_meta(self, cfg: RunParams, bins: ServerClient, ready: Mapping[str, Any]) -> dict[str, Any]:
        return {"server_quinn_proto": ready.get("quinn_proto")}


register(QuinnStack())
