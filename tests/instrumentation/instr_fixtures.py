"""Small synthetic sender trees and patch sets for the instrumentation tests (no upstream code)."""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import traceback
from pathlib import Path

CC = "congestion_control"

PREFIX = {  # era -> (directory of the CC files, include prefix of that directory, namespace)
    "E": ("quiche/quic/core", "quiche/quic/core/", "quic"),
    "D": ("quic/core", "quic/core/", "quic"),
    "D-early": ("quic/core", "net/third_party/quiche/src/quic/core/", "quic"),
    "C": ("net/third_party/quic/core", "net/third_party/quic/core/", "quic"),
    "B": ("net/quic/core", "net/quic/core/", "net"),
    "A": ("net/quic", "net/quic/", "net"),
}


def _core(inc: str) -> str:
    return inc


def _logging(inc: str) -> str:
    # era A used Chromium's base logging; later eras the quic platform header next to core/
    return "base/logging.h" if inc == "net/quic/" else inc[: -len("core/")] + "platform/api/quic_logging.h"


def cubic_source(inc: str, ns: str, *, extra_fn: str = "") -> str:
    return f"""// Synthetic sender written for quicsm tests.
#include "{_core(inc)}congestion_control/tcp_cubic_sender_bytes.h"

#include "{_logging(inc)}"

namespace {ns} {{

void TcpCubicSenderBytes::OnCongestionEvent(bool rtt_updated,
                                            QuicByteCount prior_in_flight) {{
  if (rtt_updated && InSlowStart() && hybrid_slow_start_.ShouldExit()) {{
    ExitSlowstart();
  }}
  for (const LostPacket& lost : lost_packets) {{
    OnPacketLost(lost.packet_number, prior_in_flight);
  }}
}}
{extra_fn}
void TcpCubicSenderBytes::OnPacketLost(QuicPacketNumber packet_number,
                                       QuicByteCount prior_in_flight) {{
  if (packet_number <= largest_sent_at_last_cutback_) {{
    return;
  }}
  congestion_window_ = congestion_window_ * kRenoBeta;
  slowstart_threshold_ = congestion_window_;
  largest_sent_at_last_cutback_ = largest_sent_packet_number_;
  QUIC_DVLOG(1) << "Incoming loss; congestion window: " << congestion_window_;
}}

void TcpCubicSenderBytes::MaybeIncreaseCwnd(QuicByteCount prior_in_flight) {{
  if (!IsCwndLimited(prior_in_flight)) {{
    cubic_.OnApplicationLimited();
    return;
  }}
  if (congestion_window_ >= max_congestion_window_) {{
    return;
  }}
  congestion_window_ += kDefaultTCPMSS;
}}

}}  // namespace {ns}
"""


def bbr_source(inc: str, ns: str, phase: str = "CyclePhase") -> str:
    return f"""// Synthetic sender written for quicsm tests.
#include "{_core(inc)}congestion_control/bbr_sender.h"

namespace {ns} {{

void BbrSender::MaybeExitStartupOrDrain(QuicTime now) {{
  if (mode_ == STARTUP && is_at_full_bandwidth_) {{
    OnExitStartup(now);
    mode_ = DRAIN;
    pacing_gain_ = drain_gain_;
  }}
  if (mode_ == DRAIN && bytes_in_flight_ <= target_) {{
    EnterProbeBandwidthMode(now);
  }}
}}

void BbrSender::EnterProbeBandwidthMode(QuicTime now) {{
  mode_ = PROBE_BW;
  congestion_window_gain_ = congestion_window_gain_constant_;
  last_cycle_start_ = now;
}}

void Bbr2ProbeBwMode::EnterProbeUp(QuicTime now) {{
  cycle_.phase = {phase}::PROBE_UP;
  cycle_.rounds_in_phase = 0;
}}

}}  // namespace {ns}
"""


def sentpm_source(inc: str, ns: str) -> str:
    return f"""// Synthetic sent packet manager written for quicsm tests.
#include "{_core(inc)}quic_sent_packet_manager.h"

namespace {ns} {{

void QuicSentPacketManager::OnRetransmissionTimeout() {{
  switch (GetRetransmissionMode()) {{
    case HANDSHAKE_MODE:
      ++stats_->crypto_retransmit_count;
      return;
    case PTO_MODE:
      ++consecutive_pto_count_;
      pending_timer_transmission_count_ = 1;
      return;
  }}
}}

}}  // namespace {ns}
"""


def write_tree(root: Path, era: str = "E", *, phase: str = "CyclePhase") -> dict[str, str]:
    """A tree in the upstream layout of ``era``; returns file name -> relative path."""
    d, inc, ns = PREFIX[era]
    files = {
        "tcp_cubic_sender_bytes.cc": (f"{d}/{CC}/tcp_cubic_sender_bytes.cc", cubic_source(inc, ns)),
        "bbr_sender.cc": (f"{d}/{CC}/bbr_sender.cc", bbr_source(inc, ns, phase)),
        "quic_sent_packet_manager.cc": (f"{d}/quic_sent_packet_manager.cc", sentpm_source(inc, ns)),
    }
    out = {}
    for name, (rel, text) in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
        out[name] = rel
    return out


LOG = '{ind}QUIC_LOG(INFO) << "QUICSM v=1 conn=" << this << " t_us=0 cc={cc} from=- to={to}";'


def insert_after(text: str, anchor: str, new_lines: list[str]) -> str:
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.strip() == anchor:
            ind = line[: len(line) - len(line.lstrip())]
            return "".join(lines[: i + 1] + [ind + x + "\n" for x in new_lines] + lines[i + 1 :])
    raise AssertionError(f"anchor {anchor!r} not in text")


def udiff(old: str, new: str, rel: str) -> str:
    body = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{rel}", f"b/{rel}"))
    return f"diff --git a/{rel} b/{rel}\n" + body


def make_set(
    dest: Path,
    root: Path,
    edits: dict[str, list[tuple[str, list[str]]]],
    *,
    name: str = "test-cubic",
    target: str = "quiche",
    algorithm: str = "cubic",
    era: str = "E",
    date: str = "2024-01-02",
    diff_override: str | None = None,
    manifest_patch: dict | None = None,
) -> Path:
    """A patch set made against ``root``: ``edits`` maps relative path -> [(anchor line, lines to insert)]."""
    diff = ""
    files = []
    for rel, ins in edits.items():
        old = (root / rel).read_text()
        new = old
        for anchor, lines in ins:
            new = insert_after(new, anchor, lines)
        diff += udiff(old, new, rel)
        files.append({"path": rel, "sha256": hashlib.sha256(old.encode()).hexdigest()})
    d = dest / name
    d.mkdir(parents=True)
    manifest = {
        "name": name,
        "target": target,
        "algorithm": algorithm,
        "era": era,
        "description": "test set",
        "upstream": {"repository": "example/test", "commit": "0" * 40, "date": date, "path_root": ""},
        "files": files,
        "states": ["SlowStart", "CongestionAvoidance"],
        "runtime": "--v=1",
        "validated": {"how": "made by the test", "date": "2026-11-22"},
    }
    manifest.update(manifest_patch or {})
    (d / "manifest.json").write_text(json.dumps(manifest, indent=1))
    (d / "changes.diff").write_text(diff_override if diff_override is not None else diff)
    return d


def cubic_edits(paths: dict[str, str]) -> dict[str, list[tuple[str, list[str]]]]:
    return {
        paths["tcp_cubic_sender_bytes.cc"]: [
            ("ExitSlowstart();", [LOG.format(ind="", cc="cubic", to="CongestionAvoidance")]),
            (
                "largest_sent_at_last_cutback_ = largest_sent_packet_number_;",
                [LOG.format(ind="", cc="cubic", to="Recovery")],
            ),
        ],
        paths["quic_sent_packet_manager.cc"]: [
            ("++consecutive_pto_count_;", [LOG.format(ind="", cc="cubic", to="ProbeTimeout")]),
        ],
    }


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def one_file_set(
    dest: Path, rel: str, old_text: str, new_text: str, *, name: str = "one", algorithm: str = "bbr"
) -> Path:
    """A one-file patch set turning ``old_text`` into ``new_text`` at ``rel``; returns its directory."""
    d = dest / name
    d.mkdir(parents=True)
    (d / "changes.diff").write_text(udiff(old_text, new_text, rel))
    (d / "manifest.json").write_text(
        json.dumps(
            {
                "name": name,
                "target": "quiche",
                "algorithm": algorithm,
                "era": "E",
                "description": "test set",
                "upstream": {"repository": "example/test", "commit": "3" * 40, "date": "2024-01-01"},
                "files": [{"path": rel, "sha256": hashlib.sha256(old_text.encode()).hexdigest()}],
                "states": ["Startup"],
                "runtime": "--v=1",
                "validated": {"how": "made by the test"},
            }
        )
    )
    return d


def killed_at_step(op: str, root: Path, sets: list, fault_after: int) -> tuple[int, str]:
    """Run ``engine.<op>`` in a forked child that SIGKILLs itself after its ``fault_after``-th step: a real
    kill of a real process, without an interpreter start per kill point. Returns (status, child's error):
    status is the negative signal number when killed, else the exit code (3 when the op raised)."""
    from quicsm.instrumentation import engine, journal

    err = root.parent / f"{root.name}.err"
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            os.environ[journal.FAULT_ENV] = str(fault_after)
            journal._steps = 0
            getattr(engine, op)(root, sets=sets)
        except BaseException:
            err.write_text(traceback.format_exc())
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    return code, err.read_text() if err.exists() else ""
