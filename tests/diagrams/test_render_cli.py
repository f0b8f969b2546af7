"""``quicsm render`` end to end through click's CliRunner."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from diagram_fixtures import make_model

from quicsm.cli.main import cli
from quicsm.inference.annotate import AnnotatedModel, save_model


@pytest.fixture
def model_file(tmp_path: Path) -> tuple[Path, AnnotatedModel]:
    am = make_model(14, seed=41)
    path = tmp_path / "model.json"
    save_model(am, str(path))
    return path, am


def test_render_svg_file(model_file: tuple[Path, AnnotatedModel], tmp_path: Path) -> None:
    path, am = model_file
    out = tmp_path / "pics" / "model.svg"
    result = CliRunner().invoke(cli, ["render", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert f"to {out}" in result.output
    svg = out.read_text()
    assert svg.startswith("<?xml") and "</svg>" in svg
    states = [n for n in am.nodes if n.kind == "state"]
    assert len(re.findall(r'<g id="node\d+" class="node">', svg)) == len(am.nodes) + 1  # + legend
    for n in states:
        assert f"{100 * n.time_fraction:.1f}%" in svg


def test_render_png_and_pdf_by_suffix_and_format(model_file: tuple[Path, AnnotatedModel], tmp_path: Path) -> None:
    path, _ = model_file
    runner = CliRunner()
    assert runner.invoke(cli, ["render", str(path), "-o", str(tmp_path / "m.png")]).exit_code == 0
    assert (tmp_path / "m.png").read_bytes().startswith(b"\x89PNG")
    result = runner.invoke(cli, ["render", str(path), "-o", str(tmp_path / "m.out"), "--format", "pdf"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "m.out").read_bytes().startswith(b"%PDF")


def test_stdin_model_to_stdout_dot_and_svg(model_file: tuple[Path, AnnotatedModel]) -> None:
    path, am = model_file
    runner = CliRunner()
    text = path.read_text()
    result = runner.invoke(cli, ["render", "-"], input=text)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("// quicsm state diagram")
    assert len(re.findall(r"^\s*n\d+ -> n\d+ ", result.output, re.M)) == len(am.edges)
    svg = runner.invoke(cli, ["render", "-", "--format", "svg", "-o", "-"], input=text)
    assert svg.exit_code == 0 and "<svg" in svg.output


def test_options_reach_the_diagram(model_file: tuple[Path, AnnotatedModel]) -> None:
    path, am = model_file
    threshold = sorted(e.probability for e in am.edges)[len(am.edges) // 2]
    args = ["render", str(path), "--min-prob", str(threshold), "--no-terminals", "--rankdir", "lr", "--title", "T1"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    dot = result.output
    assert "rankdir=LR" in dot and "<B>T1</B>" in dot
    term = {am.model.initial, am.model.terminal}
    expected = [e for e in am.edges if e.probability >= threshold and not ({e.src, e.dst} & term)]
    assert len(re.findall(r"^\s*n\d+ -> n\d+ ", dot, re.M)) == len(expected)
    assert 'shape="point"' not in dot
    assert "cluster_legend" not in CliRunner().invoke(cli, ["render", str(path), "--no-legend"]).output


def test_bad_inputs_give_one_line_errors(model_file: tuple[Path, AnnotatedModel], tmp_path: Path) -> None:
    path, _ = model_file
    runner = CliRunner()
    data = json.loads(path.read_text())
    data["nodes"][1]["time_fraction"] = 2
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    result = runner.invoke(cli, ["render", str(bad), "-o", str(tmp_path / "x.svg")])
    assert result.exit_code != 0
    assert f"{bad}: nodes[1].time_fraction: expected `float` <= 1.0" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "x.svg").exists()
    missing = runner.invoke(cli, ["render", str(tmp_path / "nope.json")])
    assert missing.exit_code != 0 and "no such file" in missing.output
    suffix = runner.invoke(cli, ["render", str(path), "-o", str(tmp_path / "m.jpg")])
    assert suffix.exit_code != 0 and "cannot tell the format" in suffix.output
    prob = runner.invoke(cli, ["render", str(path), "--min-prob", "2"])
    assert prob.exit_code != 0 and "--min-prob" in prob.output


def test_missing_graphviz_from_the_cli(
    model_file: tuple[Path, AnnotatedModel], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = model_file
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    monkeypatch.delenv("QUICSM_DOT", raising=False)
    result = CliRunner().invoke(cli, ["render", str(path), "-o", str(tmp_path / "m.svg")])
    assert result.exit_code != 0 and "apt-get install graphviz" in result.output
    assert CliRunner().invoke(cli, ["render", str(path), "-o", str(tmp_path / "m.dot")]).exit_code == 0


def test_help_has_an_example() -> None:
    result = CliRunner().invoke(cli, ["render", "--help"])
    assert result.exit_code == 0
    assert "quicsm render model.json -o model.svg" in result.output
    for option in ("--min-prob", "--no-terminals", "--rankdir", "--title", "--format"):
        assert option in result.output


def test_several_models_side_by_side(tmp_path: Path) -> None:
    desktop, mobile = make_model(12, seed=42), make_model(12, seed=43, app_limited_weight=5)
    save_model(desktop, str(tmp_path / "desktop.json"))
    save_model(mobile, str(tmp_path / "mobile.json"))
    args = ["render", str(tmp_path / "desktop.json"), str(tmp_path / "mobile.json"), "-o", str(tmp_path / "fig.dot")]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "2 models side by side" in result.output
    dot = (tmp_path / "fig.dot").read_text()
    assert "<B>desktop</B>" in dot and "<B>mobile</B>" in dot
    for i, am in enumerate((desktop, mobile)):
        assert len(re.findall(rf"^\s*m{i}n\d+ -> m{i}n\d+ ", dot, re.M)) == len(am.edges)
    two_stdin = CliRunner().invoke(cli, ["render", "-", "-"], input="{}")
    assert two_stdin.exit_code != 0 and "stdin" in two_stdin.output


def test_a_failed_drawing_leaves_no_report_or_model_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Graphviz refusing the picture (here a dot that always fails) fails the command and leaves none of its
    other outputs: diagram's --json, compare's text/--html/--heatmap (issue 36 item 5)."""
    from quicsm.cli.main import cli
    from quicsm.diagrams.render import DOT_ENV

    monkeypatch.setenv(DOT_ENV, "/bin/false")
    root = Path(__file__).resolve().parents[2] / "traces" / "fig13"
    runner = CliRunner()
    res = runner.invoke(
        cli, ["diagram", str(root / "desktop"), "-o", str(tmp_path / "m.svg"), "--json", str(tmp_path / "m.json")]
    )
    assert res.exit_code != 0 and "Traceback" not in res.output
    res = runner.invoke(
        cli,
        [
            "compare",
            str(root / "desktop"),
            str(root / "mobile"),
            "-o",
            str(tmp_path / "cmp.txt"),
            "--html",
            str(tmp_path / "r.html"),
            "--diagram",
            str(tmp_path / "d.svg"),
        ],
    )
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == []
