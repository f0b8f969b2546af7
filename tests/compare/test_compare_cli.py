"""``quicsm compare`` end to end through click's CliRunner: logs and trace files in, every output out."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from compare_fixtures import make_traces, write_contract_log

from quicsm.cli.main import cli
from quicsm.traces import write_traces


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def logs(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "desktop").mkdir()
    (tmp_path / "mobile").mkdir()
    write_contract_log(tmp_path / "desktop" / "server.log", make_traces("d", 10, 0.08, seed=1))
    write_contract_log(tmp_path / "mobile" / "server.log", make_traces("m", 10, 0.55, seed=2))
    (tmp_path / "mobile" / "meta.json").write_text(json.dumps({"labels": {"client": "mobile"}}))
    return tmp_path / "desktop", tmp_path / "mobile"


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    traces = [
        *make_traces("d", 8, 0.08, seed=1, labels={"client": "desktop"}),
        *make_traces("m", 8, 0.55, seed=2, labels={"client": "mobile"}),
        *make_traces("t", 8, 0.30, seed=3, labels={"client": "tablet"}),
    ]
    path = tmp_path / "all.jsonl"
    write_traces(traces, str(path))
    return path


def test_two_directories_text(runner: CliRunner, logs) -> None:
    d, m = logs
    res = runner.invoke(cli, ["compare", str(d), str(m), "--bootstrap", "100"])
    assert res.exit_code == 0, res.output
    assert "mobile vs desktop: states" in res.output
    line = next(x for x in res.output.splitlines() if x.startswith("ApplicationLimited") and " pp " in x)
    assert "*" in line and "+" in line


def test_json_to_file_and_all_figures(runner: CliRunner, logs, tmp_path: Path) -> None:
    d, m = logs
    out = tmp_path / "out"
    args = [
        "compare",
        str(d),
        str(m),
        "--name",
        "desktop",
        "--name",
        "throttled",
        "--format",
        "json",
        "-o",
        str(out / "c.json"),
        "--html",
        str(out / "r.html"),
        "--heatmap",
        str(out / "h.svg"),
        "--diagram",
        str(out / "side.dot"),
        "--bootstrap",
        "100",
    ]
    if shutil.which("dot"):
        args += ["--diff-diagram", str(out / "diff.svg")]
    res = runner.invoke(cli, args)
    assert res.exit_code == 0, res.output
    data = json.loads((out / "c.json").read_text())
    (cmp,) = data["comparisons"]
    assert (cmp["a"], cmp["b"]) == ("desktop", "throttled")
    al = next(s for s in cmp["states"] if s["state"] == "ApplicationLimited")
    assert al["significant"] and al["p_corrected"] < 0.01
    assert "<svg" in (out / "r.html").read_text()
    assert (out / "h.svg").read_text().startswith("<svg")
    assert "digraph" in (out / "side.dot").read_text() and "cluster" in (out / "side.dot").read_text()
    if shutil.which("dot"):
        assert "<svg" in (out / "diff.svg").read_text()
    assert oct(os.stat(out / "c.json").st_mode & 0o077) != "0o0"  # not left 0600 by the temp file
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temp files left


def test_where_vs_on_one_dataset(runner: CliRunner, dataset: Path) -> None:
    res = runner.invoke(
        cli,
        [
            "compare",
            str(dataset),
            "--where",
            "client=desktop",
            "--vs",
            "client=mobile",
            "--format",
            "json",
            "--bootstrap",
            "0",
        ],
    )
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert [s["name"] for s in d["sets"]] == ["client=desktop", "client=mobile"]
    assert [s["connections"] for s in d["sets"]] == [8, 8]


def test_by_label_n_way_with_order_and_markdown(runner: CliRunner, dataset: Path, tmp_path: Path) -> None:
    res = runner.invoke(
        cli,
        [
            "compare",
            str(dataset),
            "--by",
            "client",
            "--order",
            "tablet",
            "--format",
            "markdown",
            "--heatmap",
            str(tmp_path / "h.svg"),
            "--bootstrap",
            "0",
            "-q",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "## client=desktop vs client=tablet: states" in res.output
    assert "## client=mobile vs client=tablet: states" in res.output
    svg = (tmp_path / "h.svg").read_text()
    assert svg.index("client=tablet") < svg.index("client=desktop")


def test_csv_output(runner: CliRunner, dataset: Path) -> None:
    res = runner.invoke(
        cli,
        [
            "compare",
            str(dataset),
            "--by",
            "client",
            "--all-pairs",
            "--format",
            "csv",
            "--bootstrap",
            "0",
            "--test",
            "mwu",
            "--edge-test",
            "z",
        ],
    )
    assert res.exit_code == 0, res.output
    lines = res.output.strip().splitlines()
    assert lines[0].startswith("kind,a,b,item")
    assert {tuple(x.split(",")[1:3]) for x in lines[1:]} == {
        ("client=desktop", "client=mobile"),
        ("client=desktop", "client=tablet"),
        ("client=mobile", "client=tablet"),
    }


@pytest.mark.parametrize(
    "args, message",
    [
        (["nope.log", "other.log"], "nope.log: no such file"),
        (["{data}"], "give two or more sets"),
        (["{data}", "--vs", "client=mobile"], "--vs needs --where"),
        (["{data}", "--by", "colour"], "no trace has label 'colour'"),
        (["{data}", "--where", "client=phone", "--vs", "client=mobile"], "holds no connection"),
        (["{data}", "--where", "client", "--vs", "client=mobile"], "is not KEY=VALUE"),
    ],
)
def test_errors_are_one_line(runner: CliRunner, dataset: Path, args: list[str], message: str) -> None:
    res = runner.invoke(cli, ["compare", *[a.replace("{data}", str(dataset)) for a in args]])
    assert res.exit_code != 0
    assert message in res.output
    assert "Traceback" not in res.output


def test_too_few_connections_via_cli(runner: CliRunner, tmp_path: Path, logs) -> None:
    one = tmp_path / "one.log"
    write_contract_log(one, make_traces("o", 1, 0.3, seed=5))
    res = runner.invoke(cli, ["compare", str(one), str(logs[0]), "--bootstrap", "0"])
    assert res.exit_code == 0, res.output
    assert "warning: set one: only 1 connection(s)" in res.output
    assert "too few connections" in res.output


def test_where_filters_every_positional_set(runner: CliRunner, logs) -> None:
    d, m = logs
    res = runner.invoke(cli, ["compare", str(d), str(m), "--where", "client=mobile"])
    assert res.exit_code != 0 and "set desktop" in res.output and "holds no connection" in res.output


def test_n_way_diff_diagrams_one_file_per_pair(runner: CliRunner, dataset: Path, tmp_path: Path) -> None:
    res = runner.invoke(
        cli,
        [
            "compare",
            str(dataset),
            "--by",
            "client",
            "--diff-diagram",
            str(tmp_path / "d.dot"),
            "--engine",
            "ktails",
            "-k",
            "1",
            "--bootstrap",
            "0",
            "--format",
            "json",
            "-q",
        ],
    )
    assert res.exit_code == 0, res.output
    files = sorted(p.name for p in tmp_path.glob("d.*.dot"))
    assert files == ["d.1.client_mobile-vs-client_desktop.dot", "d.2.client_tablet-vs-client_desktop.dot"]
    assert json.loads(res.output)["options"]["k"] == 1
    assert json.loads(res.output)["comparisons"][0]["models"]["engine"] == "ktails"


def test_bad_diagram_suffix_fails_before_writing(runner: CliRunner, logs, tmp_path: Path) -> None:
    d, m = logs
    out = tmp_path / "c.json"
    res = runner.invoke(
        cli, ["compare", str(d), str(m), "--format", "json", "-o", str(out), "--diagram", str(tmp_path / "s.jpg")]
    )
    assert res.exit_code != 0 and "cannot tell the format" in res.output
    assert not out.exists()


def test_skipped_records_are_reported_and_strict_stops_at_the_first(runner: CliRunner, logs, tmp_path: Path) -> None:
    """compare read problem records without a word; now it says what it skipped, and --strict stops."""
    d, m = logs
    text = (d / "server.log").read_text().splitlines()
    (d / "server.log").write_text(
        "\n".join([text[0], "QUICSM v=1 conn=0x1 t_us=oops cc=cubic to=SlowStart", *text[1:]]) + "\n"
    )
    out = tmp_path / "r.json"
    res = runner.invoke(cli, ["compare", str(d), str(m), "--format", "json", "-o", str(out), "--bootstrap", "50"])
    assert res.exit_code == 0, res.output
    assert f"{d / 'server.log'}:2: " in res.output and "skipped 1 problem record(s)" in res.output
    assert "set(s) desktop" in res.output and json.loads(out.read_text())["sets"]
    quiet = runner.invoke(cli, ["compare", str(d), str(m), "--format", "json", "-o", str(out), "-q"])
    assert quiet.exit_code == 0 and "problem record" not in quiet.output
    out.unlink()
    res = runner.invoke(cli, ["compare", str(d), str(m), "--format", "json", "-o", str(out), "--strict"])
    assert res.exit_code != 0 and f"{d / 'server.log'}:2: " in res.output and not out.exists()
