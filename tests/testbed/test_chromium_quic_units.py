"""The chromium stack without building Chromium: its registry entry, argv, page files, set choice, the
toolchain messages, the build's progress filter, the contract checker, and that the testbed's own patches and
the shipped 62.0.3187.0 sets apply to the real tree (the archive in ../shared/chromium)."""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

import pytest
from conftest import shared_file
from contract_checks import contract_problems

from quicsm.errors import TestbedError
from quicsm.instrumentation import engine
from quicsm.instrumentation.patchset import shipped_patch_sets
from quicsm.testbed import chromium_quic_build as cqb
from quicsm.testbed import stacks
from quicsm.testbed.runner import RunConfig

VERSION = "62.0.3187.0"


def test_registry_and_config() -> None:
    st = stacks.get("chromium")
    assert st.ccs == ("cubic", "bbr") and st.versions() == [VERSION]
    cfg = RunConfig(stack="chromium", cc="bbr")  # the Go client cannot speak gQUIC: the toy client is the default
    assert cfg.client == "quic_client" and cfg.implementation == ("chromium", VERSION)
    assert cfg.label_dict()["chromium_version"] == VERSION and cfg.label_dict()["client"] == "quic_client"
    assert RunConfig(stack="quic-go").client == "go"  # other stacks keep theirs
    with pytest.raises(TestbedError, match="cc 'reno' on chromium"):
        RunConfig(stack="chromium", cc="reno")
    with pytest.raises(TestbedError, match="client 'chromium' on chromium"):
        RunConfig(stack="chromium", cc="cubic", client="chromium")
    with pytest.raises(TestbedError, match="long flow"):
        RunConfig(stack="chromium", cc="cubic", duration_s=10)
    with pytest.raises(TestbedError, match="quic_client"):
        RunConfig(stack="quic-go", client="quic_client")


def test_cli_names_the_toy_client(tmp_path: Path) -> None:
    """`--client quic_client` is what the docs show for this stack: the CLI takes it, and refuses it elsewhere."""
    from click.testing import CliRunner

    from quicsm.cli.main import cli

    res = CliRunner().invoke(cli, ["testbed", "run", "--help"])
    assert "quic_client" in res.output
    res = CliRunner().invoke(
        cli, ["testbed", "run", "--stack", "quic-go", "--client", "quic_client", "--out", str(tmp_path)]
    )
    assert res.exit_code != 0 and "client 'quic_client' on quic-go" in res.output + str(res.exception)
    res = CliRunner().invoke(
        cli,
        ["testbed", "run", "--stack", "chromium", "--client", "quic_client", "--cc", "reno", "--out", str(tmp_path)],
    )
    assert res.exit_code != 0 and "cc 'reno' on chromium" in res.output + str(res.exception)  # past the client


def test_set_choice_is_the_shipped_one() -> None:
    from quicsm.testbed.sets import resolve_set

    for cc in ("cubic", "bbr"):
        res = resolve_set(stacks.get("chromium"), VERSION, cc)
        assert res.how == "shipped" and res.patch_set.name == f"chromium-{VERSION}-{cc}"


def test_argv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from quicsm.testbed.stacks import Built

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    entry = tmp_path / "entry"
    entry.mkdir()
    bins = Built(
        "chromium", VERSION, "bbr", entry / "quic_server", entry / "quic_client", "s", True, 0, {"spki": "QUJD"}
    )
    cfg = RunConfig(stack="chromium", cc="bbr", objects=2, size=1000)
    argv = cfg.server_stack.server_argv(cfg, bins, "10.9.0.2:4433", tmp_path / "server.log")
    assert argv[0] == str(entry / "quic_server") and "--port=4433" in argv and "--quicsm_bind=10.9.0.2" in argv
    assert "--quicsm_cc=bbr" in argv and "--vmodule=bbr_sender=1" in argv
    assert f"--quicsm_log={tmp_path / 'server.log'}" in argv
    ready = next(a for a in argv if a.startswith("--quicsm_ready="))
    assert json.loads("{" + ready.split("=", 1)[1] + "}") == {"spki": "QUJD", "chromium": VERSION}
    pages = Path(next(a for a in argv if a.startswith("--quic_response_cache_dir=")).split("=", 1)[1])
    files = {p.name: p.read_bytes() for p in pages.iterdir()}
    assert sorted(files) == ["index", "obj0", "obj1"]
    head, _, body = files["obj1"].partition(b"\r\n\r\n")
    assert b"X-Original-Url: https://quicsm.test/obj/1" in head and len(body) == 1000 and body[:2] == b"/*"
    assert b'src="/obj/1"' in files["index"]
    client = cfg.server_stack.client_argv(cfg, bins, "https://10.9.0.1:8443/", "")
    assert client[:3] == [str(entry / "quic_client"), "--host=10.9.0.1", "--port=8443"]
    assert client[-3:] == ["https://quicsm.test/", "https://quicsm.test/obj/0", "https://quicsm.test/obj/1"]


def test_missing_python2_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QUICSM_PYTHON2", raising=False)
    with pytest.raises(TestbedError, match=r"Python 2\.7 not found.*pyenv install 2\.7\.18"):
        cqb.find_python2(("no-such-python2.7", "/nonexistent/python2.7"))
    monkeypatch.setenv("QUICSM_PYTHON2", "/usr/bin/true")  # runs, but is no Python 2.7
    with pytest.raises(TestbedError, match="QUICSM_PYTHON2"):
        cqb.find_python2(())


def test_missing_compiler_names_the_apt_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cqb.shutil, "which", lambda name: None)
    with pytest.raises(TestbedError, match=r"apt-get install -y clang ninja-build .*openssl"):
        cqb.find_toolchain()


def test_gn_args_and_progress_filter(tmp_path: Path) -> None:
    tc = cqb.Toolchain("python2.7", Path("/usr/lib/llvm-14"), "ninja", "/usr/bin/ccache", "openssl")
    args = cqb.gn_args(tc)
    assert 'clang_base_path = "/usr/lib/llvm-14"' in args and 'cc_wrapper = "/usr/bin/ccache"' in args
    assert "is_debug = false" in args and "symbol_level = 0" in args
    show = cqb.ninja_progress(every=10)
    shown = [n for n in range(1, 2129) if show(f"[{n}/2128] CXX obj/x{n}.o")]
    assert 9 <= len(shown) <= 12 and shown[-1] == 2128
    assert show("FAILED: obj/net/net/quic_connection.o") and show("../../a.cc:1:2: error: no member")
    assert not show("In file included from ../../base/a.h:3:")


def test_source_lookup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "co" / "src" / "chrome").mkdir(parents=True)
    (tmp_path / "co" / "src" / "chrome" / "VERSION").write_text("MAJOR=62\nMINOR=0\nBUILD=3187\nPATCH=0\n")
    monkeypatch.setenv("QUICSM_CHROMIUM_SOURCE", str(tmp_path / "co"))
    origin = cqb.find_source(VERSION)
    assert origin.kind == "directory" and origin.path == tmp_path / "co" / "src"
    assert cqb.chrome_version(origin.path) == VERSION
    monkeypatch.setenv("QUICSM_CHROMIUM_SOURCE", str(tmp_path))
    with pytest.raises(TestbedError, match="not a Chromium source"):
        cqb.find_source(VERSION)


def test_contract_checker_catches_each_rule() -> None:
    good = [
        "QUICSM v=1 conn=a t_us=10 cc=cubic from=Init to=SlowStart trigger=init",
        "QUICSM v=1 conn=a t_us=20 cc=cubic from=SlowStart to=Recovery trigger=loss",
        "QUICSM v=1 conn=a t_us=30 cc=cubic ev=close",
    ]
    assert contract_problems(good)[1] == []
    assert "time goes back" in contract_problems([good[0], good[1].replace("t_us=20", "t_us=5")])[1][0]
    assert (
        "previous line went to"
        in contract_problems([good[0], good[1].replace("from=SlowStart", "from=CongestionAvoidance"), good[2]])[1][0]
    )
    assert "no ev=close" in contract_problems(good[:2])[1][0]
    assert "after its ev=close" in contract_problems([*good, good[1].replace("t_us=20", "t_us=40")])[1][0]
    assert contract_problems([*good, good[0].replace("t_us=10", "t_us=50"), good[2].replace("30", "60")])[1] == []


def _extract(archive: Path, dest: Path, paths: list[str]) -> None:
    with tarfile.open(archive) as tar:
        top = f"proto-quic-{VERSION}/src/"
        members = [tar.getmember(top + p) for p in paths]
        for m in members:
            m.name = m.name[len(top) :]
        tar.extractall(dest, members=members, filter="data")


def test_patches_apply_to_the_real_tree(tmp_path: Path) -> None:
    """The testbed's tool patches and both shipped sets apply to the pristine files of the archive, exactly."""
    archive = shared_file(f"chromium/proto-quic-{VERSION}-src.tar.xz")
    sets = [ps for ps in shipped_patch_sets("chromium") if ps.name.startswith(f"chromium-{VERSION}-")]
    assert sorted(ps.algorithm for ps in sets) == ["bbr", "cubic"]
    tool_files = [
        "base/trace_event/trace_event_memory_overhead.h",
        "net/tools/quic/quic_simple_server_bin.cc",
        "net/tools/quic/quic_simple_client_bin.cc",
    ]
    _extract(archive, tmp_path, tool_files + [f.path for ps in sets for f in ps.files])
    for patch in cqb.tool_patches():
        subprocess.run(
            ["patch", "-p1", "--batch", "-F0", "-i", str(patch)], cwd=tmp_path, check=True, capture_output=True
        )
    server = (tmp_path / tool_files[1]).read_text()
    assert "--quicsm_cc" in server and "sigwait(&quicsm_term" in server and "server->Shutdown()" in server
    assert "QuicsmResponseCounter" in (tmp_path / tool_files[2]).read_text()
    engine.apply(tmp_path, sets=sets)
    text = (tmp_path / "net/quic/core/congestion_control/tcp_cubic_sender_base.cc").read_text()
    assert "ev=close" in text and "QuicsmTimerState" in text


def test_a_new_sets_tree_starts_from_a_built_siblings_objects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second set's out/ is the first one's, with both sets' files newer than its objects (as copies: the
    shared source keeps its times), so ninja compiles only those; a sibling of another source is not used."""
    import dataclasses
    import os
    import time

    from quicsm.instrumentation.patchset import load_patch_set

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    trees = cqb.chromium_cache() / "trees"
    src = tmp_path / "src"
    for rel in ("chrome/VERSION", "a.cc", "b.cc"):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(rel)
        os.utime(src / rel, (1000, 1000))
    trees.mkdir(parents=True)
    sib, new, other = trees / "sib", trees / "new", trees / "other"
    for t in (sib, new):
        subprocess.run(["cp", "-al", str(src), str(t)], check=True)
    subprocess.run(["cp", "-a", str(src), str(other)], check=True)  # not links: another source
    for t in (sib, other):
        (t / ".quicsm-tree").write_text(json.dumps({"patch_set": "x", "files": ["a.cc"]}))
        (t / "out" / "quicsm").mkdir(parents=True)
        (t / "out" / "quicsm" / "args.gn").write_text("is_debug = false\n")
        (t / "out" / "quicsm" / "quic_server").write_text(t.name)
    (new / "out").mkdir()
    ps = load_patch_set(Path(cqb.__file__).parent.parent / "patches/chromium/chromium-62.0.3187.0-bbr")
    ps = dataclasses.replace(ps, files=(type(ps.files[0])(path="b.cc", sha256="0" * 64),))
    assert not cqb._seed_out(new, src, ps, "other args\n", None)
    assert cqb._seed_out(new, src, ps, "is_debug = false\n", None)
    assert (new / "out" / "quicsm" / "quic_server").read_text() == "sib"
    for rel in ("a.cc", "b.cc"):
        assert (new / rel).stat().st_ino != (src / rel).stat().st_ino and (new / rel).stat().st_mtime > time.time() - 60
        assert (src / rel).stat().st_mtime == 1000


def test_python2_found_under_pyenv_root_whatever_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A pyenv outside $HOME (PYENV_ROOT) is found: CI and sudo runs change HOME but keep PYENV_ROOT."""
    fake = tmp_path / "pyenv" / "versions" / "2.7.18" / "bin" / "python2.7"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\necho '(2, 7)'\n")
    fake.chmod(0o755)
    monkeypatch.delenv("QUICSM_PYTHON2", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    assert cqb.find_python2(("no-such-python2.7", "$PYENV_ROOT/versions/2.7*/bin/python2.7")) == str(fake)
    monkeypatch.delenv("PYENV_ROOT")
    with pytest.raises(TestbedError, match="Python 2.7 not found"):
        cqb.find_python2(("$PYENV_ROOT/versions/2.7*/bin/python2.7",))
