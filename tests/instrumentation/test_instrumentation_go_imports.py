"""quic-go ports across eras: the import block is rebuilt for the new file, or the port is refused.

Synthetic Go files for the unit tests; the end-to-end test ports a shipped v0.52.0 set to the v0.65.0
module from the Go module cache (put there by .ci/install.d/quic-go.sh) and builds the result with Go.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from quicsm.cli.main import cli
from quicsm.instrumentation.patchset import find_patch_set, load_patch_set
from quicsm.instrumentation.porter import plan_port
from quicsm.instrumentation.targets import Located, get_target
from quicsm.instrumentation.targets.quic_go import add_imports, go_imports

GO = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
TWO_GROUPS = (
    'package congestion\n\nimport (\n\t"fmt"\n\t"time"\n\n\t"example.com/m/internal/protocol"\n)\n\nfunc f() {}\n'
)
ONE_GROUP = (
    'package congestion\n\nimport (\n\t"example.com/m/internal/monotime"\n\t"example.com/m/internal/protocol"\n)\n'
)


def test_std_import_goes_into_the_std_group_in_order():
    out = add_imports(TWO_GROUPS, ["log", "strconv"])
    assert '\t"fmt"\n\t"log"\n\t"strconv"\n\t"time"\n\n\t"example.com/m/internal/protocol"\n' in out
    assert go_imports(out.splitlines())[0].keys() == {"fmt", "log", "strconv", "time", "protocol"}


def test_std_group_is_made_when_the_block_has_none():
    out = add_imports(ONE_GROUP, ["time", "log"])
    assert 'import (\n\t"log"\n\t"time"\n\n\t"example.com/m/internal/monotime"\n' in out


def test_block_is_made_when_the_file_has_none():
    out = add_imports("package x\n\nfunc f() {}\n", ["time"])
    assert out.startswith('package x\n\nimport (\n\t"time"\n)\n')


def test_finish_ported_adds_what_the_added_lines_use(tmp_path):
    target = get_target("quic-go")
    loc = Located("quic-go", tmp_path, {}, "checkout")
    added = ['\tlog.Printf("%s", strconv.Itoa(int(time.Since(t))))']
    set_lines = ["import (", '\t"fmt"', '\t"log"', '\t"strconv"', '\t"time"', ")"]
    text, problems = target.finish_ported(loc, "internal/congestion/x.go", ONE_GROUP, added, set_lines)
    assert problems == []
    assert set(go_imports(text.splitlines())[0]) >= {"log", "strconv", "time"}
    assert "fmt" not in go_imports(text.splitlines())[0]  # not used by the added lines: not imported
    assert target.check_ported("internal/congestion/x.go", text, added) == []
    missing = target.check_ported("internal/congestion/x.go", ONE_GROUP, added)
    assert sorted(m.split()[5].rstrip(",") for m in missing) == ["log", "strconv", "time"]


def test_finish_ported_refuses_a_module_package_the_version_lacks(tmp_path):
    target = get_target("quic-go")
    loc = Located("quic-go", tmp_path, {}, "checkout")
    added = ["\tc.tracer.UpdatedCongestionState(logging.CongestionStateSlowStart)"]
    set_lines = ['\t"github.com/quic-go/quic-go/logging"']
    _, problems = target.finish_ported(loc, "internal/congestion/x.go", ONE_GROUP, added, set_lines)
    assert problems and "logging" in problems[0] and "does not have" in problems[0]
    (tmp_path / "logging").mkdir()
    text, problems = target.finish_ported(loc, "internal/congestion/x.go", ONE_GROUP, added, set_lines)
    assert problems == [] and '\t"github.com/quic-go/quic-go/logging"\n' in text


def _module(version: str) -> Path:
    """The module from the Go module cache; downloaded if Go is there and the cache lacks it."""
    d = Path.home() / f"go/pkg/mod/github.com/quic-go/quic-go@{version}"
    if not d.is_dir() and GO:
        subprocess.run(
            [GO, "mod", "download", f"github.com/quic-go/quic-go@{version}"],
            cwd="/tmp",
            env={**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": ""},
            capture_output=True,
            check=False,
        )
    if not d.is_dir():
        pytest.skip(f"quic-go@{version} not in the Go module cache (scripts/install.sh puts it there)")
    return d


def _writable_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)
    return dst


@pytest.mark.slow  # builds the ported module with Go
@pytest.mark.skipif(GO is None, reason="Go toolchain not installed")
def test_v052_set_ported_to_v065_imports_time_and_builds(tmp_path):
    tree = _writable_copy(_module("v0.65.0"), tmp_path / "quic-go@v0.65.0")
    res = plan_port(find_patch_set("quic-go-v0.52.0-reno"), tree)
    assert res.ok, res.failures
    cubic = "internal/congestion/cubic_sender.go"
    assert '\t"time"\n' not in res.pristine[cubic].decode()
    assert '\t"log"\n\t"strconv"\n\t"time"\n\n' in res.placed[cubic].decode()
    for rel, data in res.placed.items():
        (tree / rel).write_bytes(data)
    env = {**os.environ, "GOFLAGS": "-mod=mod"}
    b = subprocess.run(
        [GO, "build", "./internal/congestion/", "./internal/ackhandler/"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert b.returncode == 0, b.stderr[-2000:]


def test_port_without_algorithm_ports_every_one(tmp_path):
    tree = _writable_copy(_module("v0.52.0"), tmp_path / "quic-go@v0.52.0")
    out = tmp_path / "ported"
    res = CliRunner().invoke(cli, ["patch", "port", str(tree), "-o", str(out)])
    assert res.exit_code == 0, res.output
    made = {load_patch_set(d).algorithm: d.name for d in out.iterdir()}
    assert set(made) == {"cubic", "reno"}, made
    assert all(json.loads((out / n / "manifest.json").read_text())["era"] == "go-b" for n in made.values())
    again = CliRunner().invoke(cli, ["patch", "port", str(tree), "-o", str(out)])
    assert again.exit_code != 0 and "already exists" in again.output
    assert {d.name for d in out.iterdir()} == set(made.values())
