"""Multi-flow runs say which flow failed and why (fast, no emulator)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from quicsm.testbed.flows import _client_result, _failed_flows


def test_failed_flow_is_named_with_its_clients_last_stderr_line(tmp_path: Path) -> None:
    (tmp_path / "client-quic.stderr").write_text(
        'exec of "/cache/bin/quicsm-client" failed: No such file or directory\n'
    )
    results = [
        {"ok": False, "error": "client exited with status 1 without a result", "finished": True},
        {"ok": False, "error": "still loading at the end", "finished": False},  # a long flow stopped: fine
        {"ok": True, "finished": True},
    ]
    msg = _failed_flows(tmp_path, ["quic", "tcp1", "tcp2"], results)
    assert msg == (
        "flow quic: client exited with status 1 without a result "
        '(exec of "/cache/bin/quicsm-client" failed: No such file or directory)'
    )
    assert _failed_flows(tmp_path, ["tcp1"], results[1:2]) == ""


def test_client_result_takes_the_last_json_line_or_says_the_exit_status() -> None:
    def child(code: str) -> SimpleNamespace:
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
        p.wait()
        return SimpleNamespace(popen=p)

    assert _client_result(child('print("x"); print(\'{"ok": true, "bytes": 3}\')')) == {"ok": True, "bytes": 3}
    assert _client_result(child("import sys; print('not json'); sys.exit(3)")) == {
        "ok": False,
        "error": "client exited with status 3 without a result",
    }
