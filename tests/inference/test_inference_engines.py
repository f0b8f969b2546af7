"""Engine registry and options; Synoptic jar engine: command line, JSON model reading, Java 17; export verb."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from inference_oracles import check_paths

from quicsm.cli.main import cli
from quicsm.errors import InferenceError, InputError, OptionError
from quicsm.inference import ENGINES, infer_sequences
from quicsm.inference.export import (
    EVENT_REGEX,
    PARTITION_MAPPING,
    dump_synoptic_log,
    model_prefix,
    synoptic_arguments,
    synoptic_command_line,
)
from quicsm.inference.synoptic_jar import ENV_JAR, JAVA17_FAILURE, MAIN_CLASS, event_nodes, read_synoptic_json

SEQS = [["Init", "SlowStart", "CongestionAvoidance"], ["Init", "SlowStart", "Recovery", "CongestionAvoidance"]]

# What Synoptic (ModelInference/synoptic HEAD, --randomSeed=1 -j) wrote for SEQS, invariants left out.
SYNOPTIC_JSON = '{"log": [{"traceID": 0, "events": [{"eventIndex": 0, "eventType": "Init", "logLine": 1, "timestamp": 1}, {"eventIndex": 1, "eventType": "SlowStart", "logLine": 2, "timestamp": 2}, {"eventIndex": 2, "eventType": "CongestionAvoidance", "logLine": 3, "timestamp": 3}]}, {"traceID": 1, "events": [{"eventIndex": 0, "eventType": "Init", "logLine": 4, "timestamp": 4}, {"eventIndex": 1, "eventType": "SlowStart", "logLine": 5, "timestamp": 5}, {"eventIndex": 2, "eventType": "Recovery", "logLine": 6, "timestamp": 6}, {"eventIndex": 3, "eventType": "CongestionAvoidance", "logLine": 7, "timestamp": 7}]}], "partitions": [{"eventType": "Init", "events": [{"traceID": 0, "eventIndex": 0}, {"traceID": 1, "eventIndex": 0}]}, {"eventType": "SlowStart", "events": [{"traceID": 0, "eventIndex": 1}, {"traceID": 1, "eventIndex": 1}]}, {"eventType": "CongestionAvoidance", "events": [{"traceID": 0, "eventIndex": 2}, {"traceID": 1, "eventIndex": 3}]}, {"eventType": "Recovery", "events": [{"traceID": 1, "eventIndex": 2}]}]}'


def test_registry_lists_engines_and_refuses_unknown() -> None:
    assert {"synoptic", "ktails", "dfg", "synoptic-jar"} <= set(ENGINES)
    with pytest.raises(OptionError, match="unknown engine 'nope'; choose one of"):
        infer_sequences(SEQS, "nope")


@pytest.mark.parametrize(
    ("engine", "opts", "message"),
    [
        ("dfg", {"k": 1}, "k applies to engine synoptic and ktails only"),
        ("ktails", {"depth": 2}, r"does not take option\(s\) depth \(it takes: k\)"),
        ("synoptic-jar", {"refine": "stitch"}, "refine applies to engine synoptic only"),
        ("synoptic", {"seed": 2, "refine": "stitch"}, "seed replays Synoptic's own refinement: leave out refine"),
        ("ktails", {"k": "2"}, "must be an integer"),
        ("synoptic", {"coarsen": "no"}, "must be true or false"),
        ("synoptic", {"k": True}, "must be an integer"),
    ],
)
def test_bad_options_are_refused(engine: str, opts: dict[str, object], message: str) -> None:
    with pytest.raises(OptionError, match=message):
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


def _jar(path: Path, entry: str = MAIN_CLASS) -> Path:
    """A zip laid out as Synoptic's jar (its main class entry), for the checks made before running it."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(entry, b"\xca\xfe\xba\xbe")
    return path


def test_synoptic_jar_that_is_not_synoptics_is_refused(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.jar"
    garbage.write_bytes(b"not a zip")
    with pytest.raises(InferenceError, match="garbage.jar: not a jar"):
        infer_sequences(SEQS, "synoptic-jar", synoptic_jar=str(garbage))
    other = _jar(tmp_path / "other.jar", "org/example/Main.class")
    with pytest.raises(InferenceError, match="other.jar: not Synoptic's jar"):
        infer_sequences(SEQS, "synoptic-jar", synoptic_jar=str(other))


def test_synoptic_jar_without_java_says_how(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jar = _jar(tmp_path / "synoptic.jar")
    monkeypatch.setenv(ENV_JAR, str(jar))
    with pytest.raises(InferenceError, match="Java runtime.*not on PATH"):
        infer_sequences(SEQS, "synoptic-jar", java="no-such-java-binary")


def _java_regex(java: str) -> re.Pattern[str]:
    return re.compile(java.replace("(?<", "(?P<"))


def test_log_lines_parse_with_the_regex_we_give_synoptic(tmp_path: Path) -> None:
    out = tmp_path / "cubic.log"
    with out.open("w") as fh:
        dump_synoptic_log(SEQS, fh)
    command = shlex.join(synoptic_command_line(str(out), model_prefix(str(out))))
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


def test_json_reader_uses_synoptics_own_event_map(tmp_path: Path) -> None:
    path = tmp_path / "model.json"
    path.write_text(SYNOPTIC_JSON)
    model = read_synoptic_json(str(path))
    assert model.labels == ["INITIAL", "Init", "SlowStart", "CongestionAvoidance", "Recovery", "TERMINAL"]
    assert event_nodes(model, SEQS, "m").tolist() == [0, 1, 2, 3, 5, 0, 1, 2, 4, 3, 5]
    with pytest.raises(InferenceError, match="does not place trace 1 event 2"):
        event_nodes(model, [SEQS[0], ["Init", "SlowStart", "Init", "CongestionAvoidance"]], "m")


def test_json_reader_errors_name_the_file_and_field(tmp_path: Path) -> None:
    """Synoptic's JSON is declared (msgspec) and said in formats.checked's words, as every other file."""
    bad = tmp_path / "m.json"
    for text, said in (
        ('{"log": [', "m.json:1: Synoptic's model: not valid JSON (Input data was truncated)"),
        ("[]", "m.json: Synoptic's model: expected `object`, got `array`"),
        (
            '{"log": [{"traceID": 0, "events": [{"eventIndex": 0}]}], "partitions": []}',
            "m.json: Synoptic's model: log[0].events[0].logLine: required key missing",
        ),
        (
            '{"log": [{"traceID": true, "events": []}], "partitions": []}',
            "m.json: Synoptic's model: log[0].traceID: expected `int`, got `bool`",
        ),
        (
            '{"log": [], "partitions": [{"eventType": "a", "events": [{"traceID": 0, "eventIndex": 0}]}]}',
            "m.json: Synoptic's model: partitions[0].events[0] names an event the log does not hold",
        ),
    ):
        bad.write_text(text)
        with pytest.raises(InferenceError) as err:
            read_synoptic_json(str(bad))
        assert str(err.value) == f"{tmp_path}/{said}"
    with pytest.raises(InputError, match=f"^{re.escape(str(tmp_path))}: is a directory$"):
        read_synoptic_json(str(tmp_path))


def _stand_in_java(tmp_path: Path, body: str) -> tuple[Path, Path]:
    """A script in place of java: records its arguments (``args``), drops JVM options up to -jar."""
    jar = _jar(tmp_path / "synoptic.jar")
    fake = tmp_path / "fakejava"
    fake.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$@" > {tmp_path}/args\n'
        'while [ $# -gt 0 ] && [ "$1" != -jar ]; do shift; done\n'
        "prefix=''; prev=''; seed=''\n"
        'for a in "$@"; do [ "$prev" = -o ] && prefix=$a; case $a in --randomSeed=*) seed=${a#*=};; esac; prev=$a; done\n'
        f'[ "$1" = -jar ] && [ "$2" = {jar} ] || exit 3\n' + body
    )
    fake.chmod(0o755)
    return jar, fake


def test_jar_engine_end_to_end_with_a_stand_in_java(tmp_path: Path) -> None:
    """A script in place of java checks its arguments and writes Synoptic's JSON to <prefix>.json."""
    jar, fake = _stand_in_java(
        tmp_path, f"echo $seed > {tmp_path}/seed\ncat > \"$prefix.json\" <<'EOF'\n{SYNOPTIC_JSON}\nEOF\n"
    )
    res = infer_sequences(SEQS, "synoptic-jar", synoptic_jar=str(jar), java=str(fake))
    check_paths(res.model, res.paths, SEQS)
    assert res.model.engine == "synoptic-jar" and len(res.model.nodes) == 6
    assert res.model.params["seed"] == 1 and (tmp_path / "seed").read_text().strip() == "1"
    assert "-j" in res.details["command"] and "--randomSeed=1" in res.details["command"]
    assert (tmp_path / "args").read_text().splitlines()[0] == "-jar"
    res = infer_sequences(SEQS, "synoptic-jar", synoptic_jar=str(jar), java=str(fake), seed=7)
    assert res.model.params["seed"] == 7 and (tmp_path / "seed").read_text().strip() == "7"
    infer_sequences(SEQS, "synoptic-jar", synoptic_jar=str(jar), java=str(fake), java_options=["-Xmx3g", "-Xss8m"])
    assert (tmp_path / "args").read_text().splitlines()[:3] == ["-Xmx3g", "-Xss8m", "-jar"]


def test_jar_engine_stops_synoptic_at_its_timeout(tmp_path: Path) -> None:
    jar, fake = _stand_in_java(tmp_path, "exec sleep 30\n")
    with pytest.raises(InferenceError, match=r"did not finish within 0.5 s \(stopped; give it longer with --timeout"):
        infer_sequences(SEQS, "synoptic-jar", synoptic_jar=str(jar), java=str(fake), timeout=0.5)


def test_jar_options_through_the_cli(tmp_path: Path, write_log, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """--java-option (repeatable) and --timeout reach the engine; a missing jar is said before input is read."""
    from conftest import synth_cubic_lines

    import quicsm.cli.options as options
    import quicsm.pipeline as pipeline

    log = write_log("server.log", synth_cubic_lines(3, 8, seed=2))
    jar, fake = _stand_in_java(tmp_path, f"cat > \"$prefix.json\" <<'EOF'\n{SYNOPTIC_JSON}\nEOF\n")
    seen: dict[str, object] = {}

    def learn(summary: object, engine: str, **opts: object) -> object:
        seen.update(opts, engine=engine)
        raise InferenceError("stop here")

    monkeypatch.setattr(pipeline, "learn", learn)
    base = ["infer", str(log), "--engine", "synoptic-jar", "--synoptic-jar", str(jar), "--java", str(fake), "-q"]
    r = CliRunner().invoke(cli, [*base, "--java-option=-Xmx2g", "--java-option", "-Xss4m", "--timeout", "90"])
    assert "stop here" in r.output, r.output
    assert seen == {
        "engine": "synoptic-jar",
        "synoptic_jar": str(jar),
        "java": str(fake),
        "java_options": ["-Xmx2g", "-Xss4m"],
        "timeout": 90.0,
    }

    def no_input(*args: object, **kwargs: object) -> object:
        raise AssertionError("input read before the jar was checked")

    monkeypatch.setattr(options, "load_summary", no_input)
    r = CliRunner().invoke(cli, [*base[:-5], "--synoptic-jar", str(tmp_path / "missing.jar"), "-q"])
    assert r.exit_code != 0 and "missing.jar: Synoptic jar not found" in r.output, r.output
    r = CliRunner().invoke(cli, [*base[:-3], "--java", "no-such-java-binary", "-q"])
    assert r.exit_code != 0 and "'no-such-java-binary' is not on PATH" in r.output, r.output
    r = CliRunner().invoke(cli, ["infer", str(log), "--engine", "synoptic", "--timeout", "5", "-q"])
    assert r.exit_code == 2 and "--timeout applies to --engine synoptic-jar only" in r.output


def test_jar_engine_says_which_java_when_java17_breaks_synoptic(tmp_path: Path) -> None:
    jar, fake = _stand_in_java(
        tmp_path,
        f"echo 'java.lang.ClassCastException: class java.util.regex.Matcher${JAVA17_FAILURE} ...' >&2\nexit 1\n",
    )
    with pytest.raises(InferenceError, match="Java 17 and newer break its NamedMatcher.toMatchResult"):
        infer_sequences(SEQS, "synoptic-jar", synoptic_jar=str(jar), java=str(fake))


@pytest.mark.skipif(not os.environ.get(ENV_JAR) or not shutil.which("java"), reason=f"needs java and ${ENV_JAR}")
def test_real_synoptic_jar() -> None:
    """With a real jar configured: Synoptic's model of a small log, mapped by its own event map, repeats by seed."""
    seqs = SEQS * 3 + [["Init", "SlowStart", "Recovery", "CongestionAvoidance", "Recovery"]]
    first = infer_sequences(seqs, "synoptic-jar")
    check_paths(first.model, first.paths, seqs)
    again = infer_sequences(seqs, "synoptic-jar")
    assert first.model.nodes == again.model.nodes and first.paths == again.paths


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
    assert r.exit_code == 2 and "-k applies to --engine synoptic and ktails only" in r.output


@pytest.mark.parametrize("engine", ["synoptic", "ktails", "dfg"])
def test_engines_learn_the_logged_states_only(engine: str) -> None:
    """A quic-go qlog starts in slow_start and logs no Init; the patched log's first line leaves Init, the
    start marker (decisions.md 2026-11-28). Neither gives the engines an Init state: both give one model,
    whose start (INITIAL) leads straight to SlowStart."""
    from quicsm.traces import parse_inputs

    data = Path(__file__).resolve().parents[1] / "data" / "quic-go-v0.65"
    models = []
    for name in ("server.sqlog.gz", "server.log.gz"):
        (trace,) = parse_inputs([str(data / name)]).traces
        assert trace.events[0].prev == "Init"
        model = infer_sequences([trace.states()], engine).model
        names = [n.state for n in model.nodes]
        assert "Init" not in names
        assert {names[e.dst] for e in model.edges if e.src == 0} == {"SlowStart"}
        models.append((names, [(e.src, e.dst) for e in model.edges]))
    assert models[0] == models[1]


def test_engine_rules_are_the_library_s(write_log) -> None:  # type: ignore[no-untyped-def]
    """The CLI maps flags to options; the rules (which engine takes which option, which exclude each
    other, the jar's runtime) are EngineSpec's, so the CLI and a Python caller are refused alike."""
    from conftest import synth_cubic_lines

    from quicsm.cli.options import ENGINE_FLAGS
    from quicsm.compare import CompareOptions
    from quicsm.inference import ENGINES

    log = str(write_log("server.log", synth_cubic_lines(2, 5)))
    for args, said in (
        (["--engine", "synoptic-jar", "--refine", "stitch"], "--refine applies to --engine synoptic only"),
        (["--engine", "synoptic", "--java", "java"], "--java applies to --engine synoptic-jar only"),
        (
            ["--engine", "ktails", "--synoptic-seed", "2"],
            "--synoptic-seed applies to --engine synoptic and synoptic-jar",
        ),
    ):
        r = CliRunner().invoke(cli, ["infer", log, "-q", *args])
        assert r.exit_code == 2 and said in r.output, r.output
    with pytest.raises(OptionError, match="-k applies to --engine synoptic and ktails only"):
        ENGINES["dfg"].prepare({"k": 2}, lambda n: ENGINE_FLAGS[n])
    with pytest.raises(OptionError, match="k applies to engine synoptic and ktails only"):
        CompareOptions(engine="dfg", k=3).check()  # before any model is learnt
    with pytest.raises(InferenceError, match="synoptic.jar: Synoptic jar not found"):
        ENGINES["synoptic-jar"].prepare({"synoptic_jar": "/nonexistent/synoptic.jar"})
