"""An installed quicsm carries the testbed sources: setup.py's build_py copies them into the package, and
the lookup finds that copy when there is no checkout (issue 11: ``pip install`` then ``quicsm testbed run``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from quicsm.errors import TestbedError
from quicsm.testbed import sources

ROOT = Path(__file__).resolve().parents[2]


def test_build_py_ships_the_testbed_sources(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    proc = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(lib)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    shipped = lib / "quicsm" / "testbed" / "_src"
    for name in sources.PROGRAM_DIRS:
        theirs = sorted(p.relative_to(ROOT / "testbed" / name) for p in (ROOT / "testbed" / name).rglob("*.go"))
        ours = sorted(p.relative_to(shipped / name) for p in (shipped / name).rglob("*.go"))
        assert ours == theirs, name
    assert (shipped / "server" / "go.mod").is_file() and (shipped / "quiche-server" / "Cargo.toml").is_file()
    assert (shipped / "quiche-server" / "src" / "main.rs").is_file()
    assert not (shipped / "quiche-server" / "target").exists()
    assert (lib / "quicsm" / "patches" / "cloudflare-quiche").is_dir()
    # without a checkout the installed copy is used
    assert sources.testbed_root(candidates=(tmp_path / "no-checkout", shipped)) == shipped
    assert sources.testbed_root("relay/go.mod", candidates=(tmp_path / "no-checkout", shipped)) == shipped


def test_missing_sources_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(TestbedError, match="reinstall quicsm") as exc:
        sources.testbed_root(candidates=(tmp_path,))
    assert "\n" not in str(exc.value)
