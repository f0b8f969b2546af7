"""End-to-end CLI: parse -> infer (-> render/diagram where the diagrams package is present)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import synth_cubic_lines

from quicsm import __version__
from quicsm.cli.main import COMMANDS, cli
from quicsm.traces import read_traces


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_version_and_help_on_every_verb(runner: CliRunner) -> None:
    res = runner.invoke(cli, ["--version"])
    assert res.exit_code == 0 and __version__ in res.output
    res = runner.invoke(cli, ["--help"])
    assert res.exit_code == 0
    for verb in COMMANDS:
        assert verb in res.output, f"{verb} missing from quicsm --help"
        sub = runner.invoke(cli, [verb, "--help"])
        assert sub.exit_code == 0, (verb, sub.output)
        assert "Usage:" in sub.output


def test_parse_then_infer_json(runner: CliRunner, write_log, tmp_path: Path) -> None:
    log = write_log("s.log", synth_cubic_lines(conns=6, steps=40, seed=11))
    traces = tmp_path / "t.parquet"
    res = runner.invoke(cli, ["parse", str(log), "--label", "client=desktop", "-o", str(traces), "-q"])
    assert res.exit_code == 0, res.output
    tr = read_traces(str(traces))
    assert len(tr) == 6 and all(t.labels == {"client": "desktop"} for t in tr)
    model = tmp_path / "m.json"
    res = runner.invoke(cli, ["infer", str(traces), "--engine", "dfg", "-o", str(model), "-q"])
    assert res.exit_code == 0, res.output
    doc = json.loads(model.read_text())
    assert doc["engine"] == "dfg" and doc["traces"] == 6
    states = [n for n in doc["nodes"] if n["kind"] == "state"]
    assert abs(sum(n["time_fraction"] for n in states) - 1) < 1e-9
    assert {n["state"] for n in states} == {s for t in tr for s in t.states()}
    assert sum(1 for n in doc["nodes"] if n["initial"]) == 1 and sum(1 for n in doc["nodes"] if n["terminal"]) == 1
    out: dict[int, float] = {}
    for e in doc["edges"]:
        out[e["src"]] = out.get(e["src"], 0.0) + e["probability"]
    assert all(abs(v - 1) < 1e-9 for v in out.values())


def test_infer_text_table_and_where(runner: CliRunner, write_log) -> None:
    log = write_log("s.log", synth_cubic_lines(conns=3, steps=10, seed=12))
    res = runner.invoke(cli, ["infer", str(log), "--engine", "dfg", "--format", "text", "--where", "cc=cubic", "-q"])
    assert res.exit_code == 0, res.output
    assert "time share" in res.output and "SlowStart" in res.output
    res = runner.invoke(cli, ["infer", str(log), "--engine", "dfg", "--where", "client=mobile", "-q"])
    assert res.exit_code != 0 and "no trace matches" in res.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["parse", "/nonexistent/x.log"], "no such file"),
        (["infer", "/nonexistent/x.log"], "no such file"),
        (["parse", "--label", "nolabel", "x.log"], "KEY=VALUE"),
    ],
)
def test_errors_are_one_line_no_traceback(runner: CliRunner, args: list[str], message: str) -> None:
    res = runner.invoke(cli, args)
    assert res.exit_code != 0
    assert message in res.output
    assert "Traceback" not in res.output


def test_strict_fails_on_bad_line(runner: CliRunner, write_log) -> None:
    lines = synth_cubic_lines(conns=1, steps=5, seed=13) + ["QUICSM v=1 conn=x"]
    log = write_log("bad.log", lines)
    res = runner.invoke(cli, ["parse", str(log), "-o", "-", "-q"])
    assert res.exit_code == 0
    res = runner.invoke(cli, ["parse", str(log), "--strict", "-o", "-"])
    assert res.exit_code != 0 and f"{log}:{len(lines)}" in res.output


def test_empty_input_is_a_clear_error(runner: CliRunner, write_log) -> None:
    log = write_log("empty.log", ["nothing to see"])
    res = runner.invoke(cli, ["infer", str(log)])
    assert res.exit_code != 0 and "no state transitions" in res.output


@pytest.mark.parametrize("engine", ["dfg", "synoptic", "ktails"])
def test_diagram_end_to_end(runner: CliRunner, write_log, tmp_path: Path, engine: str) -> None:
    lines = synth_cubic_lines(conns=8, steps=25, seed=21)
    log = write_log("s.log", lines)
    svg = tmp_path / "d.svg"
    model = tmp_path / "m.json"
    res = runner.invoke(cli, ["diagram", str(log), "--engine", engine, "-o", str(svg), "--json", str(model)])
    assert res.exit_code == 0, res.output
    assert f"to {svg}" in res.output
    text = svg.read_text()
    doc = json.loads(model.read_text())
    assert text.startswith("<?xml") and "</svg>" in text
    for n in doc["nodes"]:
        if n["kind"] == "state":
            assert n["state"].replace("CongestionAvoidance", "Congestion").split("Congestion")[0] in text
    # the model accepts every input trace: each trace's path shows up as edge counts summing to #traces
    starts = sum(e["count"] for e in doc["edges"] if doc["nodes"][e["src"]]["initial"])
    assert starts == doc["traces"] == 8
    # rendering the saved model gives the same picture as the one-shot verb
    again = tmp_path / "again.svg"
    res = runner.invoke(cli, ["render", str(model), "-o", str(again)])
    assert res.exit_code == 0, res.output
    assert again.read_bytes() == svg.read_bytes()


@pytest.mark.parametrize(
    ("verb", "out_name"), [("parse", "t.parquet"), ("parse", "t.jsonl"), ("infer", "m.json"), ("diagram", "m.svg")]
)
def test_quiet_drops_the_summary_and_the_wrote_line_but_names_problem_files(
    runner: CliRunner, write_log, tmp_path: Path, verb: str, out_name: str
) -> None:
    good = write_log("s.log", synth_cubic_lines(conns=3, steps=20, seed=5))
    bad = tmp_path / "garbage.qlog"
    bad.write_bytes(b"\x1e{not json\n")
    out = tmp_path / out_name
    loud = runner.invoke(cli, [verb, str(good), str(bad), "-o", str(out)])
    assert loud.exit_code == 0, loud.output
    assert "wrote" in loud.stderr and "garbage.qlog" in loud.stderr
    out.unlink()
    quiet = runner.invoke(cli, [verb, str(good), str(bad), "-o", str(out), "-q"])
    assert quiet.exit_code == 0, quiet.output
    assert out.stat().st_size > 0
    assert "wrote" not in quiet.stderr and "read " not in quiet.stderr
    assert "garbage.qlog" in quiet.stderr
