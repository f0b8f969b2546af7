"""Server variants with one constant of quic-go changed: a raised packet-reordering threshold (the paper's
Fig. 10 "NACK threshold") or another maximum congestion window (Fig. 15's MACW).

quic-go up to at least v0.52 declares a loss when a packet 3 newer has been acknowledged
(``packetThreshold = 3`` in ``internal/ackhandler/sent_packet_handler.go``), the same fixed rule as
the paper's QUIC 34. This takes the instrumented module of a normal build, changes that one constant
and builds the server again, so runs can show what a larger threshold does under reordering.
Versions that adapt their threshold themselves keep the constant but use it differently; the change
is refused where the constant is missing rather than guessed.

The maximum congestion window is ``MaxCongestionWindowPackets`` (``internal/protocol/params.go``, 10000
packets in v0.65; Chromium's QUIC 34 had 107 by default and the paper's calibrated servers 430, QUIC 37
2000); the instrumented sender enters ``CongestionAvoidanceMaxed`` when it reaches it.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from quicsm.errors import TestbedError
from quicsm.instrumentation.patchset import PatchSet
from quicsm.testbed import build

__all__ = [
    "MAX_CWND_FILE",
    "THRESHOLD_FILE",
    "build_constant_server",
    "build_max_cwnd_server",
    "build_threshold_server",
    "set_constant",
]

THRESHOLD_FILE = "internal/ackhandler/sent_packet_handler.go"
MAX_CWND_FILE = "internal/protocol/params.go"


def set_constant(text: str, name: str, value: int, *, where: str) -> str:
    """Return ``text`` with the Go declaration ``NAME = N`` (``const NAME = N`` or one line of a const block)
    set to ``value``; exactly one declaration must be there."""
    const = re.compile(rf"^([ \t]*(?:const[ \t]+)?{re.escape(name)}[ \t]*=[ \t]*)(\d+)[ \t]*$", re.M)
    found = const.findall(text)
    if len(found) != 1:
        raise TestbedError(f"{where}: expected one `{name} = N` declaration, found {len(found)}")
    return const.sub(lambda m: f"{m.group(1)}{value}", text)


def build_threshold_server(
    version: str, variant: str, threshold: int, *, patch_set: PatchSet | None = None
) -> build.BuildResult:
    """Server (and the unchanged client) of ``version``/``variant`` with ``packetThreshold = threshold``."""
    return build_constant_server(
        version, variant, THRESHOLD_FILE, "packetThreshold", threshold, tag=f"pt{threshold}", patch_set=patch_set
    )


def build_max_cwnd_server(
    version: str, variant: str, packets: int, *, patch_set: PatchSet | None = None
) -> build.BuildResult:
    """Server of ``version``/``variant`` whose maximum congestion window is ``packets`` packets."""
    return build_constant_server(
        version, variant, MAX_CWND_FILE, "MaxCongestionWindowPackets", packets, tag=f"mc{packets}", patch_set=patch_set
    )


def build_constant_server(
    version: str, variant: str, file: str, name: str, value: int, *, tag: str, patch_set: PatchSet | None = None
) -> build.BuildResult:
    """Server (and the unchanged client) of ``version``/``variant`` with the constant ``name`` in ``file`` of
    the instrumented module set to ``value``; cached beside the normal build as ``<entry>-<tag>``."""
    base = build.build_binaries(version, variant, patch_set=patch_set)
    entry = base.cache_dir.parent / f"{base.cache_dir.name}-{tag}"
    server = entry / "bin" / build.PROGRAMS["server"]
    if server.is_file():
        return replace(base, server=server, patched_module=entry / "quic-go", cache_dir=entry, cached=True)
    toolchain = base.meta.get("toolchain")
    env = build.go_env(str(toolchain) if toolchain else None)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{entry.name}-", dir=entry.parent))
    try:
        patched = tmp / "quic-go"
        shutil.copytree(base.patched_module, patched)
        src = patched / file
        src.write_text(set_constant(src.read_text(), name, value, where=str(src)))
        (tmp / "bin").mkdir()
        # The replace target is the final path: build after moving into place.
        if entry.exists():
            shutil.rmtree(entry)
        tmp.rename(entry)
        tmp = entry
        what = f"building quicsm-server with {name}={value}"
        build.go_build("server", server, entry / "quic-go", base.version, tags=base.build_tags, env=env, what=what)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return replace(base, server=server, patched_module=entry / "quic-go", cache_dir=entry, cached=False)
