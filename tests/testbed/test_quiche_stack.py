"""Choosing the server stack for a run (no root, no build): which controllers each stack takes, the
quiche server's command line, the implementation a run's meta.json names, scenario files and CLI errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from quicsm.cli.main import cli
from quicsm.errors import TestbedError
from quicsm.testbed.matrix import load_matrix
from quicsm.testbed.runner import RunConfig, _server_argv
from quicsm.testbed.stack import QuicheStack


def test_controllers_per_stack() -> None:
    assert RunConfig(stack="quiche", cc="bbr2").cc == "bbr2"
    with pytest.raises(TestbedError, match="cc 'bbr2' on quic-go: choose reno or cubic"):
        RunConfig(cc="bbr2")
    with pytest.raises(TestbedError, match="stack 'lsquic'"):
        RunConfig(stack="lsquic")
    with pytest.raises(TestbedError, match="only the quic-go server"):
        RunConfig(stack="quiche", cc="bbr2", packet_threshold=5)


def test_quiche_run_names_its_implementation_and_passes_cc() -> None:
    cfg = RunConfig(stack="quiche", cc="bbr2", quiche_version="0.26.0", objects=3, size=1000)
    assert cfg.implementation == ("cloudflare-quiche", "0.26.0")
    labels = cfg.label_dict()
    assert labels["stack"] == "quiche" and labels["quiche_version"] == "0.26.0"
    bins = QuicheStack(server=Path("/x/srv"), client=Path("/x/cli"), patch_set="p")
    argv = _server_argv(cfg, bins, "10.0.0.1:4433", Path("/r/server.log"))
    assert argv[0] == "/x/srv" and argv[-2:] == ["-cc", "bbr2"]
    assert argv[argv.index("-objects") + 1] == "3" and argv[argv.index("-log") + 1] == "/r/server.log"


def test_quic_go_runs_unchanged() -> None:
    cfg = RunConfig(cc="cubic")
    assert cfg.implementation == ("quic-go", "v0.65.0")
    assert "stack" not in cfg.label_dict()
    argv = _server_argv(cfg, QuicheStack(Path("s"), Path("c"), "p"), "a:1", Path("l"))
    assert "-cc" not in argv


def test_scenario_file_with_quiche(tmp_path: Path) -> None:
    f = tmp_path / "m.toml"
    f.write_text('[defaults]\nstack = "quiche"\nquiche = "0.30.0"\ncc = "bbr2"\n[[scenario]]\nname = "d"\n')
    (sc,) = load_matrix(f).scenarios
    assert (sc.config.stack, sc.config.quiche_version, sc.config.cc) == ("quiche", "0.30.0", "bbr2")
    res = CliRunner().invoke(cli, ["testbed", "matrix", str(f), "--out", str(tmp_path / "o"), "--dry-run"])
    assert res.exit_code == 0 and "quiche 0.30.0 bbr2" in res.output, res.output
    f.write_text('[[scenario]]\nname = "d"\ncc = "bbr2"\n')
    res = CliRunner().invoke(cli, ["testbed", "matrix", str(f), "--dry-run"])
    assert res.exit_code != 0 and "cc 'bbr2' on quic-go" in res.output and "Traceback" not in res.output


def test_cli_stack_errors_are_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["testbed", "run", "--cc", "bbr2", "--out", str(tmp_path / "o")])
    assert res.exit_code != 0 and res.output.strip().count("\n") == 0, res.output
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    res = CliRunner().invoke(cli, ["testbed", "run", "--stack", "quiche", "--cc", "bbr2", "--out", str(tmp_path / "o")])
    assert res.exit_code != 0 and "needs root" in res.output and "Traceback" not in res.output
