"""Inputs on the command line: the same expansion for every verb, and one-line errors for bad input."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import synth_cubic_lines

from quicsm.cli.main import cli
from quicsm.traces import read_traces


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    for i in range(3):
        for group in ("a", "b"):
            d = tmp_path / "runs" / f"{group}-{i}"
            d.mkdir(parents=True)
            lines = synth_cubic_lines(conns=2, steps=12, seed=10 * i + (group == "b"))
            (d / "server.log").write_text("\n".join(lines) + "\n")
    return tmp_path / "runs"


@pytest.mark.parametrize("verb", ["parse", "infer", "diagram"])
def test_quoted_globs_work_for_every_verb(runs: Path, tmp_path: Path, verb: str) -> None:
    out = tmp_path / {"parse": "t.jsonl", "infer": "m.json", "diagram": "d.dot"}[verb]
    extra = [] if verb == "parse" else ["--engine", "dfg"]
    res = CliRunner().invoke(cli, [verb, str(runs / "a-*"), *extra, "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "read 3 file(s)" in res.output
    if verb == "parse":
        assert len(read_traces(str(out))) == 6


def test_compare_says_what_it_made_of_many_directories(runs: Path) -> None:
    dirs = sorted(str(p) for p in runs.iterdir())
    res = CliRunner().invoke(cli, ["compare", *dirs, "--format", "json", "-o", "-"])
    assert "6 sets, one per directory" in res.output and "quote the globs" in res.output


def test_compare_with_quoted_globs_makes_two_sets(runs: Path, tmp_path: Path) -> None:
    out = str(tmp_path / "c.json")
    res = CliRunner().invoke(cli, ["compare", str(runs / "a-*"), str(runs / "b-*"), "--format", "json", "-o", out])
    assert res.exit_code == 0, res.output
    assert "one per directory" not in res.output
    assert "compared 2 sets (" in res.output and "a-*: 6, " in res.output and "b-*: 6)" in res.output


def _bad_inputs(tmp_path: Path) -> dict[str, list[str]]:
    log = "\n".join(synth_cubic_lines(conns=1, steps=5, seed=1)) + "\n"
    cases: dict[str, list[str]] = {}
    (tmp_path / "cut.jsonl.gz").write_bytes(gzip.compress(b'{"format": "quicsm-trace"}\n' * 200)[:-25])
    cases["truncated trace file"] = [str(tmp_path / "cut.jsonl.gz")]
    (tmp_path / "deep.jsonl").write_bytes(b"[" * 200_000 + b"\n")
    cases["deeply nested trace file"] = [str(tmp_path / "deep.jsonl")]
    side = tmp_path / "side"
    side.mkdir()
    (side / "meta.json").write_bytes(b"\xff\xfe not utf-8")
    (side / "s.log").write_text(log)
    cases["binary meta.json"] = [str(side / "s.log")]
    (tmp_path / "huge.log").write_text("QUICSM v=1 conn=a t_us=" + "9" * 5000 + " cc=cubic to=A\n")
    cases["only a 5000-digit timestamp"] = [str(tmp_path / "huge.log")]
    cases["stdin twice"] = ["-", "-"]
    return cases


def test_bad_inputs_are_one_line_errors(tmp_path: Path) -> None:
    for what, args in _bad_inputs(tmp_path).items():
        res = CliRunner().invoke(cli, ["parse", *args, "-o", str(tmp_path / "out.jsonl")], input=b"")
        assert res.exit_code == 1, (what, res.output)
        assert not isinstance(res.exception, Exception) or isinstance(res.exception, SystemExit), what
        errors = [ln for ln in res.output.splitlines() if ln.startswith("Error: ")]
        assert len(errors) == 1 and "Traceback" not in res.output, (what, res.output)
        assert not (tmp_path / "out.jsonl").exists(), what


def test_gzip_log_on_stdin_with_a_cut_end(tmp_path: Path) -> None:
    lines = synth_cubic_lines(conns=2, steps=200, seed=5)
    data = gzip.compress(("\n".join(lines) + "\n").encode())[:-40]
    res = CliRunner().invoke(cli, ["parse", "-", "-o", str(tmp_path / "t.jsonl")], input=data)
    assert res.exit_code == 0, res.output
    assert "truncated input" in res.output
    assert len(read_traces(str(tmp_path / "t.jsonl"))) == 2
