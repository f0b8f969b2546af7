"""`quicsm testbed matrix --check`: real runs through the emulator, then the gate on exactly those runs.

The baseline is the bundled traces/check/reno-a (quic-go v0.65.0 Reno, 50 Mbit/s, 36 ms, 10 MB) saved
with --by scenario; the matrix runs the same scenario four times more. Needs root and Go."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from quicsm.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces, tc and cgroups"),
    pytest.mark.skipif(shutil.which("go") is None and not Path("/usr/local/go/bin/go").exists(), reason="needs Go"),
]


def test_matrix_runs_then_checks_only_its_own_runs(tmp_path: Path) -> None:
    base = tmp_path / "base.qsb"
    res = CliRunner().invoke(
        cli, ["baseline", "save", str(ROOT / "traces/check/reno-a"), "--by", "scenario", "-o", str(base)]
    )
    assert res.exit_code == 0, res.output
    out = tmp_path / "runs"
    (out / "reno-a-00").mkdir(parents=True)  # an older run in the same directory must not be checked
    toml = tmp_path / "m.toml"
    toml.write_text(
        '[defaults]\nrate = 50\nrtt = 36\nqueue = "1bdp"\nsize = "10MB"\nquic_go_version = "v0.65.0"\ncc = "reno"\n'
        '[[scenario]]\nname = "reno-a"\nruns = 4\n'
    )
    res = CliRunner().invoke(
        cli,
        ["testbed", "matrix", str(toml), "--out", str(out), "--retries", "2", "--check", str(base)]
        + ["--late-limit", "50ms"],  # the gate's plumbing on real runs, not the emulator's timing
    )
    report = json.loads((out / "check.json").read_text())
    assert res.exit_code == report["exit_code"] in (0, 1), res.output
    assert report["scenarios"][0]["name"] == "reno-a" and report["scenarios"][0]["new_connections"] == 4
    assert report["scenarios"][0]["baseline_connections"] == 10
    for ext in ("txt", "xml", "md", "html"):
        assert (out / f"check.{ext}").stat().st_size > 0
    assert (out / "check.txt").read_text().startswith("quicsm check: ")
