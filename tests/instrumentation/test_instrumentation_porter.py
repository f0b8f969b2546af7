"""Porter: placement by anchors that survive churn, clean diffs, all-or-nothing output."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from instr_fixtures import cubic_edits, make_set, one_file_set, snapshot, write_tree

from quicsm.errors import PatchError
from quicsm.instrumentation import engine
from quicsm.instrumentation.patchset import load_patch_set
from quicsm.instrumentation.porter import plan_port, port

CUBIC = "quiche/quic/core/congestion_control/tcp_cubic_sender_bytes.cc"
SENTPM = "quiche/quic/core/quic_sent_packet_manager.cc"


@pytest.fixture
def old_set(tmp_path: Path):
    old = tmp_path / "old"
    paths = write_tree(old, "E")
    return load_patch_set(make_set(tmp_path / "sets", old, cubic_edits(paths), name="base-cubic"))


def _new_tree(tmp_path: Path, edit) -> Path:
    new = tmp_path / "new"
    write_tree(new, "E")
    p = new / CUBIC
    p.write_text(edit(p.read_text()))
    return new


def _port_ok(old_set, new: Path, out: Path) -> str:
    before = snapshot(new)
    res, written = port(old_set, new, out)
    assert written == out and res.ok
    assert snapshot(new) == before  # porting never touches the source tree
    ported = load_patch_set(out)
    assert ported.extra["ported_from"]["name"] == "base-cubic"
    assert {f.path for f in ported.files} == {CUBIC, SENTPM}
    for f in ported.files:
        assert f.sha256 == engine.sha256_file(new / f.path)
    assert len(ported.extra["placements"]) == 3
    engine.apply(new, sets=[ported], set_name=ported.name)
    text = (new / CUBIC).read_text()
    engine.revert(new, sets=[ported], set_name=ported.name)
    assert snapshot(new) == before
    return text


def _line_after(text: str, anchor: str) -> str:
    lines = text.splitlines()
    i = next(k for k, x in enumerate(lines) if x.strip() == anchor)
    return lines[i + 1]


def test_unrelated_lines_inserted_between_anchors(tmp_path, old_set):
    new = _new_tree(
        tmp_path,
        lambda t: t.replace(
            "  slowstart_threshold_ = congestion_window_;\n",
            '  slowstart_threshold_ = congestion_window_;\n  stats_->cwnd_cuts++;\n  MaybeTrace("loss");\n',
        ).replace("  for (const LostPacket& lost", "  OnNewEvent();\n  for (const LostPacket& lost"),
    )
    text = _port_ok(old_set, new, tmp_path / "out")
    assert "to=Recovery" in _line_after(text, "largest_sent_at_last_cutback_ = largest_sent_packet_number_;")
    assert "to=CongestionAvoidance" in _line_after(text, "ExitSlowstart();")


def test_renamed_signature_does_not_matter(tmp_path, old_set):
    new = _new_tree(
        tmp_path,
        lambda t: t.replace(
            "void TcpCubicSenderBytes::OnPacketLost(QuicPacketNumber packet_number,\n"
            "                                       QuicByteCount prior_in_flight) {",
            "void TcpCubicSenderBytes::OnPacketLost(QuicPacketNumber packet_number, QuicByteCount prior_in_flight,\n"
            "                                       QuicByteCount lost_bytes) {",
        ),
    )
    text = _port_ok(old_set, new, tmp_path / "out")
    assert "to=Recovery" in _line_after(text, "largest_sent_at_last_cutback_ = largest_sent_packet_number_;")


def test_reindented_block_gets_reindented_lines(tmp_path, old_set):
    def wrap(t: str) -> str:
        return t.replace(
            "  if (rtt_updated && InSlowStart() && hybrid_slow_start_.ShouldExit()) {\n    ExitSlowstart();\n  }\n",
            "  if (enabled_) {\n    if (rtt_updated && InSlowStart() &&\n"
            "        hybrid_slow_start_.ShouldExit()) {\n      ExitSlowstart();\n    }\n  }\n",
        )

    new = _new_tree(tmp_path, wrap)
    text = _port_ok(old_set, new, tmp_path / "out")
    nxt = _line_after(text, "ExitSlowstart();")
    assert "to=CongestionAvoidance" in nxt and nxt.startswith("      QUIC_LOG")


def test_deleted_anchor_is_reported_and_nothing_written(tmp_path, old_set):
    new = _new_tree(
        tmp_path,
        lambda t: t.replace(
            "  slowstart_threshold_ = congestion_window_;\n  largest_sent_at_last_cutback_ = largest_sent_packet_number_;\n"
            '  QUIC_DVLOG(1) << "Incoming loss; congestion window: " << congestion_window_;\n',
            "  Cut();\n",
        ),
    )
    res = plan_port(old_set, new)
    assert not res.ok
    assert any(f.file == CUBIC and f.hunk for f in res.failures)
    assert all(f.reason for f in res.failures)
    out = tmp_path / "out"
    with pytest.raises(PatchError, match="cannot port.*Nothing was written"):
        port(old_set, new, out)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


def test_include_lines_are_respelled_for_the_new_era(tmp_path):
    old = tmp_path / "old"
    paths = write_tree(old, "D")
    edits = cubic_edits(paths)
    edits[paths["tcp_cubic_sender_bytes.cc"]].append(
        ('#include "quic/platform/api/quic_logging.h"', ['#include "quic/platform/api/quic_flags.h"'])
    )
    ps = load_patch_set(make_set(tmp_path / "sets", old, edits, name="d-cubic", era="D", date="2021-06-01"))
    new = tmp_path / "new"
    write_tree(new, "E")
    res = plan_port(ps, new)
    assert res.ok, res.failures
    assert '+#include "quiche/quic/platform/api/quic_flags.h"' in res.diff
    assert res.detection.identity.era == "E"
    assert f"+++ b/{CUBIC}" in res.diff


def test_existing_output_is_refused_without_force(tmp_path, old_set):
    new = _new_tree(tmp_path, lambda t: t)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep").write_text("x")
    with pytest.raises(PatchError, match="already exists"):
        port(old_set, new, out)
    assert (out / "keep").read_text() == "x"
    port(old_set, new, out, force=True)
    assert not (out / "keep").exists() and (out / "manifest.json").exists()


def test_modified_line_edit_is_carried_over(tmp_path):
    old = tmp_path / "old"
    paths = write_tree(old, "E")
    rel = paths["tcp_cubic_sender_bytes.cc"]
    text = (old / rel).read_text()
    line = '  QUIC_DVLOG(1) << "Incoming loss; congestion window: " << congestion_window_;\n'
    new_text = text.replace(line, line.replace("QUIC_DVLOG(1)", "QUIC_VLOG(1)"))
    ps = load_patch_set(one_file_set(tmp_path / "sets", rel, text, new_text, name="raise", algorithm="cubic"))
    new = tmp_path / "new"
    write_tree(new, "E")
    (new / rel).write_text((new / rel).read_text().replace("congestion window: ", "cwnd: "))
    res = plan_port(ps, new)
    assert res.ok, res.failures
    assert '+  QUIC_VLOG(1) << "Incoming loss; cwnd: " << congestion_window_;' in res.diff


TWO_SITES = """// Synthetic sender written for quicsm tests.
#include "quiche/quic/core/congestion_control/bbr2_sender.h"

namespace quic {{

void Bbr2Sender::OnCongestionEvent(QuicTime event_time) {{
  while (true) {{
    Bbr2Mode next_mode = BBR2_MODE_DISPATCH(OnCongestionEvent(event_time));
    if (next_mode == mode_) {{
      break;
    }}
    BBR2_MODE_DISPATCH(Leave(event_time, &congestion_event));
    mode_ = next_mode;
    BBR2_MODE_DISPATCH(Enter(event_time, &congestion_event));
    --mode_changes_allowed;
  }}
}}
{quiescence}
void Bbr2Sender::OnApplicationLimited(QuicByteCount bytes_in_flight) {{
  model_.OnApplicationLimited();
}}

}}  // namespace quic
"""
QUIESCENCE = """
void Bbr2Sender::OnExitQuiescence(QuicTime now) {
  if (now > last_quiescence_start_) {
    Bbr2Mode next_mode = BBR2_MODE_DISPATCH(OnExitQuiescence(now));
    if (next_mode != mode_) {
      BBR2_MODE_DISPATCH(Leave(now, nullptr));
      mode_ = next_mode;
      BBR2_MODE_DISPATCH(Enter(now, nullptr));
    }
    last_quiescence_start_ = QuicTime::Zero();
  }
}
"""


def _bbr2_set(tmp_path: Path) -> tuple:
    old = tmp_path / "old"
    rel = "quiche/quic/core/congestion_control/bbr2_sender.cc"
    (old / rel).parent.mkdir(parents=True)
    (old / rel).write_text(TWO_SITES.format(quiescence=QUIESCENCE))
    text = (old / rel).read_text()
    new_text = text.replace("    mode_ = next_mode;\n", "    mode_ = next_mode;\n    LogModeChange();\n", 1)
    new_text = new_text.replace("      mode_ = next_mode;\n", "      mode_ = next_mode;\n      LogQuiescenceExit();\n")
    d = one_file_set(tmp_path / "sets", rel, text, new_text, name="bbr2-two", algorithm="bbr2")
    return load_patch_set(d), rel


def test_change_whose_function_is_gone_is_not_put_beside_a_lookalike(tmp_path):
    ps, rel = _bbr2_set(tmp_path)
    assert len(ps.file_patches[0].hunks) == 2
    new = tmp_path / "new"
    (new / rel).parent.mkdir(parents=True)
    (new / rel).write_text(TWO_SITES.format(quiescence=""))  # an older version: no OnExitQuiescence yet
    res = plan_port(ps, new)
    assert not res.ok
    assert [f.hunk for f in res.failures] == [2]
    assert "seems gone" in res.failures[0].reason or "set this change apart" in res.failures[0].reason


def test_both_sites_placed_when_both_exist(tmp_path):
    ps, rel = _bbr2_set(tmp_path)
    new = tmp_path / "new"
    (new / rel).parent.mkdir(parents=True)
    (new / rel).write_text(
        TWO_SITES.format(quiescence=QUIESCENCE.replace("now > last_quiescence_start_", "now >= last_quiescence_start_"))
    )
    res = plan_port(ps, new)
    assert res.ok, res.failures
    placed = res.placed[rel].decode()
    assert placed.index("LogModeChange();") < placed.index("void Bbr2Sender::OnExitQuiescence")
    assert placed.index("LogQuiescenceExit();") > placed.index("void Bbr2Sender::OnExitQuiescence")


def _one_file_set(tmp_path: Path, rel: str, old_text: str, new_text: str, name: str = "one"):
    return load_patch_set(one_file_set(tmp_path / "sets", rel, old_text, new_text, name=name))


BBR = "quiche/quic/core/congestion_control/bbr_sender.cc"
FUNCS = """// Synthetic sender written for quicsm tests.
namespace quic {{

BbrSender::BbrSender(QuicTime now, const RttStats* rtt_stats)
    : rtt_stats_(rtt_stats),
      mode_(STARTUP){ctor_tail}

BbrSender::~BbrSender() {{}}

void BbrSender::OnCongestionEvent(QuicTime event_time) {{
  UpdateRoundTripCounter(event_time);
  MaybeExitStartupOrDrain(event_time);
{tail}}}

void BbrSender::OnApplicationLimited(QuicByteCount bytes_in_flight) {{
  if (bytes_in_flight >= GetCongestionWindow()) {{
    return;
  }}
  sampler_.OnAppLimited();
}}

}}  // namespace quic
"""


def _write(root: Path, text: str) -> Path:
    (root / BBR).parent.mkdir(parents=True, exist_ok=True)
    (root / BBR).write_text(text)
    return root


def test_end_of_function_is_found_when_its_last_lines_changed(tmp_path):
    old = FUNCS.format(ctor_tail=" {}", tail="  if (is_round_start) {\n    num_loss_events_ = 0;\n  }\n")
    new = old.replace(
        "    num_loss_events_ = 0;\n  }\n}", "    num_loss_events_ = 0;\n  }\n  QuicsmLog(event_time);\n}"
    )
    ps = _one_file_set(tmp_path, BBR, old, new)
    # an older version: the function ended differently, the anchors above the change are gone
    tree = _write(tmp_path / "t", FUNCS.format(ctor_tail=" {}", tail="  sampler_.RemoveObsoletePackets();\n"))
    res = plan_port(ps, tree)
    assert res.ok, res.failures
    placed = res.placed[BBR].decode()
    assert "  sampler_.RemoveObsoletePackets();\n  QuicsmLog(event_time);\n}\n" in placed
    assert res.placements[0].function == "OnCongestionEvent"


def test_definition_between_functions_stays_at_file_scope(tmp_path):
    old = FUNCS.format(ctor_tail=" {}", tail="")
    helper = "// quicsm helper\nvoid BbrSender::QuicsmLog(QuicTime now) {\n  QUIC_LOG(INFO) << now;\n}\n\n"
    new = old.replace("}  // namespace quic", helper + "}  // namespace quic")
    ps = _one_file_set(tmp_path, BBR, old, new)
    extra = "void BbrSender::SetStreamNotifier(Notifier* n) {\n  notifier_ = n;\n}\n\n"
    tree = _write(
        tmp_path / "t",
        FUNCS.format(ctor_tail=" {}", tail="").replace("}  // namespace quic", extra + "}  // namespace quic"),
    )
    res = plan_port(ps, tree)
    assert res.ok, res.failures
    placed = res.placed[BBR].decode()
    assert "  notifier_ = n;\n}\n" in placed  # the new upstream function is intact
    assert res.placements[0].function is None


def test_one_line_body_expanded_even_when_the_last_initializer_changed(tmp_path):
    old = FUNCS.format(ctor_tail=",\n      no_prr_(false) {}", tail="")
    new = old.replace("      no_prr_(false) {}", "      no_prr_(false) {\n  QuicsmLog(now);\n}")
    ps = _one_file_set(tmp_path, BBR, old, new)
    tree = _write(tmp_path / "t", FUNCS.format(ctor_tail=",\n      slow_start_(false) {}", tail=""))
    res = plan_port(ps, tree)
    assert res.ok, res.failures
    assert "      slow_start_(false) {\n  QuicsmLog(now);\n}\n" in res.placed[BBR].decode()


def test_cli_port_by_algorithm_falls_back_to_the_next_set(tmp_path):
    from click.testing import CliRunner

    from quicsm.cli.main import cli

    base = FUNCS.format(ctor_tail=" {}", tail="")
    with_q = base.replace("  sampler_.OnAppLimited();\n", "  sampler_.OnAppLimited();\n  MaybeQuiesce();\n")
    # set A (newer) needs MaybeQuiesce(), which the tree lacks; set B (older) does not
    ps_a = _one_file_set(
        tmp_path, BBR, with_q, with_q.replace("  MaybeQuiesce();\n", "  MaybeQuiesce();\n  QuicsmLog(0);\n"), "set-a"
    )
    ps_b = _one_file_set(
        tmp_path,
        BBR,
        base,
        base.replace(
            "  MaybeExitStartupOrDrain(event_time);\n",
            "  MaybeExitStartupOrDrain(event_time);\n  QuicsmLog(event_time);\n",
        ),
        "set-b",
    )
    tree = _write(
        tmp_path / "t",
        base.replace("  UpdateRoundTripCounter(event_time);\n", "  UpdateRoundTripCounter(event_time);\n  Sample();\n"),
    )
    out = tmp_path / "ported"
    res, written = port([ps_a, ps_b], tree, out)
    assert res.source.name == "set-b" and written == out
    assert load_patch_set(out).extra["ported_from"]["name"] == "set-b"
    r = CliRunner().invoke(
        cli, ["patch", "port", str(tree), "--from", str(tmp_path / "sets/set-a"), "-o", str(tmp_path / "x")]
    )
    assert r.exit_code != 0 and "cannot place" in r.output and not (tmp_path / "x").exists()


def test_target_check_can_veto_a_port(tmp_path, old_set, monkeypatch):
    from quicsm.instrumentation.targets import get_target

    new = _new_tree(tmp_path, lambda t: t)
    target = get_target("quiche")
    monkeypatch.setattr(
        type(target),
        "check_ported",
        lambda self, path, text, added: (
            ["uses `time.` but does not import it"] if path.endswith("tcp_cubic_sender_bytes.cc") else []
        ),
    )
    res = plan_port(old_set, new)
    assert not res.ok and "does not import" in res.failures[0].reason
    with pytest.raises(PatchError):
        port(old_set, new, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_porting_onto_an_already_patched_tree_is_refused(tmp_path, old_set):
    new = _new_tree(
        tmp_path, lambda t: t.replace("  for (const LostPacket& lost", "  Tick();\n  for (const LostPacket& lost")
    )
    _, out = port(old_set, new, tmp_path / "p1")
    engine.apply(new, sets=[load_patch_set(out)], set_name=load_patch_set(out).name)
    again = plan_port(old_set, new)
    assert not again.ok and any("already" in f.reason for f in again.failures)


FOREIGN = [
    "  stats_->ticks++;",
    '  QUIC_DVLOG(3) << "tick";',
    "  if (paused_) {",
    "    return;",
    "  }",
    "  MaybeUpdateRtt(now);",
    "  // upstream comment",
    "",
    "  const bool x = IsCwndLimited(0);",
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(FOREIGN)), min_size=1, max_size=6))
def test_random_upstream_insertions_never_misplace(tmp_path_factory, inserts):
    """Unrelated upstream lines anywhere: each change still follows its anchor line, or the port fails."""
    tmp = tmp_path_factory.mktemp("fuzz")
    old = tmp / "old"
    paths = write_tree(old, "E")
    ps = load_patch_set(make_set(tmp / "sets", old, cubic_edits(paths), name="fz"))
    new = tmp / "new"
    write_tree(new, "E")
    p = new / CUBIC
    lines = p.read_text().splitlines()
    body = [i for i, x in enumerate(lines) if x.startswith("  ")]  # inside function bodies only
    for pos, text in inserts:
        at = body[pos % len(body)] + 1
        lines.insert(at, text if text.strip() != "}" else "  {}")
        body = [i for i, x in enumerate(lines) if x.startswith("  ")]
    p.write_text("\n".join(lines) + "\n")
    res = plan_port(ps, new)
    if not res.ok:
        assert all(f.reason for f in res.failures)
        return
    placed = res.placed[CUBIC].decode().splitlines()
    for anchor, marker in (
        ("ExitSlowstart();", "to=CongestionAvoidance"),
        ("largest_sent_at_last_cutback_ = largest_sent_packet_number_;", "to=Recovery"),
    ):
        i = next(k for k, x in enumerate(placed) if marker in x)
        assert placed[i - 1].strip() == anchor, (anchor, placed[i - 2 : i + 1])
