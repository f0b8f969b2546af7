"""Which patch set a testbed build uses for a version (quicsm.testbed.sets) and what the Go build needs from
a quic-go release (build tags, toolchain), on real releases from the Go module proxy. No build, no root."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from quicsm.errors import TestbedError
from quicsm.instrumentation.patchset import load_patch_set, shipped_patch_sets
from quicsm.instrumentation.targets.quic_go import build_requirements
from quicsm.testbed import stacks
from quicsm.testbed.build import download_module
from quicsm.testbed.matrix import load_matrix
from quicsm.testbed.sets import made_sets_root, release_version, resolve_set

GO = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
pytestmark = pytest.mark.skipif(GO is None, reason="Go toolchain not installed")


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.mark.parametrize(
    "version,tags,toolchain",
    [
        ("v0.33.0", ["quicgo_a", "qlog_newtracer"], "go1.20.14"),
        ("v0.37.5", ["quicgo_a", "qlog_conntracer"], "go1.20.14"),
        ("v0.42.0", ["quicgo_a", "qlog_conntracer"], None),
        ("v0.44.0", ["quicgo_b", "qlog_conntracer"], None),
        ("v0.46.0", ["quicgo_b"], None),
        ("v0.48.2", [], None),
        ("v0.64.1", [], None),
    ],
)
def test_build_requirements_come_from_the_source(version: str, tags: list[str], toolchain: str | None) -> None:
    """The API shims of testbed/server and testbed/client follow what each release has (http3.Server's
    QuicConfig/QUICConfig, http3.Transport, qlog's tracer constructors); qtls-go1-20 pins Go 1.20."""
    assert build_requirements(download_module(version).dir) == {"build_tags": tags, "toolchain": toolchain}


def test_shipped_manifests_agree_with_their_source() -> None:
    for ps in shipped_patch_sets("quic-go"):
        mod = ps.extra["module"]
        req = build_requirements(download_module(mod["version"]).dir)
        assert mod["build_tags"] == req["build_tags"], ps.name
        assert mod.get("toolchain") == req["toolchain"], ps.name


def test_a_shipped_version_uses_its_shipped_set() -> None:
    res = resolve_set(stacks.get("quic-go"), "0.52.0", "cubic")
    assert (res.how, res.patch_set.name) == ("shipped", "quic-go-v0.52.0-cubic")
    assert not made_sets_root().exists()  # nothing fetched, nothing made


def test_an_unshipped_version_gets_a_set_true_to_it() -> None:
    said: list[str] = []
    res = resolve_set(stacks.get("quic-go"), "v0.64.1", "cubic", progress=said.append)
    ps = res.patch_set
    assert res.how == "ported" and ps.name == "quic-go-v0.64.1-cubic-port"
    assert Path(ps.origin) == made_sets_root() / "quic-go" / ps.name
    mod = ps.extra["module"]
    assert (mod["version"], mod["sum"]) == ("v0.64.1", download_module("v0.64.1").sum)
    assert mod["build_tags"] == [] and release_version(ps) == "v0.64.1"
    prov = ps.extra["ported_from"]
    assert prov["name"] == "quic-go-v0.65.0-cubic" and prov["score"]["min"] == 1.0  # it applies unchanged
    assert "no set shipped for quic-go v0.64.1; quic-go-v0.65.0-cubic applies unchanged" in res.why
    assert any(line.startswith("patch set: quic-go-v0.64.1-cubic-port") for line in said)
    assert "Seen in real runs" not in str(ps.extra["notes"])
    assert ps.description.startswith("cubic instrumentation for quic-go v0.64.1, ported by quicsm from ")
    # a rerun keeps the set it made (same change): same directory, same time of porting
    again = resolve_set(stacks.get("quic-go"), "v0.64.1", "cubic")
    assert again.patch_set.extra["ported_from"]["at"] == prov["at"]


def test_a_version_no_set_applies_to_is_ported_and_says_what_it_skipped() -> None:
    said: list[str] = []
    res = resolve_set(stacks.get("quic-go"), "v0.60.0", "cubic", progress=said.append)
    assert res.how == "ported" and res.patch_set.name == "quic-go-v0.60.0-cubic-port"
    skipped = [s for s in said if s.startswith("patch set: skipped ")]
    assert skipped and skipped[0].startswith("patch set: skipped quic-go-v0.65.0-cubic: ")
    assert "ported by its anchors" in res.why and "after 1 that do not port" in res.why


def test_given_sets(tmp_path: Path) -> None:
    st = stacks.get("quic-go")
    made = resolve_set(st, "v0.64.1", "reno").patch_set
    mine = tmp_path / "mine"
    shutil.copytree(made.origin, mine)
    res = resolve_set(st, "v0.64.1", "reno", str(mine))
    assert (res.how, res.patch_set.name) == ("given", "quic-go-v0.64.1-reno-port")
    # a set made for another release is ported to this one, named for it, its origin kept
    res = resolve_set(st, "v0.64.1", "reno", "quic-go-v0.52.0-reno")
    assert res.how == "ported" and "your set quic-go-v0.52.0-reno" in res.why
    assert res.patch_set.extra["ported_from"]["name"] == "quic-go-v0.52.0-reno"
    with pytest.raises(TestbedError, match="instruments reno, not --cc cubic"):
        resolve_set(st, "v0.64.1", "cubic", str(mine))
    with pytest.raises(TestbedError, match="is a set for cloudflare-quiche, not quic-go"):
        resolve_set(st, "v0.64.1", "cubic", "cloudflare-quiche-0.30.0-cubic")
    with pytest.raises(TestbedError, match="--set nonesuch: no patch set named 'nonesuch'"):
        resolve_set(st, "v0.64.1", "cubic", "nonesuch")


def test_matrix_files_take_a_set(tmp_path: Path) -> None:
    f = tmp_path / "m.toml"
    f.write_text('[defaults]\nquic_go_version = "v0.64.1"\nset = "my/set"\n[[scenario]]\nname = "a"\n')
    (sc,) = load_matrix(f).scenarios
    assert (sc.config.version, sc.config.patch_set) == ("v0.64.1", "my/set")
    f.write_text('[defaults]\nstack = "tcp-none"\n[[scenario]]\nname = "a"\n')
    with pytest.raises(TestbedError, match="stack 'tcp-none'"):
        load_matrix(f)


def test_matrix_set_option(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`testbed matrix --set` gives the set to every scenario that names none, accepts the same set named
    again (by name or as a copy of its directory), refuses a scenario whose file names another one, and
    checks every scenario's set against its stack and controller before the first run."""
    from typing import Any

    from click.testing import CliRunner

    import quicsm
    import quicsm.cli.testbed_cmd as cmd
    from quicsm.cli.main import cli

    ran: list[list[tuple[str, str | None]]] = []

    def fake(items: Any, out: Path, retries: int, keep_going: bool = False, **kw: Any) -> list[Path]:
        ran.append([(cfg.name, cfg.patch_set) for cfg, _ in items])
        return []

    monkeypatch.setattr(cmd, "_run_scenarios", fake)
    f = tmp_path / "m.toml"
    out = ["--out", str(tmp_path / "o")]

    def matrix(text: str, *args: str) -> Any:
        f.write_text('[defaults]\nquic_go_version = "v0.65.0"\n' + text)
        return CliRunner().invoke(cli, ["testbed", "matrix", str(f), *out, *args])

    two = '[[scenario]]\nname = "a"\n[[scenario]]\nname = "b"\n'
    res = matrix(two, "--set", "quic-go-v0.52.0-reno")
    assert res.exit_code == 0, res.output
    assert ran.pop() == [("a", "quic-go-v0.52.0-reno"), ("b", "quic-go-v0.52.0-reno")]
    assert res.output.count(", set quic-go-v0.52.0-reno") == 2
    # the same set named in the file and on the command line: a shipped name, or a copy of its directory
    mine = tmp_path / "mine"
    shutil.copytree(Path(quicsm.__file__).parent / "patches/quic-go/quic-go-v0.52.0-reno", mine)
    res = matrix(
        f'[[scenario]]\nname = "a"\nset = "{mine}"\n[[scenario]]\nname = "b"\n', "--set", "quic-go-v0.52.0-reno"
    )
    assert res.exit_code == 0, res.output
    assert ran.pop() == [("a", "quic-go-v0.52.0-reno"), ("b", "quic-go-v0.52.0-reno")]
    # another set in the file is refused with both names, before any run (and not only under --dry-run)
    text = '[[scenario]]\nname = "stock"\n[[scenario]]\nname = "tuned"\nset = "quic-go-v0.43.1-reno"\n'
    for extra in ((), ("--dry-run",)):
        res = matrix(text, "--set", "quic-go-v0.52.0-reno", *extra)
        assert res.exit_code != 0 and not ran
        assert "scenario 2 (tuned) has set = 'quic-go-v0.43.1-reno'" in res.output, res.output
        assert "--set gives 'quic-go-v0.52.0-reno'" in res.output and "not replaced" in res.output
    # a set that does not fit a scenario's controller or stack stops the matrix before its first scenario
    res = matrix(two + 'cc = "cubic"\n', "--set", "quic-go-v0.52.0-reno", "--dry-run")
    assert res.exit_code != 0 and "scenario 2 (b): --set quic-go-v0.52.0-reno" in res.output
    assert "instruments reno, not --cc cubic" in res.output
    res = matrix('[[scenario]]\nname = "q"\nstack = "quiche"\ncc = "cubic"\nset = "quic-go-v0.52.0-cubic"\n')
    assert res.exit_code != 0 and not ran and "scenario 1 (q)" in res.output
    assert "is a set for quic-go, not cloudflare-quiche" in res.output
    res = matrix(two, "--set", "nonesuch")
    assert res.exit_code != 0 and "--set nonesuch: no patch set named 'nonesuch'" in res.output


def test_saved_set_loads_like_any_other() -> None:
    res = resolve_set(stacks.get("quic-go"), "v0.59.1", "reno")
    ps = load_patch_set(res.patch_set.origin)
    assert ps.diff_text == res.patch_set.diff_text and ps.extra["module"]["version"] == "v0.59.1"
