"""Long flows (--duration), the run summary (redone and bad runs), the exit status and a cleanup that
leaves other users' testbeds alone: what a user of `quicsm testbed` relies on."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from quicsm.cli.main import cli
from quicsm.errors import TestbedError
from quicsm.testbed import registry
from quicsm.testbed.config import parse_duration, parse_late_limit
from quicsm.testbed.matrix import load_matrix
from quicsm.testbed.runner import RunConfig, RunResult, relay_lateness
from quicsm.testbed.stacks import Built


def test_parse_duration() -> None:
    assert parse_duration("60s") == 60 and parse_duration("2m") == 120 and parse_duration("1500ms") == 1.5
    assert parse_duration("45") == 45 and parse_duration(None) is None and parse_duration("none") is None
    with pytest.raises(TestbedError, match="duration '1h'"):
        parse_duration("1h")


def test_long_flow_config_client_flags_and_labels() -> None:
    cfg = RunConfig(stack="quiche", cc="bbr2", duration_s=60.0, size=100_000_000)
    argv = cfg.server_stack.client_argv(
        cfg, Built("quiche", "0.30.0", "bbr2", Path("/s"), Path("/c"), None, True, 0), "u", "k"
    )
    assert argv[argv.index("-duration") + 1] == "60s"
    assert int(argv[argv.index("-timeout") + 1].rstrip("s")) >= 120  # duration + margin, above the 120 s default
    assert cfg.label_dict()["duration_s"] == "60"
    assert "duration_s" not in RunConfig().label_dict()  # page loads keep the labels they had
    assert "-duration" not in RunConfig().server_stack.client_argv(
        RunConfig(), Built("quic-go", "v", "reno", Path("/s"), Path("/c"), None, True, 0), "u", "k"
    )
    with pytest.raises(TestbedError, match="needs the Go client"):
        RunConfig(duration_s=10.0, client="chromium")
    with pytest.raises(TestbedError, match="between 0 and 3600"):
        RunConfig(duration_s=0.0)


def test_matrix_takes_duration(tmp_path: Path) -> None:
    f = tmp_path / "m.toml"
    f.write_text('[defaults]\nduration = "30s"\n[[scenario]]\nname = "a"\n[[scenario]]\nname = "b"\nduration = 90\n')
    a, b = load_matrix(f).scenarios
    assert (a.config.duration_s, b.config.duration_s) == (30.0, 90.0)
    res = CliRunner().invoke(cli, ["testbed", "matrix", str(f), "--out", str(tmp_path / "o"), "--dry-run"])
    assert res.exit_code == 0 and "long flow 30 s" in res.output


def test_late_limit_parsing_validation_and_lateness() -> None:
    assert parse_late_limit("20ms") == 20 and parse_late_limit("0.05s") == 50 and parse_late_limit("7") == 7
    with pytest.raises(TestbedError, match="late limit '5 furlongs'"):
        parse_late_limit("5 furlongs")
    with pytest.raises(TestbedError, match="late limit 0 ms"):
        RunConfig(late_limit_ms=0)
    stats = {"down": {"late_us": {"p99": 2500}}, "up": {"late_us": {"p99": 100}}}
    assert relay_lateness(stats) == (2500, False)  # the worst direction counts, against 2 ms by default
    assert relay_lateness(stats, 3000) == (2500, True)
    assert relay_lateness(None) == (None, False) and relay_lateness({}) == (None, False)  # no relay report
    assert "than 20 ms late" in RunResult(Path("r"), True, 1.0, False, late_limit_ms=20).reason()


def test_late_limit_from_the_command_line_and_the_matrix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    f = tmp_path / "m.toml"
    f.write_text(
        '[defaults]\nlate_limit = "10ms"\n[[scenario]]\nname = "a"\n[[scenario]]\nname = "b"\nlate_limit = 4\n'
    )
    assert [sc.config.late_limit_ms for sc in load_matrix(f).scenarios] == [10.0, 4.0]
    import quicsm.cli.testbed_cmd as cmd

    seen: list[float] = []

    def fake(items: Any, out: Path, retries: int, keep_going: bool = False, **kw: Any) -> list[Path]:
        seen.extend(cfg.late_limit_ms for cfg, _ in items)
        return []

    monkeypatch.setattr(cmd, "_run_scenarios", fake)
    assert CliRunner().invoke(cli, ["testbed", "matrix", str(f), "--out", str(tmp_path / "o")]).exit_code == 0
    res = CliRunner().invoke(cli, ["testbed", "matrix", str(f), "--out", str(tmp_path / "o"), "--late-limit", "30ms"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["testbed", "run", "--out", str(tmp_path / "o"), "--late-limit", "25ms"])
    assert res.exit_code == 0, res.output
    assert CliRunner().invoke(cli, ["testbed", "run", "--out", str(tmp_path / "o")]).exit_code == 0
    assert seen == [10.0, 4.0, 30.0, 30.0, 25.0, 2.0]
    res = CliRunner().invoke(cli, ["testbed", "run", "--out", str(tmp_path / "o"), "--late-limit", "soon"])
    assert res.exit_code != 0 and "late limit 'soon'" in res.output


def _result(tmp: Path, name: str, ok: bool = True, late: bool = False, redone: tuple[str, ...] = ()) -> RunResult:
    return RunResult(
        tmp / name, ok, 1000.0 if ok else None, not late, None if ok else "client reported failure", redone
    )


def _fake_runs(monkeypatch: pytest.MonkeyPatch, results: list[RunResult]) -> None:
    import quicsm.cli.testbed_cmd as cmd
    import quicsm.testbed.runner as runner

    monkeypatch.setattr(cmd, "build_with_progress", lambda cfg, **kw: None)

    def run_many(cfg: Any, bins: Any, out: Path, *, runs: int, retries: int, on_result: Any) -> list[RunResult]:
        for r in results:
            on_result(r)
        return results

    monkeypatch.setattr(runner, "run_many", run_many)


def test_summary_lists_redone_and_bad_runs_and_exit_status(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 0)
    results = [
        _result(tmp_path, "run-00"),
        _result(tmp_path, "run-01", redone=("emulator late (1 % of packets sent more than 2 ms late) (kept in x)",)),
        _result(tmp_path, "run-02", late=True, redone=("client reported failure (kept in y)",)),
    ]
    _fake_runs(monkeypatch, results)
    res = CliRunner().invoke(cli, ["testbed", "run", "--out", str(tmp_path / "o"), "--runs", "3"])
    assert res.exit_code == 1, res.output
    err = res.stderr
    assert "2/3 run(s) ok" in err
    assert "redone: 2 attempt(s) of 2 run(s)" in err
    assert "run-01 attempt 0: emulator late" in err and "run-02 attempt 0: client reported failure" in err
    assert "not usable: 1 run(s)" in err and "run-02: emulator late" in err
    assert "[redone 1x]" in err
    res = CliRunner().invoke(cli, ["testbed", "run", "--out", str(tmp_path / "o"), "--runs", "3", "--keep-going"])
    assert res.exit_code == 0, res.output


def test_all_bad_tells_late_from_failed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Runs that completed with the emulator late are not reported as failures, and the mix is named."""
    monkeypatch.setattr("os.geteuid", lambda: 0)
    _fake_runs(monkeypatch, [_result(tmp_path, "run-00", late=True), _result(tmp_path, "run-01", late=True)])
    res = CliRunner().invoke(cli, ["testbed", "run", "--out", str(tmp_path / "o"), "--runs", "2"])
    assert res.exit_code != 0
    assert "all 2 run(s) completed but the emulator was late" in res.output and "failed" not in res.output
    _fake_runs(monkeypatch, [_result(tmp_path, "run-00", late=True), _result(tmp_path, "run-01", ok=False)])
    res = CliRunner().invoke(cli, ["testbed", "run", "--out", str(tmp_path / "o"), "--runs", "2"])
    assert (
        res.exit_code != 0
        and "no usable run: 1 failed" in res.output
        and "1 completed with the emulator late" in res.output
    )
    _fake_runs(monkeypatch, [_result(tmp_path, "run-00", ok=False)])
    res = CliRunner().invoke(cli, ["testbed", "run", "--out", str(tmp_path / "o")])
    assert res.exit_code != 0 and "all 1 run(s) failed" in res.output


def test_all_good_exits_zero(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 0)
    _fake_runs(monkeypatch, [_result(tmp_path, "run-00")])
    res = CliRunner().invoke(cli, ["testbed", "run", "--out", str(tmp_path / "o")])
    assert res.exit_code == 0 and "1/1 run(s) ok" in res.stderr and "redone" not in res.stderr


def test_cleanup_removes_only_this_users_leftovers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import quicsm.testbed.cpu as cpu
    import quicsm.testbed.netns as netns

    monkeypatch.setattr("os.geteuid", lambda: 0)
    monkeypatch.setenv("QUICSM_RUN_REGISTRY", str(tmp_path / "reg"))
    live = registry.register("live01", "qsm", tmp_path / "live")
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    dead = {"tag": "dead01", "prefix": "qsm", "pid": proc.pid, "pid_start": None, "uid": os.getuid()}
    (tmp_path / "reg" / "dead01.json").write_text(json.dumps({**dead, "run_dir": "r", "started": 0.0}))
    existing = ["qsmdead01-srv", "qsmdead01-cli", "qsmlive01-srv", "qsmabcdef-srv"]
    removed: list[str] = []
    monkeypatch.setattr(netns, "list_namespaces", lambda prefix="qsm": [n for n in existing if n.startswith(prefix)])

    def cleanup_all(prefix: str = "qsm") -> list[str]:
        gone = [n for n in existing if n.startswith(prefix)]
        removed.extend(gone)
        return gone

    monkeypatch.setattr(netns, "cleanup_all", cleanup_all)
    monkeypatch.setattr(cpu, "cleanup_all", lambda prefix: [])
    res = CliRunner().invoke(cli, ["testbed", "cleanup"])
    assert res.exit_code == 0, res.output
    assert removed == ["qsmdead01-srv", "qsmdead01-cli"]
    assert "left alone: 1 run(s) in progress" in res.stderr
    assert "left alone: 1 qsm* namespace(s)" in res.stderr and "qsmabcdef-srv" in res.stderr
    assert [e.tag for e in registry.entries()] == [live.tag]
    removed.clear()
    res = CliRunner().invoke(cli, ["testbed", "cleanup", "--all"])
    assert res.exit_code == 0 and removed == existing


def test_rtt_step_reaches_the_relay() -> None:
    from quicsm.testbed.relay import RelayConfig, relay_argv

    cfg = RunConfig(rtt_ms=36, rtt_step="20s:80ms")
    assert cfg.delay_step == (20.0, 40.0) and cfg.label_dict()["rtt_step"] == "20s:80ms"
    argv = relay_argv(
        Path("/r"), listen="a", upstream="b", cfg=RelayConfig(18, delay_step=cfg.delay_step), stats=Path("/s")
    )
    assert argv[argv.index("-delay-step") + 1] == "20.0s:40.0ms"
    assert RunConfig().delay_step is None and "rtt_step" not in RunConfig().label_dict()
    with pytest.raises(TestbedError, match="rtt step 'soon'"):
        RunConfig(rtt_step="soon")


def test_outage_reaches_the_relay_from_every_front_end(tmp_path: Path) -> None:
    """--outage (testbed run), `outage` (scenario and grid TOML) -> RunConfig.outages -> the relay's -outage."""
    from quicsm.grids.spec import load_grid
    from quicsm.testbed.matrix import config_from_mapping
    from quicsm.testbed.relay import RelayConfig, relay_argv

    cfg = RunConfig(outage="1s:1500ms, 4:0.2")
    assert cfg.outages == ((1.0, 1.5), (4.0, 0.2)) and cfg.label_dict()["outage"] == "1s:1500ms,4:0.2"
    argv = relay_argv(Path("/r"), listen="a", upstream="b", cfg=RelayConfig(outages=cfg.outages), stats=Path("/s"))
    assert argv[argv.index("-outage") + 1] == "1000ms:1500ms,4000ms:200ms"
    assert RunConfig().outages == () and "outage" not in RunConfig().label_dict()
    assert "-outage" not in relay_argv(Path("/r"), listen="a", upstream="b", cfg=RelayConfig(), stats=Path("/s"))
    for bad, why in (("soon", "outage 'soon'"), ("1s:0s", "outage '1s:0s'"), ("1s:2s,2s:1s", "outages")):
        with pytest.raises(TestbedError, match=why):
            RunConfig(outage=bad)
    assert config_from_mapping({"outage": "800ms:2s"}, where="")[0].outages == ((0.8, 2.0),)
    toml = tmp_path / "m.toml"
    toml.write_text(
        'out = "o"\n[defaults]\noutage = "1s:1s"\n[[scenario]]\nname = "a"\n[[scenario]]\nname = "b"\noutage = "2s:0.5s"\n'
    )
    assert [sc.config.outages for sc in load_matrix(toml).scenarios] == [((1.0, 1.0),), ((2.0, 0.5),)]
    toml.write_text('out = "o"\n[[scenario]]\nname = "a"\noutage = 3\n')
    with pytest.raises(TestbedError, match="outage"):
        load_matrix(toml)
    grid = tmp_path / "g.toml"
    grid.write_text('runs = 1\n[axes]\noutage = ["1s:1s", "1s:3s"]\n[arms.quic]\nstack = "quic-go"\n')
    planned = load_grid(grid).plan()
    assert sorted(p.config.outages for p in planned) == [((1.0, 1.0),), ((1.0, 3.0),)]
    res = CliRunner().invoke(cli, ["testbed", "run", "--outage", "later", "--out", str(tmp_path / "r")])
    assert res.exit_code != 0 and "outage 'later'" in res.output + str(res.exception)


def test_grid_fingerprints_stay_without_an_outage() -> None:
    """Runs a grid made before `outage` existed keep their fingerprint (the field is left out while unset)."""
    from dataclasses import asdict

    from quicsm.grids.spec import _fingerprint

    cfg = RunConfig()
    before = {k: v for k, v in asdict(cfg).items() if k != "outage"}
    assert (
        _fingerprint(cfg) == hashlib.sha256(json.dumps(before, sort_keys=True, default=str).encode()).hexdigest()[:16]
    )
    assert _fingerprint(RunConfig(outage="1s:1s")) != _fingerprint(cfg)


def test_the_default_controller_is_the_stacks_own_in_the_library_cli_and_matrix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import quicsm.cli.testbed_cmd as cmd
    from quicsm.testbed import stacks

    seen: list[str] = []
    monkeypatch.setattr(cmd, "_run_scenarios", lambda items, *a, **kw: seen.extend(c.cc for c, _ in items) or [])
    names = stacks.names()
    f = tmp_path / "m.toml"
    f.write_text("".join(f'[[scenario]]\nname = "s{i}"\nstack = "{n}"\n' for i, n in enumerate(names)))
    for n in names:  # no --cc: the stack's first controller (chromium's patch sets have no reno)
        res = CliRunner().invoke(cli, ["testbed", "run", "--stack", n, "--out", str(tmp_path / "o")])
        assert res.exit_code == 0, res.output
    library = [RunConfig(stack=n).cc for n in names]
    matrix = [sc.config.cc for sc in load_matrix(f).scenarios]
    assert seen == library == matrix == [stacks.get(n).ccs[0] for n in names]
    assert dict(zip(names, library))["chromium"] == "cubic" and dict(zip(names, library))["quic-go"] == "reno"
    assert RunConfig(stack="quiche", cc="bbr2").cc == "bbr2"
    with pytest.raises(TestbedError, match="cc 'reno' on chromium"):
        RunConfig(stack="chromium", cc="reno")
    helptext = CliRunner().invoke(cli, ["testbed", "run", "--help"]).output
    assert "default: the stack's" in " ".join(helptext.split())
