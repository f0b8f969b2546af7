"""Running a grid: every planned run once with the grid block in its meta.json, progress events, resuming
where an earlier call stopped (a time budget, an interrupted run), refusing to mix a changed grid into
old runs, and trying bad runs again only when asked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from grid_fixtures import FakeTestbed

import quicsm
from quicsm.errors import InputError, TestbedError
from quicsm.grids.execute import run_grid, run_state
from quicsm.grids.results import load_grid_runs
from quicsm.grids.spec import grid_from_data

DATA: dict[str, Any] = {
    "name": "t",
    "runs": 2,
    "base": {"rtt": 36},
    "axes": {"rate": [10, 50], "size": ["5KB", "1MB"]},
    "arms": {"a": {"cc": "reno"}, "b": {"cc": "cubic"}},
}


def test_every_run_once_with_its_grid_block(tmp_path: Path) -> None:
    tb = FakeTestbed(lambda cfg, r: 100.0 + r)
    g = grid_from_data(DATA)
    events: list[Any] = []
    s = run_grid(g, tmp_path, build=tb.build, run=tb.run, on_event=events.append)
    assert (s.planned, s.ran, s.good, s.found_done, s.complete) == (16, 16, 16, 0, True)
    assert tb.calls[:2] == ["rate-10_size-5KB/a-00", "rate-10_size-5KB/b-00"]
    assert [e.position for e in events] == list(range(1, 17)) and events[-1].eta_s == 0
    meta = json.loads((tmp_path / "rate-50_size-1MB" / "b-01" / "meta.json").read_text())
    assert (
        meta["grid"]["cell"] == {"rate": 50, "size": "1MB"}
        and meta["grid"]["arm"] == "b"
        and meta["grid"]["round"] == 1
    )
    assert meta["labels"]["cell"] == "rate=50,size=1MB" and meta["cc"] == "cubic"
    doc = json.loads((tmp_path / "grid.json").read_text())
    assert doc["format"] == "quicsm-grid-run" and list(doc["data"]["arms"]) == ["a", "b"]  # the file's order
    schema = json.loads((Path(quicsm.__file__).parent / "schemas" / "grid-run.schema.json").read_text())
    jsonschema.validate(doc, schema)  # the record as written holds to its declaration's schema
    runs = load_grid_runs(tmp_path)  # and reads back through it
    assert runs.grid.name == "t" and runs.grid.arm_names == ["a", "b"] and len(runs.records) == 16


@pytest.mark.parametrize(
    ("edit", "msg"),
    [
        (lambda d: d.update(format="other"), "grid.json: format: invalid enum value .other."),
        (
            lambda d: d.pop("data"),
            "grid.json: data: required key missing",
        ),
        (lambda d: d.update(data=[1]), "grid.json: data: expected `object`"),
    ],
)
def test_a_damaged_grid_json_is_refused_naming_it(tmp_path: Path, edit: Any, msg: str) -> None:
    tb = FakeTestbed(lambda cfg, r: 100.0)
    run_grid(grid_from_data(DATA), tmp_path, build=tb.build, run=tb.run, budget_s=0.0)
    doc = json.loads((tmp_path / "grid.json").read_text())
    edit(doc)
    (tmp_path / "grid.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match=msg):
        load_grid_runs(tmp_path)


def test_resume_after_a_budget_and_an_interrupted_run(tmp_path: Path) -> None:
    tb = FakeTestbed(lambda cfg, r: 100.0)
    g = grid_from_data(DATA)
    first = run_grid(g, tmp_path, build=tb.build, run=tb.run, budget_s=0.0)  # budget used up at once
    assert first.ran == 0 and not first.complete and first.left == 16 and "time budget" in first.stopped  # type: ignore[operator]
    assert any("run the same command again" in line for line in first.lines())
    run_grid(g, tmp_path, build=tb.build, run=tb.run)
    partial = tmp_path / "rate-10_size-1MB" / "b-01"
    (partial / "meta.json").unlink()  # as a run killed half-way leaves it
    tb.calls.clear()
    again = run_grid(g, tmp_path, build=tb.build, run=tb.run)
    assert tb.calls == ["rate-10_size-1MB/b-01"] and again.found_done == 15 and again.good == 16
    assert (tmp_path / "_rejected" / "rate-10_size-1MB" / "b-01-interrupted0" / "server.log").is_file()
    more = grid_from_data({**DATA, "runs": 3})  # another round: the old runs stay
    tb.calls.clear()
    s = run_grid(more, tmp_path, build=tb.build, run=tb.run)
    assert len(tb.calls) == 8 and all(c.endswith("-02") for c in tb.calls) and s.found_done == 16


def test_a_changed_grid_is_refused_before_any_run(tmp_path: Path) -> None:
    tb = FakeTestbed(lambda cfg, r: 100.0)
    run_grid(grid_from_data(DATA), tmp_path, build=tb.build, run=tb.run)
    changed = grid_from_data({**DATA, "base": {"rtt": 50}})
    tb.calls.clear()
    with pytest.raises(TestbedError, match="made with other parameters"):
        run_grid(changed, tmp_path, build=tb.build, run=tb.run)
    assert tb.calls == []


def test_bad_runs_are_reported_and_redone_only_when_asked(tmp_path: Path) -> None:
    g = grid_from_data(DATA)
    tb = FakeTestbed(lambda cfg, r: 100.0, bad={"rate-50_size-5KB/a-00"}, late_first={"rate-10_size-5KB/b-00"})
    s = run_grid(g, tmp_path, build=tb.build, run=tb.run)
    assert s.good == 15 and s.bad == [("rate-50_size-5KB/a-00", "client failed")]
    assert s.redone == [("rate-10_size-5KB/b-00", ("emulator late (kept in x)",))]
    assert run_state(g.plan()[4], tmp_path).status == "bad"
    tb.calls.clear()
    s2 = run_grid(g, tmp_path, build=tb.build, run=tb.run)
    assert tb.calls == [] and len(s2.bad) == 1
    tb.bad.clear()
    s3 = run_grid(g, tmp_path, build=tb.build, run=tb.run, redo_bad=True)
    assert tb.calls == ["rate-50_size-5KB/a-00"] and s3.good == 16
    assert (tmp_path / "_rejected" / "rate-50_size-5KB" / "a-00-bad0").is_dir()


def test_builds_happen_once_per_binary_before_the_first_run(tmp_path: Path) -> None:
    tb = FakeTestbed(lambda cfg, r: 100.0)
    order: list[str] = []

    def build(cfg: Any) -> Any:
        order.append(f"build {cfg.cc}")
        return tb.build(cfg)

    def run(*a: Any, **kw: Any) -> Any:
        order.append("run")
        return tb.run(*a, **kw)

    run_grid(grid_from_data(DATA), tmp_path, build=build, run=run)
    assert order[:2] == ["build reno", "build cubic"] and order[2:] == ["run"] * 16
