"""A fake testbed for grids: runs that write what a real run writes (``meta.json`` with the grid block,
``server.log`` copied from a real quic-go run of traces/fig13), with the page-load time a test asks for."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from quicsm.testbed.runner import RunConfig, RunResult
from quicsm.testbed.stacks import Built

ROOT = Path(__file__).resolve().parents[2]
FIG13 = ROOT / "traces" / "fig13"


def fig13_log(profile: str, k: int) -> bytes:
    """The server.log of a real run: desktop (unthrottled client) or mobile (client at 10 % of a core)."""
    runs = sorted((FIG13 / profile).glob(f"{profile}-*"))
    return gzip.decompress((runs[k % len(runs)] / "server.log.gz").read_bytes())


@dataclass
class FakeTestbed:
    """``run`` for :func:`quicsm.grids.execute.run_grid`: PLT from ``plt(cfg, round)``; ``bad`` names runs
    (``cell-dir/arm-NN``) that fail; the log of arm ``mobile_arm`` comes from the mobile runs."""

    plt: Callable[[RunConfig, int], float]
    bad: set[str] = field(default_factory=set)
    late_first: set[str] = field(default_factory=set)
    mobile_arm: str = ""
    calls: list[str] = field(default_factory=list)

    def build(self, cfg: RunConfig) -> Built:
        return Built(cfg.stack, cfg.version, cfg.cc, Path("/srv"), Path("/cli"), None, True, 0.0)

    def run(
        self,
        cfg: RunConfig,
        bins: Any,
        run_dir: Path,
        *,
        index: int,
        retries: int,
        extra_meta: dict[str, Any],
        **kw: Any,
    ) -> RunResult:
        name = f"{run_dir.parent.name}/{run_dir.name}"
        self.calls.append(name)
        run_dir.mkdir(parents=True, exist_ok=True)
        ok = name not in self.bad
        plt = self.plt(cfg, index)
        (run_dir / "server.log").write_bytes(fig13_log("mobile" if cfg.name == self.mobile_arm else "desktop", index))
        meta = {
            "implementation": cfg.implementation[0],
            "version": cfg.version,
            "cc": cfg.cc,
            "labels": {**cfg.label_dict(), "run": run_dir.name},
            "params": {**asdict(cfg)},
            "result": {
                "ok": ok,
                "plt_ms": plt if ok else None,
                "client": {"ok": ok, "bytes": cfg.size, "page_ms": plt / 2},
            },
            "emulator": {
                "ok": True,
                "late_p99_us": 100,
                "tbf": {"down": {"packets": 1000, "drops": 10}},
                "relay": {"down": {"dropped": 5}},
            },
            **extra_meta,
        }
        (run_dir / "meta.json").write_text(json.dumps(meta))
        redone = ("emulator late (kept in x)",) if name in self.late_first else ()
        return RunResult(run_dir, ok, plt if ok else None, True, None if ok else "client failed", redone)
