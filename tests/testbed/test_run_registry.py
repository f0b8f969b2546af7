"""The run registry: cleanup may remove what killed runs of this user left, never a running testbed's."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from quicsm.testbed import registry


@pytest.fixture(autouse=True)
def _registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "runs"
    monkeypatch.setenv("QUICSM_RUN_REGISTRY", str(d))
    return d


def _dead_pid() -> int:
    """A pid that was a process of ours and has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_registered_for_the_length_of_the_block(tmp_path: Path) -> None:
    with registry.registered("ab12cd", "qsm", tmp_path / "run-00") as entry:
        (found,) = registry.entries()
        assert found == entry and found.pid == os.getpid() and found.stem == "qsmab12cd-"
        assert registry.owner_alive(found)
    assert registry.entries() == []


def test_a_reused_pid_is_not_the_owner(tmp_path: Path) -> None:
    e = registry.register("aa0001", "qsm", tmp_path)
    assert registry.owner_alive(e)
    stale = dataclasses.replace(e, pid_start=(e.pid_start or 0) + 1)
    assert not registry.owner_alive(stale)


def test_plan_removes_only_leftovers_of_this_user(_registry: Path, tmp_path: Path) -> None:
    live = registry.register("live01", "qsm", tmp_path / "live")
    _registry.mkdir(exist_ok=True)
    dead = {"tag": "dead01", "prefix": "qsm", "pid": _dead_pid(), "pid_start": None, "uid": os.getuid()}
    other = {**dead, "tag": "othr01", "uid": os.getuid() + 1}
    for d in (dead, other):
        (_registry / f"{d['tag']}.json").write_text(json.dumps({**d, "run_dir": "x", "started": 0.0}))
    (_registry / "broken.json").write_text("{not json")
    namespaces = ["qsmlive01-srv", "qsmdead01-srv", "qsmdead01-cli", "qsmothr01-bn", "qsmzzzz99-srv", "other-ns"]
    plan = registry.plan_cleanup(namespaces, "qsm")
    assert [e.tag for e in plan.leftovers] == ["dead01"]
    assert [e.tag for e in plan.running] == [live.tag]
    assert [e.tag for e in plan.others] == ["othr01"]
    assert plan.unregistered == ["qsmzzzz99-srv"]
