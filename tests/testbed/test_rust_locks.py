"""Every Rust crate in the repository is pinned (issue 17.2): a committed Cargo.lock, or one lock per supported
version of the QUIC crate it builds against (that --locked builds use: test_quiche_build, test_bbr_long_e2e)."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import pytest

from quicsm.testbed import quiche_build, quinn_build, stacks

ROOT = Path(__file__).resolve().parents[2]


def _crates() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--", "*Cargo.toml"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if listed.returncode == 0 and listed.stdout.strip():
        return [ROOT / p for p in listed.stdout.split()]
    return [p for p in ROOT.rglob("Cargo.toml") if "target" not in p.parts]  # not a git checkout


def test_every_crate_has_a_committed_lock() -> None:
    crates = _crates()
    assert {p.parent.relative_to(ROOT).as_posix() for p in crates} >= {
        "testbed/quiche-server",
        "testbed/quinn-server",
        "tests/drivers/quiche_qlog",
    }
    for manifest in crates:
        locks = [manifest.parent / "Cargo.lock", *sorted((manifest.parent / "locks").glob("*.lock"))]
        present = [p for p in locks if p.is_file()]
        assert present, f"{manifest.relative_to(ROOT)}: no Cargo.lock and no locks/*.lock beside it"
        for lock in present:
            packages = tomllib.loads(lock.read_text(encoding="utf-8")).get("package", [])
            assert any(p.get("source", "").startswith("registry+") for p in packages), f"{lock}: locks no crate"


@pytest.mark.parametrize(("stack", "crate"), [("quiche", "quiche"), ("quinn", "quinn-proto")])
def test_each_supported_version_has_its_lock(stack: str, crate: str) -> None:
    """A supported version (one with shipped sets) builds from a lock that pins that very version."""
    build = {"quiche": quiche_build, "quinn": quinn_build}[stack]
    server = ROOT / "testbed" / f"{stack}-server"
    versions = stacks.get(stack).versions()
    assert versions
    for version in versions:
        lock = build.committed_lock(server, version)
        assert lock is not None, f"{stack} {version}: no committed lock in {server / 'locks'}"
        pinned = [p for p in tomllib.loads(lock.read_text())["package"] if p["name"] == crate]
        assert [p["version"] for p in pinned] == [version], f"{lock.name} pins {crate} {pinned}"
