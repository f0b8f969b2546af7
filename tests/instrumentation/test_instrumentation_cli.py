"""``quicsm patch`` end to end through click's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from instr_fixtures import cubic_edits, make_set, snapshot, write_tree

from quicsm.cli.main import cli


def _setup(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    root = tmp_path / "src"
    paths = write_tree(root, "E")
    d = make_set(tmp_path / "sets", root, cubic_edits(paths))
    return root, d, paths


def test_cli_apply_status_revert_cycle(tmp_path: Path) -> None:
    root, d, _ = _setup(tmp_path)
    before = snapshot(root)
    r = CliRunner()
    res = r.invoke(cli, ["patch", "check", str(root), "--set", str(d)])
    assert res.exit_code == 0 and "applies cleanly" in res.output
    res = r.invoke(cli, ["patch", "apply", str(root), "--set", str(d)])
    assert res.exit_code == 0 and "applied test-cubic" in res.output
    res = r.invoke(cli, ["patch", "apply", str(root), "--set", str(d)])
    assert res.exit_code == 0 and "already applied" in res.output
    res = r.invoke(cli, ["patch", "status", str(root), "--json"])
    rows = json.loads(res.output)
    assert {row["status"] for row in rows} == {"patched"} and len(rows) == 2
    res = r.invoke(cli, ["patch", "revert", str(root)])
    assert res.exit_code == 0 and "reverted test-cubic" in res.output
    assert snapshot(root) == before


def test_cli_detect_json(tmp_path: Path) -> None:
    root, _, _ = _setup(tmp_path)
    res = CliRunner().invoke(cli, ["patch", "detect", str(root), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["target"] == "quiche" and d["era"] == "E" and "cubic" in d["algorithms"]
    assert d["files"]["tcp_cubic_sender_bytes.cc"].endswith("congestion_control/tcp_cubic_sender_bytes.cc")


def test_cli_check_failure_is_one_line_error(tmp_path: Path) -> None:
    root, d, paths = _setup(tmp_path)
    p = root / paths["tcp_cubic_sender_bytes.cc"]
    p.write_text(p.read_text().replace("ExitSlowstart();", "LeaveSlowStart();"))
    res = CliRunner().invoke(cli, ["patch", "check", str(root), "--set", str(d)])
    assert res.exit_code != 0
    assert "Error:" in res.output and "tcp_cubic_sender_bytes.cc" in res.output
    assert "Traceback" not in res.output


def test_cli_port_writes_set_and_reports_failures(tmp_path: Path) -> None:
    _, d, paths = _setup(tmp_path)
    new = tmp_path / "new"
    write_tree(new, "D")
    p = new / "quic/core/congestion_control/tcp_cubic_sender_bytes.cc"
    p.write_text(p.read_text().replace("  if (!IsCwndLimited", "  UpdateStats();\n  if (!IsCwndLimited"))
    out = tmp_path / "ported"
    r = CliRunner()
    res = r.invoke(cli, ["patch", "port", str(new), "--from", str(d), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "wrote" in res.output and (out / "manifest.json").exists()
    m = json.loads((out / "manifest.json").read_text())
    assert m["era"] == "D" and m["files"][0]["path"].startswith("quic/core/")
    res = r.invoke(cli, ["patch", "apply", str(new), "--set", str(out)])
    assert res.exit_code == 0, res.output
    # an anchor gone: error, reasons, nothing written
    gone = tmp_path / "gone"
    write_tree(gone, "E")
    g = gone / paths["quic_sent_packet_manager.cc"]
    g.write_text(
        g.read_text().replace(
            "    case PTO_MODE:\n      ++consecutive_pto_count_;\n      pending_timer_transmission_count_ = 1;\n", ""
        )
    )
    res = r.invoke(cli, ["patch", "port", str(gone), "--from", str(d), "-o", str(tmp_path / "nope")])
    assert res.exit_code != 0 and "cannot place" in res.output
    assert not (tmp_path / "nope").exists()


def test_cli_list_runs(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["patch", "list", "--json"])
    assert res.exit_code == 0, res.output
    listed = json.loads(res.stdout)  # broken sets are warned about on stderr, not listed
    assert isinstance(listed, list)
    assert all({"name", "target", "algorithm", "files"} <= set(d) for d in listed)


def test_cli_status_completes_a_killed_apply_and_names_the_tree_state(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    import quicsm
    from quicsm.instrumentation.journal import FAULT_ENV, JOURNAL_DIR

    root, d, paths = _setup(tmp_path)
    pristine = snapshot(root)
    env = dict(os.environ, PYTHONPATH=str(Path(quicsm.__file__).resolve().parent.parent))
    cubic = root / paths["tcp_cubic_sender_bytes.cc"]
    for n in range(1, 40):  # the first kill point that leaves a journal and one file already patched
        env[FAULT_ENV] = str(n)
        proc = subprocess.run(
            [sys.executable, "-m", "quicsm", "patch", "apply", str(root), "--set", str(d)], env=env, check=False
        )
        assert proc.returncode == -signal.SIGKILL
        if (root / JOURNAL_DIR).exists() and "QUICSM" in cubic.read_text():
            break
        assert CliRunner().invoke(cli, ["patch", "status", str(root), "--set", str(d)]).exit_code == 0
        CliRunner().invoke(cli, ["patch", "revert", str(root)])
        assert snapshot(root) == pristine
    else:
        raise AssertionError("no kill point inside the swap phase")
    res = CliRunner().invoke(cli, ["patch", "status", str(root), "--set", str(d)])
    assert res.exit_code == 0, res.output
    assert "recovered:" in res.output and "completed an interrupted `apply`" in res.output
    assert "tree patched: 2 files of test-cubic" in res.output
    assert not (root / JOURNAL_DIR).exists()
    res = CliRunner().invoke(cli, ["patch", "revert", str(root)])
    assert res.exit_code == 0 and snapshot(root) == pristine
