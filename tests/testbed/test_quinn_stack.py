"""The quinn stack: quinn-proto's BBR behind testbed/quinn-server, one committed lock per shipped version."""

from __future__ import annotations

from pathlib import Path

import pytest

from quicsm.errors import TestbedError
from quicsm.instrumentation.patchset import shipped_patch_sets
from quicsm.testbed import stacks
from quicsm.testbed.quinn_build import committed_lock, locked_crates, quinn_patch_set
from quicsm.testbed.runner import RunConfig
from quicsm.testbed.sources import testbed_root as _testbed_root
from quicsm.testbed.stacks import Built

SERVER = _testbed_root("quinn-server/Cargo.toml") / "quinn-server"


def test_registered_with_its_controller_and_versions() -> None:
    st = stacks.get("quinn")
    assert st.implementation == "quinn" and st.ccs == ("bbr",)
    assert st.versions() == ["0.11.9", "0.11.14", "0.11.19"]
    cfg = RunConfig(stack="quinn", cc="bbr")
    assert cfg.implementation == ("quinn", "0.11.19")
    assert cfg.label_dict()["quinn_proto_version"] == "0.11.19" and cfg.label_dict()["stack"] == "quinn"
    assert RunConfig(stack="quinn", cc="bbr", stack_version="v0.11.9").version == "0.11.9"
    with pytest.raises(TestbedError, match="cc 'cubic' on quinn: choose bbr"):
        RunConfig(stack="quinn", cc="cubic")
    with pytest.raises(TestbedError, match="client 'chromium' on quinn: choose go"):
        RunConfig(stack="quinn", cc="bbr", client="chromium")


def test_server_gets_the_controller_and_the_log_file() -> None:
    cfg = RunConfig(stack="quinn", cc="bbr", objects=2, size=1000)
    bins = Built("quinn", "0.11.19", "bbr", Path("/s"), Path("/c"), "quinn-0.11.19-bbr", True, 0.0)
    argv = cfg.server_stack.server_argv(cfg, bins, "198.18.1.1:4433", Path("/r/server.log"))
    assert argv == [
        "/s",
        "-addr",
        "198.18.1.1:4433",
        "-objects",
        "2",
        "-size",
        "1000",
        "-log",
        "/r/server.log",
        "-cc",
        "bbr",
    ]


def test_every_shipped_set_has_a_lock_pinning_its_quinn_proto() -> None:
    for ps in shipped_patch_sets("quinn"):
        version = ps.extra["crate"]["version"]
        assert quinn_patch_set(version).name == ps.name
        lock = committed_lock(SERVER, version)
        assert lock is not None, version
        crates = locked_crates(lock.read_text())
        assert crates["quinn-proto"] == version, crates  # only the patched copy, no second quinn-proto
        assert crates["h3"] == "0.0.7" and crates["h3-quinn"] in ("0.0.8", "0.0.9")
    with pytest.raises(TestbedError, match="no patch set quinn-0.11.2-bbr"):
        quinn_patch_set("0.11.2")


def test_qlog_beside_the_contract_lines_where_quinn_has_a_qlog_writer(tmp_path: Path) -> None:
    """`qlog = true` gives the server `-qlog <run>/qlog` (quinn-proto's own qlog, metrics only: the truth
    for the metric-state reader is the contract lines); quinn-proto 0.11.9 has no qlog writer: refused."""
    from quicsm.testbed.quinn_build import _without_features, has_qlog

    cfg = RunConfig(stack="quinn", cc="bbr", qlog=True)
    bins = Built("quinn", "0.11.19", "bbr", Path("/s"), Path("/c"), "quinn-0.11.19-bbr", True, 0.0)
    argv = cfg.server_stack.server_argv(cfg, bins, "198.18.1.1:4433", Path("/r/server.log"))
    assert argv[-2:] == ["-qlog", "/r/qlog"]
    with pytest.raises(TestbedError, match="quinn-proto 0.11.9 has no qlog writer"):
        RunConfig(stack="quinn", cc="bbr", qlog=True, stack_version="0.11.9")
    # the build: the feature where quinn-proto has it; the manifest without its [features] table otherwise
    for version, has in (("0.11.14", True), ("0.11.9", False)):
        src = tmp_path / version
        src.mkdir()
        (src / "Cargo.toml").write_text("[features]\ndefault = []\n" + ('qlog = ["dep:qlog"]\n' if has else ""))
        assert has_qlog(src) is has
    manifest = (SERVER / "Cargo.toml").read_text()
    assert 'qlog = ["quinn/qlog"]' in manifest
    stripped = _without_features(manifest)
    assert "[features]" not in stripped and "[profile.release]" in stripped and "[dependencies]" in stripped
