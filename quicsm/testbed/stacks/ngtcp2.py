"""ngtcp2 as Debian 12 packages it (``ngtcp2-server``: its example HTTP/3 server ``gtlsserver``, GnuTLS),
uninstrumented: a stack that logs no congestion state. Its runs carry no contract lines; their qlog
(always written, in ``<run>/qlog/``) is what quicsm reads, the states inferred from its metrics
(:mod:`quicsm.traces.metric_states`). The page is loaded by the Go client; the server is
:mod:`quicsm.testbed.ngtcp2_server`."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from quicsm.errors import TestbedError
from quicsm.testbed.stacks import Built, Progress, Stack, get, register

if TYPE_CHECKING:
    from quicsm.testbed.config import RunParams, ServerClient

__all__ = ["Ngtcp2Stack"]


class Ngtcp2Stack(Stack):
    name: ClassVar[str] = "ngtcp2"
    implementation: ClassVar[str] = "ngtcp2"
    description: ClassVar[str] = "ngtcp2 from Debian (gtlsserver), uninstrumented: states read from its qlog"
    ccs: ClassVar[tuple[str, ...]] = ("reno", "cubic", "bbr", "bbr2")
    clients: ClassVar[tuple[str, ...]] = ("go",)
    qlog: ClassVar[bool] = True

    def version(self, cfg: RunParams) -> str:
        from quicsm.testbed.ngtcp2_server import installed_version

        return installed_version() or "not installed"

    def versions(self) -> list[str]:
        from quicsm.testbed.ngtcp2_server import installed_version

        v = installed_version()
        return [v] if v else []

    def validate(self, cfg: RunParams) -> None:
        super().validate(cfg)
        if cfg.zero_rtt or cfg.duration_s is not None:
            raise TestbedError("stack ngtcp2 serves page loads only (no 0-RTT, no long flows)")
        if cfg.stack_version and cfg.stack_version != self.version(cfg):
            raise TestbedError(f"stack ngtcp2 runs Debian's package ({self.version(cfg)}), not {cfg.stack_version}")

    def build(self, cfg: RunParams, *, progress: Progress | None = None, force: bool = False) -> Built:
        from quicsm.testbed.ngtcp2_server import GTLSSERVER, installed_version

        t0 = time.monotonic()
        version = installed_version()
        if version is None or not Path(GTLSSERVER).is_file():
            raise TestbedError("stack ngtcp2 needs Debian's ngtcp2-server package (apt-get install ngtcp2-server)")
        client_cfg = replace(cfg, stack="quic-go", cc="reno", stack_version=None, patch_set=None, qlog=False)
        client = get("quic-go").build(client_cfg, progress=progress)
        return Built(
            stack=self.name,
            version=version,
            cc=cfg.cc,
            server=Path(GTLSSERVER),
            client=client.client,
            patch_set=None,
            cached=client.cached,
            seconds=round(time.monotonic() - t0, 3),
            meta={"package": f"ngtcp2-server {version} (Debian)", "client": {"quic_go": client.version}},
        )

    def server_argv(self, cfg: RunParams, bins: ServerClient, addr: str, log_path: Path) -> list[str]:
        argv = [sys.executable, "-m", "quicsm.testbed.ngtcp2_server", "-bin", str(bins.server), "-addr", addr]
        argv += ["-objects", str(cfg.objects), "-size", str(cfg.size), "-log", str(log_path), "-cc", cfg.cc]
        return [*argv, "-qlog", str(log_path.parent / "qlog")]

    def labels(self, cfg: RunParams) -> dict[str, str]:
        return {"stack": self.name, "ngtcp2_version": self.version(cfg)}

    def run_meta(self, cfg: RunParams, bins: ServerClient, ready: Mapping[str, Any]) -> dict[str, Any]:
        return {"server_ngtcp2": ready.get("ngtcp2")}


register(Ngtcp2Stack())
