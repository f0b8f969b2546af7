"""``quicsm baseline`` and ``quicsm check`` end to end: exit status, every output, errors as exit 2."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import msgspec
import pytest
from check_fixtures import make_traces_for
from click.testing import CliRunner

from quicsm.check.report import CheckReport
from quicsm.cli.main import cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compare"))
from compare_fixtures import write_contract_log


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("check")
    return {
        "base": write_contract_log(d / "base.log", make_traces_for("b", 16, seed=1)),
        "same": write_contract_log(d / "same.log", make_traces_for("s", 16, seed=2)),
        "changed": write_contract_log(d / "changed.log", make_traces_for("c", 16, seed=2, extra_recovery=True)),
        "dir": d,
    }


def _run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_save_show_and_check(logs) -> None:
    bundle = str(logs["dir"] / "base.qsb")
    res = _run("baseline", "save", str(logs["base"]), "-o", bundle)
    assert res.exit_code == 0, res.output
    assert "16 connection(s)" in res.output and "bytes" in res.output
    show = _run("baseline", "show", bundle)
    assert show.exit_code == 0 and "Recovery" in show.output and "16 connection(s)" in show.output
    data = json.loads(_run("baseline", "show", bundle, "--json").output)
    assert data["connections"] == 16 and data["sets"][0]["controllers"] == ["reno"]

    same = _run("check", bundle, str(logs["same"]))
    assert same.exit_code == 0, same.output
    assert same.output.startswith("quicsm check: same")

    out = logs["dir"]
    changed = _run(
        "check", bundle, str(logs["changed"]), "--junit", str(out / "c.xml"), "--json", str(out / "c.json"),
        "--markdown", str(out / "c.md"), "--html", str(out / "c.html"),
    )  # fmt: skip
    assert changed.exit_code == 1, changed.output
    assert "CHANGED" in changed.output and "Recovery" in changed.output and "witness" in changed.output

    report = msgspec.json.decode((out / "c.json").read_bytes(), type=CheckReport)
    assert report.verdict == "changed" and report.exit_code == 1 and report.failed > 0
    assert any(f.item == "Recovery" and f.failed for f in report.findings)

    suites = ET.parse(out / "c.xml").getroot()
    cases = {(c.get("classname"), c.get("name")): c for c in suites.iter("testcase")}
    states = {n for (k, n) in cases if k.endswith(".state")}
    edges = {n for (k, n) in cases if k.endswith(".edge")}
    assert {"SlowStart", "CongestionAvoidance", "Recovery", "ApplicationLimited"} <= states
    assert "SlowStart -> Recovery" in edges, "one test case per edge, new ones included"
    assert (
        cases[("quicsm.check.s.log.state" if False else next(k for k in cases if k[1] == "Recovery"))].find("failure")
        is not None
    )
    assert int(suites.get("failures")) == sum(1 for c in cases.values() if c.find("failure") is not None) > 0

    md = (out / "c.md").read_text()
    assert md.startswith("### :x: quicsm check") and "| Recovery | occupancy |" in md
    html = (out / "c.html").read_text()
    assert "behaviour changed" in html and "<svg" in html and "SlowStart -&gt; Recovery" in html


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not json", "not a baseline bundle"),
        (b'{"format": "quicsm-baseline", "format_version": 9}', "newer than this quicsm"),
    ],
)
def test_bad_bundle_exits_2_with_one_line(logs, content: bytes, message: str) -> None:
    bad = logs["dir"] / "bad.qsb"
    bad.write_bytes(content)
    res = _run("check", str(bad), str(logs["same"]))
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0] and "bad.qsb" in lines[0]


def test_bad_config_and_missing_runs_exit_2(logs) -> None:
    bundle = str(logs["dir"] / "base2.qsb")
    assert _run("baseline", "save", str(logs["base"]), "-o", bundle).exit_code == 0
    cfg = logs["dir"] / "check.toml"
    cfg.write_text("alpha = 1.5\n")
    res = _run("check", bundle, str(logs["same"]), "--config", str(cfg))
    assert res.exit_code == 2 and "check.toml" in res.output and "alpha" in res.output
    res = _run("check", bundle, str(logs["dir"] / "nothing-here.log"))
    assert res.exit_code == 2 and "Error:" in res.output


def test_bundle_as_new_input_checks_a_baseline_against_itself(logs) -> None:
    bundle = str(logs["dir"] / "base3.qsb")
    assert _run("baseline", "save", str(logs["base"]), "-o", bundle).exit_code == 0
    res = _run("check", bundle, bundle, "--format", "json")
    assert res.exit_code == 0
    assert json.loads(res.output)["verdict"] == "same"


def test_testbed_matrix_check_refuses_a_bad_baseline_before_any_run(logs) -> None:
    toml = logs["dir"] / "m.toml"
    toml.write_text('out = "runs"\n[[scenario]]\nname = "a"\n')
    bad = logs["dir"] / "bad-m.qsb"
    bad.write_bytes(b"{}")
    res = _run("testbed", "matrix", str(toml), "--dry-run", "--check", str(bad))
    assert res.exit_code == 2 and "bad-m.qsb" in res.output and "not a baseline bundle" in res.output
    good = str(logs["dir"] / "base-m.qsb")
    assert _run("baseline", "save", str(logs["base"]), "-o", good).exit_code == 0
    assert _run("testbed", "matrix", str(toml), "--dry-run", "--check", good).exit_code == 0
