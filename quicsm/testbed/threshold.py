"""A server variant with a raised packet-reordering threshold (the paper's Fig. 10 "NACK threshold").

quic-go up to at least v0.52 declares a loss when a packet 3 newer has been acknowledged
(``packetThreshold = 3`` in ``internal/ackhandler/sent_packet_handler.go``), the same fixed rule as
the paper's QUIC 34. This takes the instrumented module of a normal build, changes that one constant
and builds the server again, so runs can show what a larger threshold does under reordering.
Versions that adapt their threshold themselves keep the constant but use it differently; the change
is refused where the constant is missing rather than guessed.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

from quicsm.errors import TestbedError
from quicsm.instrumentation.patchset import PatchSet
from quicsm.testbed import build

__all__ = ["THRESHOLD_FILE", "raise_threshold_source", "build_threshold_server"]

THRESHOLD_FILE = "internal/ackhandler/sent_packet_handler.go"
_CONST = re.compile(r"^(\s*packetThreshold\s*=\s*)(\d+)\s*$", re.M)


def raise_threshold_source(text: str, threshold: int, *, where: str = THRESHOLD_FILE) -> str:
    """Return ``text`` with ``packetThreshold = N`` set to ``threshold`` (exactly one declaration)."""
    found = _CONST.findall(text)
    if len(found) != 1:
        raise TestbedError(f"{where}: expected one `packetThreshold = N` declaration, found {len(found)}")
    if threshold < 1:
        raise TestbedError(f"packet threshold {threshold}: must be at least 1")
    return _CONST.sub(lambda m: f"{m.group(1)}{threshold}", text)


def build_threshold_server(
    version: str, variant: str, threshold: int, *, patch_set: PatchSet | None = None
) -> build.BuildResult:
    """Server (and the unchanged client) of ``version``/``variant`` with ``packetThreshold = threshold``."""
    base = build.build_binaries(version, variant, patch_set=patch_set)
    entry = base.cache_dir.parent / f"{base.cache_dir.name}-pt{threshold}"
    server = entry / "bin" / build.PROGRAMS["server"]
    if server.is_file():
        return build.BuildResult(
            **{
                **base.__dict__,
                "server": server,
                "patched_module": entry / "quic-go",
                "cache_dir": entry,
                "cached": True,
            }
        )
    toolchain = base.meta.get("toolchain")
    env = build.go_env(str(toolchain) if toolchain else None)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{entry.name}-", dir=entry.parent))
    try:
        patched = tmp / "quic-go"
        shutil.copytree(base.patched_module, patched)
        src = patched / THRESHOLD_FILE
        src.write_text(raise_threshold_source(src.read_text(), threshold, where=str(src)))
        (tmp / "bin").mkdir()
        # The replace target is the final path: build after moving into place.
        if entry.exists():
            shutil.rmtree(entry)
        tmp.rename(entry)
        tmp = entry
        what = f"building quicsm-server with packetThreshold={threshold}"
        build.go_build("server", server, entry / "quic-go", base.version, tags=base.build_tags, env=env, what=what)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return build.BuildResult(
        **{**base.__dict__, "server": server, "patched_module": entry / "quic-go", "cache_dir": entry, "cached": False}
    )
