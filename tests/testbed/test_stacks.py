"""The stack registry (quicsm.testbed.stacks), without root or builds: which controllers and versions each
stack takes, the command lines and labels of a run, a new stack added as one module, scenario files,
`quicsm testbed build` and the CLI's errors."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner

from quicsm.cli.main import cli
from quicsm.errors import TestbedError
from quicsm.testbed import stacks
from quicsm.testbed.matrix import load_matrix
from quicsm.testbed.runner import RunConfig
from quicsm.testbed.stacks import Built


def _built(server: str = "/x/srv", client: str = "/x/cli") -> Built:
    return Built("quiche", "0.30.0", "bbr2", Path(server), Path(client), "p", True, 0.0)


def test_registry_lists_both_stacks_quic_go_first() -> None:
    assert stacks.names()[:1] == ["quic-go"] and "quiche" in stacks.names()
    assert stacks.get("quiche").implementation == "cloudflare-quiche"
    with pytest.raises(TestbedError, match="stack .lsquic.: choose one of quic-go, chromium, ngtcp2, quiche"):
        stacks.get("lsquic")


def test_controllers_per_stack() -> None:
    assert RunConfig(stack="quiche", cc="bbr2").cc == "bbr2"
    with pytest.raises(TestbedError, match="cc 'bbr2' on quic-go: choose reno or cubic"):
        RunConfig(cc="bbr2")
    with pytest.raises(TestbedError, match="stack 'lsquic'"):
        RunConfig(stack="lsquic")
    with pytest.raises(TestbedError, match="only the quic-go server"):
        RunConfig(stack="quiche", cc="bbr2", packet_threshold=5)


def test_versions_of_each_stack() -> None:
    assert RunConfig().version == "v0.65.0"
    assert RunConfig(quic_go_version="0.52.0").version == "v0.52.0"  # spelled without the v
    assert RunConfig(stack="quiche", cc="cubic").version == "0.30.0"
    assert RunConfig(stack="quiche", cc="cubic", stack_version="0.26.0").implementation == (
        "cloudflare-quiche",
        "0.26.0",
    )
    assert RunConfig(stack_version="v0.43.1").implementation == ("quic-go", "v0.43.1")
    with pytest.raises(TestbedError, match="--stack-version v0.43.1 and --quic-go-version v0.52.0 disagree"):
        RunConfig(stack_version="v0.43.1", quic_go_version="v0.52.0")
    assert set(stacks.get("quiche").versions()) >= {"0.24.0", "0.26.0", "0.30.0"}
    assert "v0.65.0" in stacks.get("quic-go").versions()


def test_quiche_run_names_its_implementation_and_passes_cc() -> None:
    cfg = RunConfig(stack="quiche", cc="bbr2", quiche_version="0.26.0", objects=3, size=1000)
    assert cfg.implementation == ("cloudflare-quiche", "0.26.0")
    labels = cfg.label_dict()
    assert labels["stack"] == "quiche" and labels["quiche_version"] == "0.26.0"
    argv = cfg.server_stack.server_argv(cfg, _built(), "10.0.0.1:4433", Path("/r/server.log"))
    assert argv[0] == "/x/srv" and argv[-2:] == ["-cc", "bbr2"]
    assert argv[argv.index("-objects") + 1] == "3" and argv[argv.index("-log") + 1] == "/r/server.log"
    client = cfg.server_stack.client_argv(cfg, _built(), "https://h/", "SPKI")
    assert client == ["/x/cli", "-url", "https://h/", "-spki", "SPKI", "-timeout", "120s"]


def test_quic_go_runs_unchanged() -> None:
    cfg = RunConfig(cc="cubic")
    assert cfg.implementation == ("quic-go", "v0.65.0")
    assert "stack" not in cfg.label_dict() and cfg.label_dict()["quic_go_version"] == "v0.65.0"
    argv = cfg.server_stack.server_argv(cfg, _built("s", "c"), "a:1", Path("l"))
    assert "-cc" not in argv and argv[:3] == ["s", "-addr", "a:1"]
    assert cfg.server_stack.run_meta(cfg, _built(), {"quic_go": "v0.65.0"}) == {"server_quic_go": "v0.65.0"}


class _EchoStack(stacks.Stack):
    """A stack as another developer would add one: its own server flags, labels and a helper process."""

    name: ClassVar[str] = "echo-test"
    implementation: ClassVar[str] = "echo"
    ccs: ClassVar[tuple[str, ...]] = ("bbr",)
    clients: ClassVar[tuple[str, ...]] = ("go",)
    default_version: ClassVar[str] = "1.0"
    sessions: ClassVar[list[str]] = []

    def build(self, cfg: RunConfig, *, progress: Any = None, force: bool = False) -> Built:
        if progress:
            progress("compiling echo")
        return Built(self.name, self.version(cfg), cfg.cc, Path("/bin/echo"), Path("/bin/true"), None, False, 1.5)

    def server_argv(self, cfg: RunConfig, bins: Any, addr: str, log_path: Path) -> list[str]:
        return [str(bins.server), "--listen", addr, "--trace", str(log_path)]

    def labels(self, cfg: RunConfig) -> dict[str, str]:
        return {"stack": self.name, "echo_version": self.version(cfg)}

    @contextlib.contextmanager
    def session(self, ctx: stacks.RunContext) -> Iterator[None]:
        self.sessions.append(f"start {ctx.server_addr}")
        yield
        self.sessions.append("stop")


@pytest.fixture
def echo_stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[_EchoStack]:
    stacks.all_stacks()  # load the real ones first
    st = _EchoStack()
    monkeypatch.setitem(stacks._REGISTRY.items, st.name, st)
    yield st


def test_a_new_stack_is_one_class_and_a_registry_entry(echo_stack: _EchoStack) -> None:
    cfg = RunConfig(stack="echo-test", cc="bbr", stack_version="2.1")
    assert cfg.implementation == ("echo", "2.1") and cfg.label_dict()["echo_version"] == "2.1"
    assert RunConfig(stack="echo-test", cc="bbr").version == "1.0"
    with pytest.raises(TestbedError, match="client 'chromium' on echo-test: choose go"):
        RunConfig(stack="echo-test", cc="bbr", client="chromium")
    with pytest.raises(TestbedError, match="cc 'reno' on echo-test: choose bbr"):
        RunConfig(stack="echo-test", cc="reno")
    argv = cfg.server_stack.server_argv(cfg, cfg.server_stack.build(cfg), "10.0.0.1:443", Path("/r/server.log"))
    assert argv == ["/bin/echo", "--listen", "10.0.0.1:443", "--trace", "/r/server.log"]


def test_scenario_file_with_quiche(tmp_path: Path) -> None:
    f = tmp_path / "m.toml"
    f.write_text('[defaults]\nstack = "quiche"\nquiche = "0.30.0"\ncc = "bbr2"\n[[scenario]]\nname = "d"\n')
    (sc,) = load_matrix(f).scenarios
    assert (sc.config.stack, sc.config.quiche_version, sc.config.cc) == ("quiche", "0.30.0", "bbr2")
    res = CliRunner().invoke(cli, ["testbed", "matrix", str(f), "--out", str(tmp_path / "o"), "--dry-run"])
    assert res.exit_code == 0 and "quiche 0.30.0 bbr2" in res.output, res.output
    f.write_text('[defaults]\nstack = "quiche"\nstack_version = "0.26.0"\n[[scenario]]\nname = "d"\ncc = "cubic"\n')
    res = CliRunner().invoke(cli, ["testbed", "matrix", str(f), "--out", str(tmp_path / "o"), "--dry-run"])
    assert res.exit_code == 0 and "quiche 0.26.0 cubic" in res.output, res.output
    f.write_text('[[scenario]]\nname = "d"\ncc = "bbr2"\n')
    res = CliRunner().invoke(cli, ["testbed", "matrix", str(f), "--dry-run"])
    assert res.exit_code != 0 and "cc 'bbr2' on quic-go" in res.output and "Traceback" not in res.output


def test_cli_stack_errors_are_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["testbed", "run", "--cc", "bbr2", "--out", str(tmp_path / "o")])
    assert res.exit_code != 0 and res.output.strip().count("\n") == 0, res.output
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    res = CliRunner().invoke(cli, ["testbed", "run", "--stack", "quiche", "--cc", "bbr2", "--out", str(tmp_path / "o")])
    assert res.exit_code != 0 and "needs root" in res.output and "Traceback" not in res.output


def test_build_command_builds_each_controller_with_progress(echo_stack: _EchoStack) -> None:
    res = CliRunner().invoke(cli, ["testbed", "build", "--stack", "echo-test", "--version", "3.0"])
    assert res.exit_code == 0, res.output + res.stderr
    assert "[echo-test 3.0 bbr, 0 s] compiling echo" in res.stderr
    assert res.stdout.splitlines() == ["echo-test 3.0 bbr: built in 2 s; server /bin/echo"]
    assert "1/1 build(s) ready in" in res.stderr


def test_build_command_refuses_what_it_cannot_build() -> None:
    res = CliRunner().invoke(cli, ["testbed", "build", "--version", "v0.64.1"])
    assert res.exit_code != 0 and "give exactly one --stack" in res.output
    res = CliRunner().invoke(cli, ["testbed", "build", "--stack", "quic-go", "--cc", "bbr2"])
    assert res.exit_code != 0 and "no stack among quic-go runs bbr2" in res.output
