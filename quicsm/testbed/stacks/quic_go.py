"""quic-go from the Go module proxy, patched by a quicsm set, serving HTTP/3 from ``testbed/server``
(:mod:`quicsm.testbed.build`); the Go client of ``testbed/client`` is built against the same copy."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from quicsm.testbed.stacks import Built, Progress, Source, Stack, register

if TYPE_CHECKING:
    from quicsm.testbed.config import RunParams, ServerClient

__all__ = ["QuicGoStack"]


class QuicGoStack(Stack):
    name: ClassVar[str] = "quic-go"
    implementation: ClassVar[str] = "quic-go"
    description: ClassVar[str] = "quic-go (Go module proxy) with an instrumented cubicSender; Go HTTP/3 server"
    ccs: ClassVar[tuple[str, ...]] = ("reno", "cubic")
    version_field: ClassVar[str] = "quic_go_version"
    default_version: ClassVar[str] = "v0.65.0"
    packet_threshold: ClassVar[bool] = True
    qlog: ClassVar[bool] = True
    target: ClassVar[str | None] = "quic-go"
    zero_rtt: ClassVar[bool] = True
    max_cwnd: ClassVar[bool] = True
    pages: ClassVar[bool] = True

    def pristine_source(self, version: str, *, progress: Progress | None = None) -> Source:
        from quicsm.testbed.build import MODULE, download_module

        if progress is not None:
            progress(f"fetching {MODULE}@{version} from the Go module proxy")
        from quicsm.instrumentation.targets import get_target

        mod = download_module(version)
        target = get_target("quic-go")
        located = target.locate(mod.dir)
        rel = target.release(located) if located else None
        module = {"path": MODULE, "version": mod.version, "sum": mod.sum}
        if rel is not None:
            module = {**dict(rel.manifest["module"]), **module}  # type: ignore[call-overload]
        date = rel.date if rel else None
        return Source(mod.version, mod.dir, {"module": module}, "the Go module proxy (go mod download)", date)

    def normalize_version(self, version: str) -> str:
        return version if version.startswith("v") else "v" + version

    def versions(self) -> list[str]:
        from quicsm.testbed.build import available_versions

        return available_versions()

    def build(self, cfg: RunParams, *, progress: Progress | None = None, force: bool = False) -> Built:
        from quicsm.testbed import build
        from quicsm.testbed.sets import resolve_set

        version = self.version(cfg)
        chosen = resolve_set(self, version, cfg.cc, cfg.patch_set, progress=progress)
        ps = chosen.patch_set
        if cfg.packet_threshold is not None and cfg.max_cwnd is not None:
            from quicsm.errors import TestbedError

            raise TestbedError("give a packet threshold or a max cwnd, not both (one rebuilt constant per server)")
        res = build.build_binaries(version, cfg.cc, force=force, progress=progress, patch_set=ps)
        res_meta = dict(res.meta)
        if cfg.packet_threshold is not None:
            from quicsm.testbed.threshold import build_threshold_server

            res = build_threshold_server(version, cfg.cc, cfg.packet_threshold, patch_set=ps)
            res_meta["packet_threshold"] = cfg.packet_threshold
        elif cfg.max_cwnd is not None:
            from quicsm.testbed.threshold import build_max_cwnd_server

            res = build_max_cwnd_server(version, cfg.cc, cfg.max_cwnd, patch_set=ps)
            res_meta["max_cwnd"] = cfg.max_cwnd
        res_meta["patch_set_choice"] = chosen.to_json()
        return Built(
            stack=self.name,
            version=res.version,
            cc=cfg.cc,
            server=res.server,
            client=res.client,
            patch_set=res.patch_set,
            cached=res.cached,
            seconds=res.seconds,
            meta=res_meta,
        )

    def server_argv(self, cfg: RunParams, bins: ServerClient, addr: str, log_path: Path) -> list[str]:
        argv = super().server_argv(cfg, bins, addr, log_path)
        return [*argv, "-qlog", str(log_path.parent / "qlog")] if cfg.qlog else argv

    def labels(self, cfg: RunParams) -> dict[str, str]:
        return {"quic_go_version": self.version(cfg)}

    def run_meta(self, cfg: RunParams, bins: ServerClient, ready: Mapping[str, Any]) -> dict[str, Any]:
        return {"server_quic_go": ready.get("quic_go")}


register(QuicGoStack())
