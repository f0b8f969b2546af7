"""Google QUIC: the google/quiche repository and the Chromium ``src/`` trees it grew out of.

Both share the sender code, so one module holds the era knowledge (reference: chromium-cc-lineage.md
§1, §4.1, §6) and registers two targets: ``quiche`` (quiche repo root, or ``net/third_party/quiche/src``
inside a modern Chromium checkout; eras D, E) and ``chromium`` (Chromium ``src/`` with ``net/quic``,
``net/quic/core`` or ``net/third_party/quic``; eras A, B, C).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import ClassVar

from quicsm.instrumentation.targets import Identity, Located, Target, register

__all__ = ["ERA_DATES", "ChromiumTarget", "GoogleQuicTarget", "QuicheTarget", "identify_google_quic"]

ERA_DATES: dict[str, tuple[str, str]] = {
    "A": ("2014-01-01", "2016-08-03"),
    "B": ("2016-08-04", "2018-06-30"),
    "C": ("2018-01-01", "2019-03-06"),
    "D": ("2019-03-07", "2022-04-07"),
    "E": ("2022-04-07", "9999-12-31"),
}
"""Era -> the dates it can cover (reference §1.1; B/C overlap because Chromium milestones overlap)."""

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
_QUIC_PREFIX = re.compile(r"^(.*?)(?:core|platform)/")

# (feature, file name or "*" for any sender file, regex, date_from, date_to) -- reference §1.2, §3, §4
_FEATURES: tuple[tuple[str, str, str, str, str], ...] = (
    ("probe_phase_enum", "bbr2_probe_bw.cc", r"\bProbePhase::", "2026-04-16", ""),
    ("cycle_phase_enum", "bbr2_probe_bw.cc", r"\bCyclePhase::", "", "2026-04-15"),
    ("ecn_counts", "*", r"\bnum_ect\b", "2023-03-21", ""),
    ("packet_number_class", "*", r"\.IsInitialized\(\)", "2019-03-01", ""),
    ("tlp_mode", "quic_sent_packet_manager.cc", r"\bTLP_MODE\b", "", "2022-04-30"),
    ("pto_mode", "quic_sent_packet_manager.cc", r"\bPTO_MODE\b", "2019-08-15", ""),
    ("exit_quiescence", "bbr2_sender.cc", r"\bOnExitQuiescence\b", "2020-03-02", ""),
    ("enter_startup_now", "bbr_sender.cc", r"EnterStartupMode\(\s*(?:QuicTime\s+)?now\s*\)", "2019-04-01", ""),
    ("quic_logging_macros", "*", r"\bQUIC_DVLOG\(", "2017-01-19", ""),
    ("recovery_state", "bbr_sender.cc", r"\bCONSERVATION\b", "2016-11-21", ""),
)
_FILE_FEATURES: tuple[tuple[str, str, str, str], ...] = (
    ("bbr3_sender", "bbr3_sender.cc", "2026-04-17", ""),
    ("bbr2_sender", "bbr2_sender.cc", "2019-07-23", ""),
    ("bbr_sender", "bbr_sender.cc", "2016-10-19", ""),
    ("cubic_sender_base", "tcp_cubic_sender_base.cc", "", "2018-06-30"),
)


def _include_era(includes: list[str]) -> tuple[str, str, str, str] | None:
    """(era, evidence, date_from, date_to) from how the quic headers are spelled in ``#include``."""
    rules = (
        ("quiche/quic/", "E", "2022-04-07", ""),
        ("quiche/common/", "E", "2022-04-07", ""),
        ("net/third_party/quiche/src/", "D", "2019-03-07", "2020-12-29"),
        ("net/third_party/quic/", "C", "", ""),
        ("net/quic/core/", "B", "", ""),
        ("net/quic/platform/", "B", "", ""),
        ("net/quic/", "A", "", ""),
        ("quic/core/", "D", "2020-12-29", "2022-04-07"),
        ("quic/platform/", "D", "2020-12-29", "2022-04-07"),
        ("common/platform/", "D", "2020-12-29", "2022-04-07"),
    )
    for prefix, era, lo, hi in rules:
        for inc in includes:
            if inc.startswith(prefix):
                return era, f'#include "{inc}"', lo, hi
    return None


def identify_google_quic(located: Located, algorithms: tuple[str, ...], default_era: str) -> Identity:
    """Era, features and date range of a Google QUIC tree, from the text of its sender files."""
    texts = {name: located.read(name) or "" for name in located.files if name in _SENDER_NAMES}
    senders = texts
    includes = [inc for t in senders.values() for inc in _INCLUDE.findall(t)]
    features: dict[str, str] = {}
    lo, hi = "0000-00-00", "9999-12-31"
    notes: list[str] = []
    era_hit = _include_era(includes)
    if era_hit is not None:
        era, evidence, elo, ehi = era_hit
        features["include_spelling"] = evidence
    else:
        era, elo, ehi = default_era, "", ""
        notes.append("no quic #include found; era guessed from the namespace and directory names")
        ns_quic = any(re.search(r"^namespace quic \{", t, re.MULTILINE) for t in senders.values())
        if any("/core/" in rel for rel in located.files.values()) and ns_quic:
            era = "D" if any(rel.startswith("quic/") for rel in located.files.values()) else "E"
    era_lo, era_hi = ERA_DATES.get(era, ("", ""))
    lo, hi = max(lo, era_lo, elo or lo), min(hi, era_hi or hi, ehi or hi)
    ns = {m for t in senders.values() for m in re.findall(r"^namespace (\w+) \{", t, re.MULTILINE)}
    if ns:
        features["namespace"] = ",".join(sorted(ns))
    for feat, fname, rx, flo, fhi in _FEATURES:
        pool = senders.items() if fname == "*" else [(fname, texts.get(fname, ""))]
        for name, text in pool:
            m = re.search(rx, text)
            if m:
                features[feat] = f"{name}: {m.group(0)}"
                lo, hi = max(lo, flo or lo), min(hi, fhi or hi)
                break
    for feat, fname, flo, fhi in _FILE_FEATURES:
        if fname in located.files:
            features[feat] = fname
            lo, hi = max(lo, flo or lo), min(hi, fhi or hi)
    if lo > hi:
        notes.append(f"features disagree on the date ({lo} > {hi}); trusting the include spelling")
        lo, hi = era_lo, era_hi
    return Identity(era, algorithms, features, lo, hi, tuple(notes))


_SENDER_NAMES = frozenset(
    {
        "tcp_cubic_sender_bytes.cc",
        "tcp_cubic_sender_base.cc",
        "tcp_cubic_sender_packets.cc",
        "tcp_cubic_sender.cc",
        "tcp_cubic_bytes_sender.cc",
        "bbr_sender.cc",
        "bbr2_sender.cc",
        "bbr2_probe_bw.cc",
        "bbr2_startup.cc",
        "bbr2_drain.cc",
        "bbr2_probe_rtt.cc",
        "bbr2_misc.cc",
        "bbr3_sender.cc",
        "quic_sent_packet_manager.cc",
        "send_algorithm_interface.cc",
    }
)


class GoogleQuicTarget(Target):
    """Shared logic of the quiche and Chromium targets (same files, same language, same eras)."""

    classes: ClassVar[Mapping[str, str]] = {
        "tcp_cubic_sender_bytes.cc": "TcpCubicSenderBytes",
        "tcp_cubic_sender_bytes.h": "TcpCubicSenderBytes",
        "tcp_cubic_sender_base.cc": "TcpCubicSenderBase",
        "tcp_cubic_sender_base.h": "TcpCubicSenderBase",
        "tcp_cubic_sender_packets.cc": "TcpCubicSenderPackets",
        "tcp_cubic_sender.cc": "TcpCubicSender",
        "tcp_cubic_bytes_sender.cc": "TcpCubicBytesSender",
        "bbr_sender.cc": "BbrSender",
        "bbr_sender.h": "BbrSender",
        "bbr2_sender.cc": "Bbr2Sender",
        "bbr2_sender.h": "Bbr2Sender",
        "bbr2_misc.cc": "Bbr2NetworkModel",
        "bbr2_misc.h": "Bbr2NetworkModel",
        "bbr2_startup.cc": "Bbr2StartupMode",
        "bbr2_drain.cc": "Bbr2DrainMode",
        "bbr2_probe_bw.cc": "Bbr2ProbeBwMode",
        "bbr2_probe_bw.h": "Bbr2ProbeBwMode",
        "bbr2_probe_rtt.cc": "Bbr2ProbeRttMode",
        "bbr3_sender.cc": "Bbr3Sender",
        "bbr3_sender.h": "Bbr3Sender",
        "quic_sent_packet_manager.cc": "QuicSentPacketManager",
        "quic_sent_packet_manager.h": "QuicSentPacketManager",
        "send_algorithm_interface.cc": "SendAlgorithmInterface",
        "pacing_sender.cc": "PacingSender",
        "hybrid_slow_start.cc": "HybridSlowStart",
    }
    algorithm_files: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "cubic": ("tcp_cubic_sender_bytes.cc", "quic_sent_packet_manager.cc"),
        "reno": ("tcp_cubic_sender_bytes.cc", "quic_sent_packet_manager.cc"),
        "bbr": ("bbr_sender.cc",),
        "bbr2": ("bbr2_sender.cc", "bbr2_probe_bw.cc"),
        "bbr3": ("bbr3_sender.cc",),
    }
    default_era: ClassVar[str] = "E"

    def algorithms(self, located: Located) -> tuple[str, ...]:
        algos = list(super().algorithms(located))
        if "cubic" not in algos and any(
            n in located.files for n in ("tcp_cubic_sender_base.cc", "tcp_cubic_sender.cc", "tcp_cubic_bytes_sender.cc")
        ):
            algos[:0] = ["cubic", "reno"]
        return tuple(algos)

    def identify(self, located: Located) -> Identity:
        return identify_google_quic(located, self.algorithms(located), self.default_era)

    def adapt_added_lines(self, lines: list[str], old: Identity | None, new: Identity) -> list[str]:
        """Respell added ``#include`` lines for the new tree and follow the CyclePhase -> ProbePhase rename."""
        new_prefix = _quic_prefix(new)
        out = []
        for line in lines:
            m = _INCLUDE.match(line)
            if m and new_prefix is not None:
                out.append(line.replace(m.group(1), _respell(m.group(1), new_prefix)))
                continue
            if "probe_phase_enum" in new.features:
                line = line.replace("CyclePhaseToString", "ProbePhaseToString").replace("CyclePhase::", "ProbePhase::")
            elif "cycle_phase_enum" in new.features:
                line = line.replace("ProbePhaseToString", "CyclePhaseToString").replace("ProbePhase::", "CyclePhase::")
            out.append(line)
        return out


def _quic_prefix(ident: Identity) -> str | None:
    """The text before ``core/``/``platform/`` in this tree's quic includes (``quiche/quic/``, ``quic/``...)."""
    ev = ident.features.get("include_spelling", "")
    m = re.search(r'"([^"]+)"', ev)
    if not m:
        return None
    pm = _QUIC_PREFIX.match(m.group(1))
    return pm.group(1) if pm else None


def _respell(include: str, new_prefix: str) -> str:
    """Map a quic/quiche include path onto the new tree's prefix; leave system/other includes alone."""
    for old_common in ("quiche/common/", "net/third_party/quiche/src/common/", "common/"):
        if include.startswith(old_common) and new_prefix.endswith("quic/"):
            return new_prefix[: -len("quic/")] + "common/" + include[len(old_common) :]
    pm = _QUIC_PREFIX.match(include)
    if pm and (pm.group(1).endswith("quic/") or pm.group(1) == "net/quic/"):
        return new_prefix + include[len(pm.group(1)) :]
    return include


class QuicheTarget(GoogleQuicTarget):
    name: ClassVar[str] = "quiche"
    description: ClassVar[str] = "google/quiche repository (also net/third_party/quiche/src in Chromium)"
    eras: ClassVar[tuple[str, ...]] = ("D", "E")
    roots: ClassVar[tuple[str, ...]] = ("", "net/third_party/quiche/src", "src/net/third_party/quiche/src")
    dirs: ClassVar[tuple[str, ...]] = (
        "quiche/quic/core/congestion_control",
        "quiche/quic/core",
        "quic/core/congestion_control",
        "quic/core",
    )


class ChromiumTarget(GoogleQuicTarget):
    name: ClassVar[str] = "chromium"
    description: ClassVar[str] = "Chromium src/ before quiche (net/quic, net/quic/core, net/third_party/quic)"
    eras: ClassVar[tuple[str, ...]] = ("A", "B", "C")
    default_era: ClassVar[str] = "B"
    roots: ClassVar[tuple[str, ...]] = ("", "src")
    dirs: ClassVar[tuple[str, ...]] = (
        "net/third_party/quic/core/congestion_control",
        "net/third_party/quic/core",
        "net/quic/core/congestion_control",
        "net/quic/core",
        "net/quic/congestion_control",
        "net/quic",
    )


register(QuicheTarget())
register(ChromiumTarget())
