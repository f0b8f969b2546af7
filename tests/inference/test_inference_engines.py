"""Engine registry and options; Synoptic jar engine: command line, DOT reading, mapping; export verb."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from inference_oracles import check_paths

from quicsm.cli.main import cli
from quicsm.errors import InferenceError
from quicsm.inference import ENGINES, infer_sequences
from quicsm.inference.export import (
    EVENT_REGEX,
    PARTITION_MAPPING,
    dump_synoptic_log,
    synoptic_arguments,
    write_synoptic_log,
)
from quicsm.inference.synoptic_jar import ENV_JAR, map_traces, parse_synoptic_dot

SEQS = [["Init", "SlowStart", "CongestionAvoidance"], ["Init", "SlowStart", "Recovery", "CongestionAvoidance"]]

# What Synoptic's DotExportFormatter writes for a model of SEQS (node and edge lines in its format).
SYNOPTIC_DOT = """digraph G {
  0 [label="CongestionAvoidance"];
  1 [label="INITIAL",shape=box];
  2 [label="Init"];
  3 [label="Recovery"];
  4 [label="SlowStart"];
  5 [label="TERMINAL",shape=diamond];
0->5 [label="P: 1.00"];
1->2 [label="P: 1.00"];
2->4 [label="P: 1.00"];
3->0 [label="P: 1.00"];
4->0 [label="P: 0.50"];
4->3 [label="P: 0.50"];
}
"""


def test_registry_lists_engines_and_refuses_unknown() -> None:
    assert {"synoptic", "ktails", "dfg", "synoptic-jar"} <= set(ENGINES)
    with pytest.raises(InferenceError, match="unknown engine 'nope'; choose one of"):
        infer_sequences(SEQS, "nope")


@pytest.mark.parametrize(
    ("engine", "opts", "message"),
    [
        ("dfg", {"k": 1}, "does not take option"),
        ("ktails", {"depth": 2}, "does not take option"),
        ("ktails", {"k": "2"}, "must be an integer"),
        ("synoptic", {"coarsen": "no"}, "must be true or false"),
        ("synoptic", {"k": True}, "must be an integer"),
    ],
)
def test_bad_options_are_refused(engine: str, opts: dict[str, object], message: str) -> None:
    with pytest.raises(InferenceError, match=message):
        infer_sequences(SEQS, engine, **opts)


def test_no_sequences_is_an_error() -> None:
    with pytest.raises(InferenceError, match="no state sequences"):
        infer_sequences([[], []], "dfg")


def test_synoptic_jar_without_jar_says_how(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_JAR, raising=False)
    with pytest.raises(InferenceError, match="--synoptic-jar PATH.*QUICSM_SYNOPTIC_JAR"):
        infer_sequences(SEQS, "synoptic-jar")
    with pytest.raises(InferenceError, match="not found"):
        infer_sequences(SEQS, "synoptic-jar", synoptic_jar="/nonexistent/synoptic.jar")


def test_synoptic_jar_without_java_says_how(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jar = tmp_path / "synoptic.jar"
    jar.write_bytes(b"PK")
    monkeypatch.setenv(ENV_JAR, str(jar))
    with pytest.raises(InferenceError, match="Java runtime.*not on PATH"):
        infer_sequences(SEQS, "synoptic-jar", java="no-such-java-binary")


def _java_regex(java: str) -> re.Pattern[str]:
    return re.compile(java.replace("(?<", "(?P<"))


def test_log_lines_parse_with_the_regex_we_give_synoptic(tmp_path: Path) -> None:
    out = tmp_path / "cubic.log"
    command = write_synoptic_log(SEQS, str(out))
    rx = _java_regex(EVENT_REGEX)
    got: dict[int, list[str]] = {}
    for line in out.read_text().splitlines():
        m = rx.match(line)
        assert m, line
        got.setdefault(int(m["trace"]), []).append(m["TYPE"])
    assert [got[i] for i in sorted(got)] == SEQS
    assert PARTITION_MAPPING == r"\k<trace>"
    assert "-r" in command and "-m" in command and f"-o {tmp_path / 'cubic'}" in command


def test_arguments_follow_synoptic_option_names() -> None:
    args = synoptic_arguments("in.log", "out/model", coarsen=False)
    assert args[args.index("-r") + 1] == EVENT_REGEX
    assert args[args.index("-m") + 1] == PARTITION_MAPPING
    assert args[args.index("-o") + 1] == "out/model"
    assert "--noCoarsening" in args and args[-1] == "in.log"
    assert "--noCoarsening" not in synoptic_arguments("in.log", "m")


def test_reserved_names_cannot_be_exported() -> None:
    import io

    with pytest.raises(InferenceError, match="trace 1"):
        dump_synoptic_log([["a"], ["TERMINAL"]], io.StringIO())


def test_dot_reader_and_trace_mapping() -> None:
    g = parse_synoptic_dot(SYNOPTIC_DOT)
    assert g.labels[1] == "INITIAL" and g.labels[5] == "TERMINAL"
    assert (4, 3) in g.edges and len(g.edges) == 6
    ids, paths = map_traces(g, SEQS)
    assert ids == [0, 1, 2, 3, 4, 5]
    assert paths == [[1, 2, 4, 0, 5], [1, 2, 4, 3, 0, 5]]
    with pytest.raises(InferenceError, match="does not accept trace 0"):
        map_traces(g, [["Init", "Recovery"]])


def test_dot_reader_errors_name_the_line() -> None:
    with pytest.raises(InferenceError, match="not a Graphviz digraph"):
        parse_synoptic_dot("hello")
    with pytest.raises(InferenceError, match=r"m.dot:3: unexpected line"):
        parse_synoptic_dot('digraph G {\n  0 [label="INITIAL"];\n  what is this\n}', "m.dot")
    with pytest.raises(InferenceError, match="exactly one TERMINAL"):
        parse_synoptic_dot('digraph G {\n  0 [label="INITIAL",shape=box];\n}')
    with pytest.raises(InferenceError, match="no label line"):
        parse_synoptic_dot('digraph G {\n  0 [label="INITIAL"];\n  1 [label="TERMINAL"];\n0->7 [];\n}')


def test_jar_engine_end_to_end_with_a_stand_in_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A script in place of java checks the arguments it gets and writes Synoptic's DOT to <prefix>.dot."""
    jar = tmp_path / "synoptic.jar"
    jar.write_bytes(b"PK")
    fake = tmp_path / "fakejava"
    fake.write_text(
        "#!/bin/sh\n"
        "prefix=''; prev=''\n"
        'for a in "$@"; do [ "$prev" = -o ] && prefix=$a; prev=$a; done\n'
        f'[ "$1" = -jar ] && [ "$2" = {jar} ] || exit 3\n'
        f"cat > \"$prefix.dot\" <<'EOF'\n{SYNOPTIC_DOT}EOF\n"
    )
    fake.chmod(0o755)
    res = infer_sequences(SEQS, "synoptic-jar", synoptic_jar=str(jar), java=str(fake))
    check_paths(res.model, res.paths, SEQS)
    assert res.model.engine == "synoptic-jar" and len(res.model.nodes) == 6
    assert "-m" in res.details["command"]


@pytest.mark.skipif(not os.environ.get(ENV_JAR) or not shutil.which("java"), reason=f"needs java and ${ENV_JAR}")
def test_real_synoptic_jar() -> None:
    seqs = SEQS * 3 + [["Init", "SlowStart", "Recovery", "CongestionAvoidance", "Recovery"]]
    res = infer_sequences(seqs, "synoptic-jar")
    check_paths(res.model, res.paths, seqs)


def test_export_verb_writes_synoptic_log_and_prints_command(tmp_path: Path, write_log) -> None:  # type: ignore[no-untyped-def]
    from conftest import synth_cubic_lines

    from quicsm.traces import parse_inputs

    log = write_log("server.log", synth_cubic_lines(4, 12, seed=5))
    out = tmp_path / "cubic.log"
    r = CliRunner().invoke(cli, ["export", str(log), "--to", "synoptic", "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    assert "java -jar synoptic.jar -r" in r.output and "-m" in r.output
    traces = parse_inputs([str(log)]).traces
    rx = _java_regex(EVENT_REGEX)
    got: dict[int, list[str]] = {}
    for line in out.read_text().splitlines():
        m = rx.match(line)
        assert m
        got.setdefault(int(m["trace"]), []).append(m["TYPE"])
    assert [got[i] for i in sorted(got)] == [t.states() for t in traces]


@pytest.mark.parametrize("engine", ["synoptic", "ktails", "dfg"])
def test_infer_verb_runs_each_engine(tmp_path: Path, write_log, engine: str) -> None:  # type: ignore[no-untyped-def]
    import json

    from conftest import synth_cubic_lines

    log = write_log("server.log", synth_cubic_lines(6, 15, seed=9))
    out = tmp_path / "model.json"
    r = CliRunner().invoke(cli, ["infer", str(log), "--engine", engine, "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    model = json.loads(out.read_text())
    assert model["engine"] == engine and model["traces"] == 6
    sums: dict[int, float] = {}
    for e in model["edges"]:
        sums[e["src"]] = sums.get(e["src"], 0.0) + e["probability"]
    assert sums and all(abs(v - 1) < 1e-9 for v in sums.values())


def test_infer_verb_reports_an_option_the_engine_lacks(write_log) -> None:  # type: ignore[no-untyped-def]
    from conftest import synth_cubic_lines

    log = write_log("server.log", synth_cubic_lines(2, 5))
    r = CliRunner().invoke(cli, ["infer", str(log), "--engine", "dfg", "-k", "2", "-q"])
    assert r.exit_code != 0 and "does not take option(s) k" in r.output


def test_dot_reader_takes_older_synoptic_output() -> None:
    """Older releases write 'digraph {', mark first/last events by shape and end edge lists with ',]'."""
    old = (
        'digraph {\n  0 [label="enter-pin",shape=box];\n  1 [label="access-granted",shape=diamond];\n'
        '  2 [label="retry"];\n0->1 [label="0.50", weight="0.50"];\n0->2 [label="",];\n2->0 [label="",];\n'
        "} // digraph {\n"
    )
    g = parse_synoptic_dot(old)
    init = next(n for n, v in g.labels.items() if v == "INITIAL")
    term = next(n for n, v in g.labels.items() if v == "TERMINAL")
    assert (init, 0) in g.edges and (1, term) in g.edges and len(g.edges) == 5
    _, paths = map_traces(g, [["enter-pin", "retry", "enter-pin", "access-granted"]])
    assert paths == [[init, 0, 2, 0, 1, term]]
