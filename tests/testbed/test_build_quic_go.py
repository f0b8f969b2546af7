"""quic-go patch sets, the patched build (quicsm.testbed.build) and the Go server/client they produce.

The fast tests apply every shipped quic-go set to the pristine module through the patch engine. The
slow ones build the oldest version (Reno, as shipped) and the newest (switched to Cubic) once per
session (cached under ~/.cache/quicsm/build, so a rerun takes seconds), run a page load on 127.0.0.1
and check the congestion states the server's log shows.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from quicsm.errors import TestbedError
from quicsm.instrumentation import engine
from quicsm.instrumentation.patchset import shipped_patch_sets
from quicsm.testbed import build, buildtools
from quicsm.traces import parse_inputs
from quicsm.traces.events import SSTHRESH_INF

GO = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
needs_go = pytest.mark.skipif(GO is None, reason="Go toolchain not installed")
VERSIONS = build.available_versions()
SETS = shipped_patch_sets("quic-go")


def _pristine(version: str) -> Path:
    """The module directory in the Go module cache (downloads it on a machine that lacks it)."""
    out = subprocess.run(
        [GO, "mod", "download", "-json", f"{build.MODULE}@{version}"],
        capture_output=True,
        text=True,
        cwd="/tmp",
        check=False,
        env={**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": ""},
    )
    if out.returncode != 0:
        pytest.skip(f"cannot download {build.MODULE}@{version}: {out.stderr.strip()[-300:]}")
    return Path(json.loads(out.stdout)["Dir"])


def _copy(version: str, tmp_path: Path) -> Path:
    """A writable copy of the parts of the module the patch engine looks at (go.mod and the sender dirs)."""
    src, dst = _pristine(version), tmp_path / f"quic-go@{version}"
    for sub in ("internal/congestion", "internal/ackhandler"):
        buildtools.copy_writable(src / sub, dst / sub)
    shutil.copyfile(src / "go.mod", dst / "go.mod")
    return dst


# ---- patch sets (no build) ------------------------------------------------------------------------


def test_versions_spread_over_the_proxy_range():
    assert len(VERSIONS) >= 3
    keys = [build._version_key(v) for v in VERSIONS]
    assert keys[0] < (0, 40, 0) and keys[-1] >= (0, 60, 0), VERSIONS
    for v in VERSIONS:
        for var in build.VARIANTS:
            ps = build.patch_set_for(v, var)
            assert ps.algorithm == var and ps.target == "quic-go"
            assert {
                "Init",
                "SlowStart",
                "CongestionAvoidance",
                "ApplicationLimited",
                "Recovery",
                "ProbeTimeout",
            } <= set(ps.states)


def test_unknown_version_and_variant_are_clear_errors():
    with pytest.raises(TestbedError, match=r"no quic-go patch set for v0\.1\.0.*patched versions: v0\.33\.0"):
        build.patch_set_for("v0.1.0")
    with pytest.raises(TestbedError, match="variant 'bbr'"):
        build.patch_set_for(VERSIONS[-1], "bbr")


def test_missing_go_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    monkeypatch.setattr(build.os, "access", lambda path, mode: False)
    with pytest.raises(TestbedError, match=r"Go toolchain >= 1\.26(\.0)? not found: install Go"):
        build.find_go()


def _fake_go(path: Path, says: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{says}'\n")
    path.chmod(0o755)
    return str(path)


def test_old_or_gccgo_go_first_on_path_is_passed_over(monkeypatch, tmp_path):
    """Debian's golang-go (1.19) or gccgo's go ahead of /usr/local/go on PATH: the build must not take it."""
    build._go_release.cache_clear()
    debian = _fake_go(tmp_path / "usr/bin/go", "go version go1.19.8 linux/amd64")
    monkeypatch.setenv("PATH", str(tmp_path / "usr/bin"))
    monkeypatch.setattr(build, "GO_CANDIDATES", ())
    with pytest.raises(TestbedError) as exc:
        build.find_go()
    assert f"{debian} is 1.19.8" in str(exc.value) and "\n" not in str(exc.value)
    _fake_go(tmp_path / "usr/bin/go", "go version go1.18 gccgo (Debian 12.2.0-14) 12.2.0 linux/amd64")
    build._go_release.cache_clear()
    with pytest.raises(TestbedError, match=f"{debian} is gccgo 1.18"):
        build.find_go()
    good = _fake_go(tmp_path / "local/go/bin/go", "go version go1.26.8 linux/amd64")
    monkeypatch.setattr(build, "GO_CANDIDATES", (good,))
    assert build.find_go() == good
    build._go_release.cache_clear()


@needs_go
@pytest.mark.parametrize("ps", SETS, ids=[s.name for s in SETS])
def test_set_applies_to_its_pristine_module_and_reverts(ps, tmp_path):
    version = ps.extra["module"]["version"]
    root = _copy(version, tmp_path)
    det = engine.detect(root, sets=[ps], target="quic-go")
    assert det.identity.era == ps.era
    assert det.identity.features.get("version") == version
    assert det.candidates[0].kind == "exact"  # pristine sha256s match the manifest
    engine.apply(root, set_name=ps.name, sets=[ps])
    sender = (root / "internal/congestion/cubic_sender.go").read_text()
    handler = (root / "internal/ackhandler/sent_packet_handler.go").read_text()
    assert 'log.Printf("QUICSM v=1 conn=%p t_us=%d cc=%s' in sender
    for state in (
        "SlowStart",
        "CongestionAvoidance",
        "CongestionAvoidanceMaxed",
        "ApplicationLimited",
        "Recovery",
        "RetransmissionTimeout",
    ):
        assert f'"{state}"' in sender
    assert "QuicsmProbeTimeout(h.bytesInFlight, h.ptoCount)" in handler
    assert ("true, // use Reno\n" in handler) == (ps.algorithm == "reno")
    engine.revert(root, set_name=ps.name, sets=[ps])
    for f in ps.files:
        assert engine.sha256_file(root / f.path) == f.sha256


@needs_go
def test_wrong_version_fails_cleanly_and_leaves_the_tree_alone(tmp_path):
    old, new = VERSIONS[0], VERSIONS[-1]
    root = _copy(new, tmp_path)
    ps = build.patch_set_for(old, "reno")
    before = {f.path: engine.sha256_file(root / f.path) for f in ps.files}
    with pytest.raises(TestbedError, match=f"applying quic-go-{old}-reno to {build.MODULE}"):
        buildtools.apply_patch_set(ps, root, build.MODULE)
    assert {p: engine.sha256_file(root / p) for p in before} == before


# ---- builds and real runs -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """Oldest version (Reno, as shipped) and newest in both variants, built once (and cached).

    Cold, the two versions take about a minute each; the second variant of a version reuses Go's
    build cache (~7 s)."""
    if GO is None:
        pytest.skip("Go toolchain not installed")
    out = tmp_path_factory.mktemp("bins")
    return {
        ("oldest", "reno"): build.build_binaries(VERSIONS[0], "reno", out / "oldest-reno"),
        ("newest", "reno"): build.build_binaries(VERSIONS[-1], "reno", out / "newest-reno"),
        ("newest", "cubic"): build.build_binaries(VERSIONS[-1], "cubic", out / "newest-cubic"),
    }


def _page_load(
    res: build.BuildResult, tmp: Path, *, objects: int, size: int, qlog: Path | None = None
) -> tuple[dict, Path, subprocess.CompletedProcess]:
    log = tmp / "server.log"
    argv = [str(res.server), "-addr", "127.0.0.1:0", "-objects", str(objects), "-size", str(size), "-log", str(log)]
    if qlog is not None:
        argv += ["-qlog", str(qlog)]
    srv = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert srv.stdout is not None
        ready = json.loads(srv.stdout.readline())
        assert ready["ready"] is True and ready["addr"].startswith("127.0.0.1:")
        cli = subprocess.run(
            [str(res.client), "-url", f"https://{ready['addr']}/", "-spki", ready["spki"], "-timeout", "60s"],
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        client = json.loads(cli.stdout)
        assert cli.returncode == 0, (client, cli.stderr)
        wrong = subprocess.run(
            [str(res.client), "-url", f"https://{ready['addr']}/", "-spki", "AAAA", "-timeout", "10s"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    finally:
        srv.send_signal(signal.SIGTERM)
        rc = srv.wait(timeout=15)
    assert rc == 0, srv.stderr.read() if srv.stderr else ""
    return client, log, wrong


@pytest.mark.slow
@pytest.mark.parametrize("which,cc", [("oldest", "reno"), ("newest", "reno"), ("newest", "cubic")])
def test_page_load_logs_the_contract(builds, tmp_path, which, cc):
    res = builds[which, cc]
    assert res.server.is_file() and res.client.is_file() and res.variant == cc
    objects, size = 3, 1_500_000
    qlog = tmp_path / "qlog" if (which, cc) == ("newest", "cubic") else None
    client, log, wrong = _page_load(res, tmp_path, objects=objects, size=size, qlog=qlog)

    assert client["ok"] is True and client["proto"] == "h3" and client["objects"] == objects
    assert client["bytes"] > objects * size and client["plt_ms"] > 0
    assert client["quic_go"] == res.version
    bad = json.loads(wrong.stdout)
    assert wrong.returncode == 1 and bad["ok"] is False and "does not match the pin" in bad["error"]

    text = log.read_text()
    assert "quicsm-server: closed" in text  # SIGTERM flushed the log
    parsed = parse_inputs([str(log)], strict=True)
    assert parsed.report.total_issues == 0
    traces = parsed.traces
    assert traces and {t.cc for t in traces} == {cc}
    # The server's sender for the page load: the connection that sent the objects (most events).
    main = max(traces, key=lambda t: len(t.events))
    states = main.states()
    assert states[0] == "SlowStart" and main.events[0].prev == "Init", states[:5]  # Init: the start marker
    first = main.events[0]
    assert (first.prev, first.state, first.trigger, first.ssthresh) == ("Init", "SlowStart", "init", SSTHRESH_INF)
    assert {"ApplicationLimited", "CongestionAvoidance"} & set(states[2:]), states
    times = [e.t_us for e in main.events]
    assert times == sorted(times)
    for a, b in itertools.pairwise(states):
        assert a != b  # emitted on change: no folded repeats left
    assert all(e.cwnd and e.cwnd > 0 for e in main.transitions())
    if qlog is not None:
        assert list(qlog.glob("*.sqlog")), "the newest quic-go writes qlog files with -qlog"


@pytest.mark.slow
def test_rebuild_comes_from_the_cache(builds, tmp_path):
    res = build.build_binaries(builds["newest", "cubic"].version, "cubic", tmp_path)
    assert res.cached and res.seconds < 5
    assert res.server.read_bytes() == builds["newest", "cubic"].server.read_bytes()
