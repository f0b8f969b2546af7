"""Emulator and runner configuration: units, validation, scenario files, labels, the no-root message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from quicsm.cli.main import cli
from quicsm.errors import InputError, TestbedError
from quicsm.testbed import netns
from quicsm.testbed.config import parse_loss, parse_quota, parse_size
from quicsm.testbed.emulator import RateSchedule
from quicsm.testbed.matrix import load_matrix
from quicsm.testbed.relay import RelayConfig, relay_argv
from quicsm.testbed.runner import RunConfig, read_meta


@pytest.mark.parametrize(
    ("text", "bps"),
    [
        ("50", 50_000_000),
        (5, 5_000_000),
        ("500kbit", 500_000),
        ("1.5mbit", 1_500_000),
        ("100Mbit", 100_000_000),
        ("2e6bit", 2_000_000),
    ],
)
def test_parse_rate(text: str | int, bps: int) -> None:
    assert netns.parse_rate(text) == bps


@pytest.mark.parametrize("bad", ["fast", "-5", "0", "5 parsecs"])
def test_parse_rate_rejects(bad: str) -> None:
    with pytest.raises(TestbedError, match="rate"):
        netns.parse_rate(bad)


def test_queue_bdp_follows_rate_and_rtt() -> None:
    one = netns.parse_queue("1bdp", rate_bps=50_000_000, rtt_ms=36)
    assert one == 225_000  # 50 Mbit/s * 36 ms / 8
    assert netns.parse_queue("2bdp", rate_bps=50_000_000, rtt_ms=36) == 2 * one
    assert netns.parse_queue("150kb", rate_bps=1, rtt_ms=1) == 150_000
    assert netns.parse_queue("64kib", rate_bps=1, rtt_ms=1) == 65_536
    assert netns.parse_queue("1bdp", rate_bps=1_000_000, rtt_ms=0) >= 4 * 1514  # never below a few packets
    with pytest.raises(TestbedError, match="queue"):
        netns.parse_queue("lots", rate_bps=1, rtt_ms=1)


def test_tbf_burst_scales_with_rate() -> None:
    assert netns.TbfConfig(5_000_000, 10_000).burst() == 3 * 1514
    assert netns.TbfConfig(100_000_000, 10_000).burst() == 12_500
    assert netns.TbfConfig(100_000_000, 10_000, burst_bytes=32_000).burst() == 32_000


def test_schedule_parse() -> None:
    s = RateSchedule.parse("random:5:50:0.5")
    assert (s.min_bps, s.max_bps, s.period_s) == (5_000_000, 50_000_000, 0.5)
    assert RateSchedule.parse("random:1:2").period_s == 1.0
    for bad in ("steps:1:2", "random:50:5", "random:1:2:0", "random:1"):
        with pytest.raises(TestbedError, match="schedule"):
            RateSchedule.parse(bad)


def test_units_of_size_loss_quota() -> None:
    assert parse_size("10MB") == 10_000_000 and parse_size("100kb") == 100_000 and parse_size("5000") == 5000
    assert parse_loss("1%") == pytest.approx(0.01) and parse_loss("0.001") == pytest.approx(0.001)
    assert (
        parse_quota("10%") == pytest.approx(0.1)
        and parse_quota("0.2") == pytest.approx(0.2)
        and parse_quota("none") is None
    )
    with pytest.raises(TestbedError):
        parse_size("ten")
    with pytest.raises(TestbedError):
        parse_loss("150%")


def test_run_config_validates() -> None:
    with pytest.raises(TestbedError, match="client"):
        RunConfig(client="curl")
    with pytest.raises(TestbedError, match="cc"):
        RunConfig(cc="bbr")
    with pytest.raises(TestbedError, match="loss"):
        RunConfig(loss=1.5)
    with pytest.raises(TestbedError, match="quota"):
        RunConfig(cpu_quota=-0.1)
    labels = RunConfig(cpu_quota=0.1, labels=(("device", "motog"),)).label_dict()
    assert labels["profile"] == "mobile" and labels["cpu_quota"] == "0.1" and labels["device"] == "motog"
    assert RunConfig().label_dict()["profile"] == "desktop"


def test_relay_argv_splits_rtt_per_direction() -> None:
    argv = relay_argv(Path("/bin/relay"), listen="a:1", upstream="b:2", cfg=RelayConfig(18, 5, 0.01), stats=Path("/s"))
    assert argv[argv.index("-delay-down") + 1] == "18ms" and argv[argv.index("-jitter-up") + 1] == "5ms"
    assert argv[argv.index("-loss-down") + 1] == "0.01"
    with pytest.raises(TestbedError):
        RelayConfig(delay_ms=-1)


def test_matrix_file(tmp_path: Path) -> None:
    f = tmp_path / "m.toml"
    f.write_text(
        'out = "runs"\n[defaults]\nrate = "50mbit"\nrtt = 36\nsize = "10MB"\nruns = 3\n'
        '[[scenario]]\nname = "desktop"\n[[scenario]]\nname = "mobile"\ncpu_quota = "10%"\nruns = 12\n'
        '[scenario.labels]\ndevice = "motog"\n'
    )
    m = load_matrix(f)
    assert m.out == Path("runs")
    desk, mob = m.scenarios
    assert (desk.runs, mob.runs) == (3, 12)
    assert desk.config.rate_mbps == 50 and desk.config.size == 10_000_000 and desk.config.cpu_quota is None
    assert mob.config.cpu_quota == pytest.approx(0.1) and mob.config.label_dict()["device"] == "motog"


@pytest.mark.parametrize(
    ("body", "msg"),
    [
        ('[[scenario]]\nname = "a"\nrat = 5\n', "bad.toml:3: scenario 1 \\(a\\): rat: unknown key"),
        ('[[scenario]]\nname = "a"\n[[scenario]]\nname = "a"\n', "bad.toml:4: scenario 2 \\(a\\): duplicate name"),
        ("[[scenario]]\nrate = 5\n", "bad.toml:1: scenario 1: name: required key missing"),
        ("[defaults]\nrate = 5\n", "bad.toml: needs at least one"),
        ('[[scenario]]\nname = "a"\nloss = "2"\n', "bad.toml:3: scenario 1 \\(a\\): loss: "),
        ('[defaults]\nloss = "2"\n[[scenario]]\nname = "a"\n', "bad.toml:2: scenario 1 \\(a\\): loss: "),
        ("[[scenario]\n", "bad.toml: not valid TOML \\(.*line 1"),
        ('x = 1\n[[scenario]]\nname = "a"\n', "bad.toml:1: x: unknown key \\(known: defaults, out, scenario\\)"),
        ('[defaults]\nruns = 0\n[[scenario]]\nname = "a"\n', "bad.toml:2: \\[defaults\\]: runs: expected `int` >= 1"),
        (
            '[[scenario]]\nname = "a"\n[[scenario]]\nname = "b"\nzero_rtt = 1\n',
            "bad.toml:5: scenario 2 \\(b\\): zero_rtt: ",
        ),
        (
            '[[scenario]]\nname = "a"\n[scenario.labels]\nx = 1\n',
            "bad.toml:3: scenario 1 \\(a\\): labels: expected `str`",
        ),
    ],
)
def test_matrix_errors_name_file_line_and_reason(tmp_path: Path, body: str, msg: str) -> None:
    """The file is decoded once (MatrixFile); msgspec's place in it (``$.scenario[1].zero_rtt``) is said
    as the file's line and the scenario's number and name."""
    f = tmp_path / "bad.toml"
    f.write_text(body)
    with pytest.raises(TestbedError, match=msg):
        load_matrix(f)


def test_read_meta_reads_a_run_directory(tmp_path: Path) -> None:
    run = tmp_path / "mobile-00"
    run.mkdir()
    (run / "meta.json").write_text(
        json.dumps(
            {
                "implementation": "quic-go",
                "version": "v0.65.0",
                "cc": "reno",
                "labels": {"profile": "mobile", "rate_mbps": 50},
            }
        )
    )
    meta = read_meta(run)
    assert (meta.implementation, meta.version, meta.cc) == ("quic-go", "v0.65.0", "reno")
    assert meta.labels == {"profile": "mobile", "rate_mbps": 50}
    with pytest.raises(InputError, match="meta.json: no such file$"):
        read_meta(tmp_path)
    (run / "meta.json").write_text("{broken")
    with pytest.raises(InputError, match="meta.json:1: run metadata: not valid JSON"):  # runmeta.read_meta's wording
        read_meta(run)


def test_cli_without_root_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    for args in (
        ["testbed", "run", "--out", str(tmp_path / "o"), "--runs", "1"],
        ["testbed", "cleanup"],
        ["testbed", "accuracy", "--out", str(tmp_path / "a")],
    ):
        res = CliRunner().invoke(cli, args)
        assert res.exit_code != 0
        assert "needs root" in res.output, res.output
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_cli_matrix_dry_run_and_bad_file(tmp_path: Path) -> None:
    f = tmp_path / "m.toml"
    f.write_text('[[scenario]]\nname = "x"\nrate = 10\nrtt = 112\njitter = 10\n')
    res = CliRunner().invoke(cli, ["testbed", "matrix", str(f), "--out", str(tmp_path / "o"), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "x: 1 run(s), 10 Mbit/s, 112 ms RTT, jitter 10 ms" in res.output
    f.write_text('[[scenario]]\nname = "x"\nclient = "lynx"\n')
    res = CliRunner().invoke(cli, ["testbed", "matrix", str(f), "--dry-run"])
    assert res.exit_code != 0 and "m.toml:3: scenario 1 (x): client" in res.output and "lynx" in res.output


def test_new_runs_continue_numbering(tmp_path: Path) -> None:
    from quicsm.testbed.runner import _next_index

    assert _next_index(tmp_path, "mobile") == 0
    for name in ("mobile-00", "mobile-01", "mobile-07", "mobile20-09", "mobile-x"):
        (tmp_path / name).mkdir()
    assert _next_index(tmp_path, "mobile") == 8
    assert _next_index(tmp_path, "mobile20") == 10
