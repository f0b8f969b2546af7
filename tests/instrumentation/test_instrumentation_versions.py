"""`quicsm patch` on real releases no shipped set was made for (issue 23), fetched from the registries with
`quicsm patch fetch`: apply, status, port and detect say the truth and suggest commands that work;
exclusive sets are refused together with the reason; ported sets name their target; `patch save` keeps
a ported set. Needs Go (the module proxy) and, for quiche, cargo (crates.io); no build, no emulator."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from quicsm.cli.main import cli
from quicsm.cli.patch_cmd import WIDTH
from quicsm.instrumentation import engine
from quicsm.instrumentation.patchset import load_patch_set

GO = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
pytestmark = pytest.mark.skipif(GO is None, reason="Go toolchain not installed")


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, list(args))
    return res.exit_code, res.output


def _flat(out: str) -> str:
    """The output with wrapped lines joined (messages wrap at 100 columns)."""
    return re.sub(r"\n  (?=\S)", " ", out)


@pytest.fixture(scope="module")
def fetched(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """Fetch a release once per module; each test gets its own copy."""
    base = tmp_path_factory.mktemp("fetched")
    cache: dict[str, Path] = {}

    def get(stack: str, version: str, dest: Path) -> Path:
        key = f"{stack}-{version}"
        if key not in cache:
            code, out = _run("patch", "fetch", stack, version, str(base / key))
            assert code == 0, out
            cache[key] = base / key
        shutil.copytree(cache[key], dest)
        return dest

    return get


def _lines_fit(out: str) -> None:
    """Messages wrap: no line is longer than the width, except where a command in backticks sits."""
    for line in out.splitlines():
        assert len(line) <= WIDTH or "`" in line, line


def test_fetch_writes_a_tree_that_names_its_release(fetched, tmp_path: Path) -> None:
    tree = fetched("quic-go", "0.64.1", tmp_path / "t")
    src = json.loads((tree / ".quicsm-source.json").read_text())
    assert src["module"]["version"] == "v0.64.1" and src["module"]["sum"].startswith("h1:")
    assert os.access(tree / "internal/congestion/cubic_sender.go", os.W_OK)
    code, out = _run("patch", "detect", str(tree))
    assert code == 0
    first, second = out.splitlines()[:2]
    assert first.startswith("target quic-go v0.64.1, root ") and first.endswith("(upstream directory layout)")
    assert "or later (the newest era)" in second and "9999" not in out
    code, out = _run("patch", "fetch", "quic-go", "v0.64.1", str(tree))
    assert code != 0 and "already exists" in out
    code, out = _run("patch", "fetch", "quic-go", "v0.0.1", str(tmp_path / "none"))
    assert code != 0 and "quic-go v0.0.1 is not available from the Go module proxy" in out
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize("version", ["v0.59.1"])
def test_status_says_pristine_before_apply_and_after_revert(fetched, tmp_path: Path, version: str) -> None:
    tree = fetched("quic-go", version, tmp_path / "t")
    code, out = _run("patch", "status", str(tree))
    assert code == 0 and out.splitlines()[-1].startswith("tree pristine: "), out
    assert "modified-otherwise" not in out
    code, out = _run("patch", "apply", str(tree), "--port", "-a", "cubic")
    assert code == 0, out
    code, out = _run("patch", "status", str(tree))
    assert out.splitlines()[-1].startswith("tree patched: "), out
    assert _run("patch", "revert", str(tree))[0] == 0
    code, out = _run("patch", "status", str(tree))
    assert code == 0 and out.splitlines()[-1].startswith("tree pristine: ") and "modified-otherwise" not in out


def test_reno_and_cubic_sets_are_refused_together_with_the_reason(fetched, tmp_path: Path) -> None:
    tree = fetched("quic-go", "v0.65.0", tmp_path / "t")
    before = {p: p.read_bytes() for p in tree.rglob("*.go")}
    code, out = _run("patch", "apply", str(tree), "-a", "reno", "-a", "cubic")
    _lines_fit(out)
    out = _flat(out)
    assert code != 0 and "reno and cubic cannot be applied together" in out
    assert "change the same lines of" in out and "switches the sender to Cubic" in out
    code, out = _run("patch", "apply", str(tree), "--set", "quic-go-v0.65.0-reno", "--set", "quic-go-v0.65.0-cubic")
    assert code != 0 and "--set quic-go-v0.65.0-reno --set quic-go-v0.65.0-cubic" in out and "give one" in out
    assert {p: p.read_bytes() for p in tree.rglob("*.go")} == before  # nothing written
    # the same set twice is one set
    code, out = _run("patch", "apply", str(tree), "--set", "quic-go-v0.65.0-cubic", "--set", "quic-go-v0.65.0-cubic")
    assert code == 0 and out.count("applied quic-go-v0.65.0-cubic") == 1, out
    # with cubic applied, a plain apply says why reno is not applied as well
    code, out = _run("patch", "apply", str(tree))
    out = _flat(out)
    assert code == 0 and "quic-go-v0.65.0-cubic: already applied" in out
    assert "reno: not applied: quic-go-v0.65.0-cubic and the reno set both change the same lines" in out
    assert _run("patch", "revert", str(tree))[0] == 0
    # without -a the first (reno, quic-go's own) is applied and cubic is noted, not dropped silently
    code, out = _run("patch", "apply", str(tree))
    out = _flat(out)
    assert code == 0 and "applied quic-go-v0.65.0-reno" in out
    assert "note: cubic: not applied:" in out and f"`quicsm patch apply {tree} -a cubic`" in out


def test_suggestions_are_commands_that_succeed(fetched, tmp_path: Path) -> None:
    tree = fetched("quic-go", "v0.60.0", tmp_path / "t")
    code, out = _run("patch", "apply", str(tree), "-a", "cubic")
    _lines_fit(out)
    out = _flat(out)
    assert code != 0 and "no shipped set applies to this version" in out
    commands = re.findall(r"`(quicsm patch [^`]+)`", out)
    assert commands, out
    for command in commands:
        code, got = _run(*shlex.split(command)[1:])
        assert code == 0, (command, got)
        assert "ported cubic: no shipped set applies; ported" in _flat(got)
        assert "skipped" not in got  # a set it applied is not reported as skipped
        assert _run("patch", "revert", str(tree))[0] == 0


def test_port_names_its_target_and_explains_the_sets_it_skipped(fetched, tmp_path: Path) -> None:
    tree = fetched("quic-go", "v0.60.0", tmp_path / "t")
    out_dir = tmp_path / "sets"
    code, out = _run("patch", "port", str(tree), "-a", "cubic", "-o", str(out_dir / "c"))
    assert code == 0, out
    out = _flat(out)
    skipped = [line for line in out.splitlines() if line.startswith("skipped ")]
    assert skipped and skipped[0].startswith("skipped quic-go-v0.65.0-cubic: cannot place ")
    ps = load_patch_set(out_dir / "c")
    assert ps.name == "quic-go-v0.60.0-cubic-port"
    module = ps.extra["module"]
    src = json.loads((tree / ".quicsm-source.json").read_text())["module"]
    assert (module["version"], module["sum"], module["build_tags"]) == ("v0.60.0", src["sum"], [])
    prov = ps.extra["ported_from"]
    assert prov["name"] != "quic-go-v0.65.0-cubic" and prov["at"] and 0 < prov["score"]["min"] <= 1
    assert ps.description.startswith("cubic instrumentation for quic-go v0.60.0, ported by quicsm from ")
    assert "Seen in real runs" not in json.dumps(ps.extra["notes"])
    assert "not built or run" in ps.validated["how"]


def test_save_keeps_a_set_ported_by_apply(fetched, tmp_path: Path) -> None:
    tree = fetched("quic-go", "v0.60.0", tmp_path / "t")
    assert _run("patch", "apply", str(tree), "--port", "-a", "reno")[0] == 0
    code, out = _run("patch", "save", str(tree), "-o", str(tmp_path / "mine"))
    assert code == 0 and "saved quic-go-v0.60.0-reno-port" in out, out
    ps = load_patch_set(tmp_path / "mine")
    assert ps.name == "quic-go-v0.60.0-reno-port" and ps.extra["module"]["version"] == "v0.60.0"
    assert _run("patch", "revert", str(tree))[0] == 0
    # the saved set is a set like any other: it applies to a fresh copy by --set
    other = fetched("quic-go", "v0.60.0", tmp_path / "t2")
    code, out = _run("patch", "apply", str(other), "--set", str(tmp_path / "mine"))
    assert code == 0 and "applied quic-go-v0.60.0-reno-port" in out
    code, out = _run("patch", "save", str(tmp_path / "t3-missing"))
    assert code != 0


def test_quiche_reno_and_cubic_are_one_change_and_status_says_patched(tmp_path: Path) -> None:
    if shutil.which("cargo") is None and not os.access(Path.home() / ".cargo/bin/cargo", os.X_OK):
        pytest.skip("needs cargo (Rust >= 1.88, .ci/install.d/quiche.sh)")
    tree = tmp_path / "q"
    code, out = _run("patch", "fetch", "quiche", "0.30.0", str(tree))
    assert code == 0, out
    code, out = _run("patch", "apply", str(tree), "-a", "reno", "-a", "cubic")
    out = _flat(out)
    assert code == 0 and "applied cloudflare-quiche-0.30.0-" in out and "is the same change as" in out, out
    assert _run("patch", "revert", str(tree))[0] == 0
    code, out = _run("patch", "apply", str(tree), "-a", "cubic")
    assert code == 0, out
    code, out = _run("patch", "status", str(tree))
    last = _flat(out).splitlines()[-1]
    assert last.startswith("tree patched: ") and "patched: cloudflare-quiche-0.30.0-cubic" in last, out
    assert "not applied: cloudflare-quiche-0.30.0-bbr2" in last and "mixed" not in out
    rows = engine.status(tree)
    assert engine.tree_state(rows) == "patched"


@pytest.mark.parametrize(
    ("version", "era", "best"),
    [
        ("0.20.0", "cfq-0", "exact"),  # the same src/recovery/mod.rs as 0.20.1
        ("0.21.0", "cfq-0", "applies"),
        ("0.22.0", "cfq-1", "exact"),
    ],
)
def test_quiche_before_0_23_is_detected_and_instrumented(tmp_path: Path, version: str, era: str, best: str) -> None:
    """Before 0.23 quiche has no congestion/recovery.rs (0.22) or no congestion/ at all (0.20, 0.21: the
    senders' state is in src/recovery/mod.rs); detect tells the era and ranks the 0.20.1/0.22.0 sets, apply
    and revert work, and --cc bbr2 (gcongestion, 0.23 on) is refused in one line saying why."""
    if shutil.which("cargo") is None and not os.access(Path.home() / ".cargo/bin/cargo", os.X_OK):
        pytest.skip("needs cargo (Rust >= 1.88, .ci/install.d/quiche.sh)")
    from quicsm.errors import TestbedError
    from quicsm.testbed import stacks
    from quicsm.testbed.sets import resolve_set

    tree = tmp_path / "q"
    code, out = _run("patch", "fetch", "quiche", version, str(tree))
    assert code == 0, out
    code, out = _run("patch", "detect", str(tree))
    assert code == 0 and f"era {era}," in out and "found twice" not in out, out
    own = "0.22.0" if era == "cfq-1" else "0.20.1"
    ranked = [line.split() for line in out.splitlines() if line.startswith("  ") and "cloudflare-quiche-" in line]
    assert ranked[0][0] == best and ranked[0][2] == f"cloudflare-quiche-{own}-cubic", out
    code, out = _run("patch", "apply", str(tree), "-a", "cubic")
    assert code == 0, out
    src = tree / ("src/recovery/congestion/mod.rs" if era == "cfq-1" else "src/recovery/mod.rs")
    assert src.read_text().count("QUICSM v=1 conn={} t_us={} cc={} ev=close") == 1
    code, out = _run("patch", "status", str(tree))
    assert code == 0 and _flat(out).splitlines()[-1].startswith("tree patched: "), out
    assert _run("patch", "revert", str(tree))[0] == 0
    code, out = _run("patch", "status", str(tree))
    assert "pristine" in out and "QUICSM" not in src.read_text(), out
    with pytest.raises(TestbedError) as err:
        resolve_set(stacks.get("quiche"), version, "bbr2")
    assert str(err.value).startswith(f"quiche {version} cannot run --cc bbr2: ")
    assert "lacks src/recovery/gcongestion/bbr2.rs" in str(err.value) and "--cc reno or cubic" in str(err.value)
