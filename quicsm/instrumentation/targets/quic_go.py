"""quic-go: the Go module ``github.com/quic-go/quic-go`` (a copy of its module root).

Its ``internal/congestion/cubic_sender.go`` is a port of Chromium's TcpCubicSenderBytes (slow start,
hybrid slow start, recovery, max window, cwnd-limited check, RTO); every released version constructs it
with Reno in ``internal/ackhandler/sent_packet_handler.go``. Eras follow the sender's API:

* ``go-a``: ``OnPacketLost`` and an interface ``logging.ConnectionTracer`` (up to v0.38, 2023-09);
* ``go-b``: ``OnCongestionEvent``, ``*logging.ConnectionTracer`` struct (v0.39 .. v0.5x, to 2025-10);
* ``go-c``: qlog events through ``qlogwriter`` and ``monotime``; later versions add ``OnSpuriousLoss``
  (Reno undo after a spurious loss).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import ClassVar

from quicsm.instrumentation.targets import Identity, Located, Target, register

__all__ = ["ERA_DATES", "QuicGoTarget", "module_version"]

ERA_DATES: dict[str, tuple[str, str]] = {
    "go-a": ("2020-01-01", "2023-09-10"),
    "go-b": ("2023-09-11", "2025-10-07"),
    "go-c": ("2025-10-08", "9999-12-31"),
}
"""Era -> the dates it can cover (from the quic-go history: the rename to OnCongestionEvent on
2023-09-11, the qlogwriter rewrite on 2025-10-08)."""

# (feature, file, regex): evidence looked for in the sender files.
_FEATURES: tuple[tuple[str, str, str], ...] = (
    ("on_packet_lost", "cubic_sender.go", r"\bfunc \(c \*cubicSender\) OnPacketLost\("),
    ("on_congestion_event", "cubic_sender.go", r"\bfunc \(c \*cubicSender\) OnCongestionEvent\("),
    ("on_spurious_loss", "cubic_sender.go", r"\bfunc \(c \*cubicSender\) OnSpuriousLoss\("),
    ("qlogwriter", "cubic_sender.go", r'"github\.com/quic-go/quic-go/qlogwriter"'),
    ("tracer_interface", "cubic_sender.go", r"\btracer\s+logging\.ConnectionTracer\b"),
    ("tracer_struct", "cubic_sender.go", r"\btracer\s+\*logging\.ConnectionTracer\b"),
    ("reno_default", "sent_packet_handler.go", r"\btrue, // use Reno\b"),
    ("pto", "sent_packet_handler.go", r"\bh\.ptoCount\+\+"),
    ("quicsm_instrumented", "cubic_sender.go", r"\bquicsmTransition\b"),
)
_MODULE = re.compile(r"^module\s+github\.com/quic-go/quic-go\s*$", re.MULTILINE)
_VERSION_DIR = re.compile(r"quic-go@(v\d+\.\d+\.\d+[\w.+-]*)")


def module_version(located: Located) -> str | None:
    """The module version when the tree is (a copy named like) a module-cache directory ``quic-go@vX``."""
    m = _VERSION_DIR.search(located.root.name)
    return m.group(1) if m else None


class QuicGoTarget(Target):
    name: ClassVar[str] = "quic-go"
    description: ClassVar[str] = "github.com/quic-go/quic-go module root (internal/congestion, internal/ackhandler)"
    eras: ClassVar[tuple[str, ...]] = ("go-a", "go-b", "go-c")
    algorithm_files: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "reno": ("cubic_sender.go", "sent_packet_handler.go"),
        "cubic": ("cubic_sender.go", "sent_packet_handler.go"),
    }
    classes: ClassVar[Mapping[str, str]] = {
        "cubic_sender.go": "cubicSender",
        "cubic.go": "Cubic",
        "hybrid_slow_start.go": "HybridSlowStart",
        "sent_packet_handler.go": "sentPacketHandler",
    }
    roots: ClassVar[tuple[str, ...]] = ("",)
    dirs: ClassVar[tuple[str, ...]] = ("internal/congestion", "internal/ackhandler")
    extensions: ClassVar[tuple[str, ...]] = (".go",)

    def identify(self, located: Located) -> Identity:
        """Era from the sender's API (see the module docstring), plus the features found as evidence."""
        texts = {name: located.read(name) or "" for name in ("cubic_sender.go", "sent_packet_handler.go")}
        features: dict[str, str] = {}
        for feat, fname, rx in _FEATURES:
            m = re.search(rx, texts.get(fname, ""))
            if m:
                features[feat] = f"{fname}: {m.group(0)}"
        notes: list[str] = []
        if "qlogwriter" in features or "on_spurious_loss" in features:
            era = "go-c"
        elif "on_congestion_event" in features:
            era = "go-b"
        elif "on_packet_lost" in features:
            era = "go-a"
        else:
            era = self.eras[-1]
            notes.append("no known cubicSender loss callback found; era guessed as the newest")
        go_mod = located.root / "go.mod"
        try:
            if _MODULE.search(go_mod.read_text(encoding="utf-8")):
                features["module"] = "go.mod: module github.com/quic-go/quic-go"
        except OSError:
            notes.append("no go.mod at the source root (not a module copy)")
        version = module_version(located)
        if version:
            features["version"] = version
        lo, hi = ERA_DATES[era]
        return Identity(era, self.algorithms(located), features, lo, hi, tuple(notes))


register(QuicGoTarget())
