"""Baseline bundles: round trip, deterministic bytes, and a clear error for every kind of damage."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from check_fixtures import make_rows

from quicsm.check import load_baseline, make_baseline, read_baseline, save_baseline
from quicsm.check.bundle import BUNDLE_FORMAT_VERSION, bundle_bytes
from quicsm.errors import InputError
from quicsm.traces.events import StateView


@pytest.fixture(scope="module")
def baseline():
    return make_baseline(
        [("a", "synthetic", make_rows("a", 8, seed=1)), ("b", "synthetic", make_rows("b", 5, seed=2))],
        split_by="scenario",
    )


def _doc(b) -> dict:
    return json.loads(gzip.decompress(bundle_bytes(b)))


def test_round_trip_keeps_rows_model_and_labels(tmp_path: Path, baseline) -> None:
    path = tmp_path / "base.qsb"
    size = save_baseline(baseline, str(path))
    assert size == path.stat().st_size > 0
    got = load_baseline(str(path))
    assert got.split_by == "scenario" and got.engine == "dfg" and got.view == StateView()
    assert [s.name for s in got.sets] == ["a", "b"]
    for mine, theirs in zip(baseline.sets, got.sets):
        assert [
            (r.id, r.states, r.durations_us, r.events, r.duration_us, r.trace.cc, r.trace.labels) for r in mine.rows
        ] == [
            (r.id, r.states, r.durations_us, r.events, r.duration_us, r.trace.cc, r.trace.labels) for r in theirs.rows
        ]
        timeless = {k: v for k, v in mine.model.to_json()["meta"].items() if not k.endswith("_seconds")}
        assert theirs.model.to_json() == {**mine.model.to_json(), "meta": timeless}
    assert bundle_bytes(got) == bundle_bytes(baseline), "the same content gives the same bytes"


def test_the_same_inputs_give_the_same_bytes() -> None:
    """docs/check.md promises it; the models' inference_seconds once made every save differ."""
    rows = make_rows("a", 8, seed=1)
    first, second = (bundle_bytes(make_baseline([("a", "synthetic", rows)])) for _ in range(2))
    assert b"_seconds" not in gzip.decompress(first)
    assert first == second


def test_bundle_holds_no_events(baseline) -> None:
    doc = _doc(baseline)
    assert doc["format"] == "quicsm-baseline" and doc["format_version"] == BUNDLE_FORMAT_VERSION
    conn = doc["sets"][0]["connections"][0]
    assert set(conn) == {
        "id",
        "cc",
        "states",
        "durations_us",
        "events",
        "duration_us",
        "implementation",
        "version",
        "labels",
    }
    assert all(isinstance(k, int) for k in conn["states"]) and len(conn["states"]) == len(conn["durations_us"])


def _damaged(baseline, edit) -> bytes:
    doc = _doc(baseline)
    edit(doc)
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(format="quicsm-model"), "format: expected 'quicsm-baseline'"),
        (lambda d: d.update(format_version=BUNDLE_FORMAT_VERSION + 1), "newer than this quicsm reads"),
        (lambda d: d.update(format_version="1"), "format_version: expected a version number"),
        (lambda d: d.update(colour="red"), "colour: unknown key (known: engine, format"),
        (
            lambda d: d["sets"][0]["connections"][2].update(events="7"),
            "base.qsb: sets[0].connections[2].events: expected `int`",
        ),
        (lambda d: d["sets"][0]["connections"][1]["durations_us"].append(5), "sets[0].connections[1]: "),
        (lambda d: d["sets"][0]["connections"][0]["states"].__setitem__(0, 99), "index 99 out of range"),
        (lambda d: d["sets"][0]["connections"][0]["durations_us"].__setitem__(0, -1), ">= 0"),
        (lambda d: d["sets"][1]["connections"][1].update(id=d["sets"][1]["connections"][0]["id"]), "appears twice"),
        (lambda d: d["sets"][1].update(name="a"), "set 'a' appears twice"),
        (lambda d: d.update(sets=[]), "no set"),
        (lambda d: d["sets"][0].update(connections=[]), "empty"),
        (lambda d: d["sets"][0]["model"].update(traces=3), "model.traces: 3, but the set holds 8"),
        (
            lambda d: d["sets"][0]["model"]["nodes"][1].update(time_fraction=2.0),
            "time_fraction: expected `float` <= 1.0",
        ),
        (lambda d: d.update(engine="ktails"), "model.engine"),
        (
            lambda d: d["sets"][0]["connections"][2].update(events=int("9" * 400)),
            "base.qsb: sets[0].connections[2].events: expected `int`",
        ),
        (lambda d: d["sets"][0]["connections"][1].update(duration_us=10**400), "connections[1].duration_us"),
        (lambda d: d["sets"][0]["connections"][0]["durations_us"].__setitem__(0, 10**400), "durations_us[0]"),
        (lambda d: d["sets"][0]["connections"][0].update(durations_us=[2**53] * 5, states=[0] * 5), "add up to more"),
        (
            lambda d: d["sets"][0]["model"]["nodes"][1].update(visits=10**400),
            "model: nodes[1].visits: expected `int` <=",
        ),
        (lambda d: d["sets"][0]["model"]["edges"][0].update(count=10**400), "model: edges[0].count: expected `int` <="),
        (lambda d: d.update(states=["X", "X"]), "appears twice"),
    ],
)
def test_damage_is_an_error_naming_file_field_and_reason(baseline, edit, message: str) -> None:
    with pytest.raises(InputError) as err:
        read_baseline(_damaged(baseline, edit), "base.qsb")
    assert str(err.value).startswith("base.qsb: ")
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "x.qsb:1: not a baseline bundle: not valid JSON (Input data was truncated)"),
        (
            b"QUICSM v=1 conn=a t_us=1 cc=reno to=SlowStart\n",
            "x.qsb:1: not a baseline bundle: not valid JSON (JSON is malformed: invalid character (byte 0))",
        ),
        (b"[1, 2]", "x.qsb: not a baseline bundle: expected `object`, got `array`"),
        (
            b'{"format": "quicsm-baseline",\n "format_version": 1',
            "x.qsb:2: not a baseline bundle: not valid JSON (Input data was truncated)",
        ),
        (b'{"format": 1,\n\n,}', "x.qsb:3: not a baseline bundle: not valid JSON (JSON is malformed"),
        (b'{"format": "\xff"}', "x.qsb: not a baseline bundle: not valid JSON (not UTF-8 text at byte"),
        (b'{"format": "x"}', "x.qsb: format: expected 'quicsm-baseline', got 'x' (not a baseline bundle)"),
    ],
)
def test_not_a_bundle(data: bytes, message: str) -> None:
    """The header is decoded through formats.checked: one wording per condition, at its line."""
    with pytest.raises(InputError) as err:
        read_baseline(data, "x.qsb")
    assert str(err.value).startswith(message), str(err.value)


def test_truncated_gzip_and_missing_file(tmp_path: Path, baseline) -> None:
    path = tmp_path / "cut.qsb"
    path.write_bytes(bundle_bytes(baseline)[:200])
    with pytest.raises(InputError, match=r"cut.qsb: .*(truncated|corrupt)"):
        load_baseline(str(path))
    with pytest.raises(InputError, match="no such file"):
        load_baseline(str(tmp_path / "none.qsb"))


def test_empty_set_is_refused() -> None:
    with pytest.raises(InputError, match="holds no connection"):
        make_baseline([("a", "x", [])])


def test_big_integers_never_reach_show_or_check(tmp_path: Path, baseline) -> None:
    from click.testing import CliRunner

    from quicsm.cli.main import cli

    doc = _doc(baseline)
    doc["sets"][0]["connections"][0]["duration_us"] = int("9" * 400)
    path = tmp_path / "big.qsb"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    for args in (["baseline", "show", str(path)], ["check", str(path), str(path)]):
        res = CliRunner().invoke(cli, args)
        assert res.exit_code in (1, 2) and "internal error" not in res.output and "Traceback" not in res.output
        assert f"{path}: sets[0].connections[0].duration_us: expected `int` <= 9007199254740992" in res.output


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"alpha = 0.01\n# \xff\xfe\n", "not valid TOML (not UTF-8 text at byte 15)"),
        (b"x = " + b"[" * 100_000 + b"]" * 100_000 + b"\n", "not valid TOML (nested too deeply)"),
        (b"\0" * 100, "not valid TOML"),
    ],
)
def test_a_bad_config_names_the_file(tmp_path: Path, data: bytes, message: str) -> None:
    from quicsm.check import load_config

    path = tmp_path / "check.toml"
    path.write_bytes(data)
    with pytest.raises(InputError) as err:
        load_config(str(path))
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value)


def test_dev_zero_is_not_a_bundle() -> None:
    with pytest.raises(InputError, match="/dev/zero: not a baseline bundle"):
        load_baseline("/dev/zero")


def test_a_bundle_saved_when_init_was_a_stay_reads_without_it(baseline) -> None:
    """Before 2026-11-28 every connection began with a zero-time ``Init`` stay (now the start marker only,
    decisions.md): an old baseline's rows drop it, so they line up with new runs' rows."""
    doc = _doc(baseline)
    doc["states"].append("Init")
    init = len(doc["states"]) - 1
    for conn in doc["sets"][0]["connections"]:
        conn["states"].insert(0, init)
        conn["durations_us"].insert(0, 0)
    got = read_baseline(json.dumps(doc).encode())
    assert [r.states for r in got.sets[0].rows] == [r.states for r in baseline.sets[0].rows]
    assert [r.durations_us for r in got.sets[0].rows] == [r.durations_us for r in baseline.sets[0].rows]
