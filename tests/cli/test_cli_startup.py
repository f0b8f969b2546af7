"""Start-up: a verb must not pay for libraries only other verbs use (scipy, pyarrow, jinja2, dask), and
``quicsm --help`` for any verb's library."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

from quicsm.cli.main import COMMANDS, SUMMARIES, cli
from quicsm.traces.contract import format_line

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("scipy", "pyarrow", "numpy", "networkx", "jinja2")

_PROBE = """
import json, sys
from quicsm.cli.main import cli
try:
    cli.main(args=sys.argv[1:], prog_name="quicsm", standalone_mode=False)
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r})), file=sys.stderr)
"""
QLOG = ROOT / "tests" / "data" / "quic-go-v0.65" / "server.sqlog.gz"
"""A quic-go v0.65 server qlog written by the testbed (every packet event)."""
OTHER_VERBS = ("quicsm.testbed", "quicsm.instrumentation", "quicsm.compare", "quicsm.check", "quicsm.grids")


def _heavy_modules(args: list[str], heavy: tuple[str, ...] = HEAVY) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=set(heavy)), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    return json.loads(proc.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("verb_args", [["parse", "--help"], ["parse", "{log}", "-q", "-o", "{out}"]])
def test_parse_imports_no_heavy_library(tmp_path: Path, verb_args: list[str]) -> None:
    """``--help`` imports none; a parse to JSON Lines cuts traces from columns (NumPy), nothing else."""
    log = tmp_path / "server.log"
    log.write_text(format_line(conn="a", t_us=1, cc="cubic", frm="Init", to="SlowStart") + "\n")
    out = tmp_path / "traces.jsonl"
    args = [a.format(log=log, out=out) for a in verb_args]
    heavy = _heavy_modules(args)
    assert [m for m in heavy if m.split(".")[0] != "numpy"] == []
    assert heavy == [] or "-o" in args
    if "-o" in args:
        assert out.read_text().count("\n") == 1  # the parse did run


def test_probe_sees_heavy_imports(tmp_path: Path) -> None:
    """The probe itself works: writing Parquet does import pyarrow."""
    log = tmp_path / "server.log"
    log.write_text(format_line(conn="a", t_us=1, cc="cubic", frm="Init", to="SlowStart") + "\n")
    assert "pyarrow" in _heavy_modules(["parse", str(log), "-q", "-o", str(tmp_path / "t.parquet")])


def test_infer_and_diagram_import_only_what_they_use(tmp_path: Path) -> None:
    """infer/diagram read columns (numpy) but need neither scipy nor networkx; pyarrow only for a store."""
    log = tmp_path / "server.log"
    log.write_text(
        format_line(conn="a", t_us=1, cc="cubic", frm="Init", to="SlowStart")
        + "\n"
        + format_line(conn="a", t_us=9, cc="cubic", frm="SlowStart", to="Recovery")
        + "\n"
    )
    model = tmp_path / "m.json"
    used = _heavy_modules(["infer", str(log), "-q", "-o", str(model)])
    assert json.loads(model.read_text())["nodes"]  # the inference did run
    assert not {m.split(".")[0] for m in used} & {"scipy", "networkx", "pyarrow"}
    graphml = _heavy_modules(["infer", str(log), "-q", "-o", str(tmp_path / "m.graphml")])
    assert "networkx" in graphml  # asked for: loaded


def test_help_imports_no_verb_and_no_library() -> None:
    """``quicsm --help`` lists the verbs from SUMMARIES: no verb's module, so none of their libraries."""
    used = _heavy_modules(["--help"], (*HEAVY, "msgspec", "dask", "quicsm"))
    assert [m for m in used if not m.startswith("quicsm")] == []
    assert set(used) <= {
        "quicsm",
        "quicsm.cli",
        "quicsm.cli.main",
        "quicsm.errors",
        "quicsm.textsafe",
        "quicsm.version",
    }


def test_probe_sees_verb_modules() -> None:
    """The probe itself works: a verb's own --help imports the verb's module."""
    assert "quicsm.cli.infer_cmd" in _heavy_modules(["infer", "--help"], ("quicsm",))


@pytest.mark.parametrize("name", ["server.sqlog", "server.sqlog.gz"])
def test_infer_of_a_qlog_imports_only_what_it_uses(tmp_path: Path, name: str) -> None:
    """infer over a real qlog (plain and gzipped) reads columns (numpy): no pyarrow, scipy, jinja2, Dask,
    networkx, and no other verb's package."""
    qlog = tmp_path / name
    qlog.write_bytes(QLOG.read_bytes() if name.endswith(".gz") else gzip.decompress(QLOG.read_bytes()))
    model = tmp_path / "m.json"
    used = _heavy_modules(["infer", str(qlog), "-q", "-o", str(model)], (*HEAVY, "dask", "distributed", "quicsm"))
    assert json.loads(model.read_text())["nodes"]  # the inference did run
    assert {m.split(".")[0] for m in used} == {"numpy", "quicsm"}
    assert [m for m in used if m.startswith(OTHER_VERBS)] == []
    assert "quicsm.fleet.pool" not in used  # --dask auto chose one process: no multiprocessing imported


@pytest.mark.parametrize("width", [40, 80, 120])
def test_help_summaries_are_the_commands_own(width: int) -> None:
    """SUMMARIES is what each command's help says, and ``--help`` lists it as click itself would."""
    assert set(SUMMARIES) == set(COMMANDS)
    ctx = click.Context(cli, terminal_width=width)
    for name in COMMANDS:
        cmd = cli.get_command(ctx, name)
        assert cmd is not None and not cmd.hidden
        assert SUMMARIES[name] == cmd.get_short_help_str(limit=10_000), f"update SUMMARIES[{name!r}]"
    ours, clicks = ctx.make_formatter(), ctx.make_formatter()
    cli.format_commands(ctx, ours)
    click.Group.format_commands(cli, ctx, clicks)
    assert ours.getvalue() == clicks.getvalue() and "infer" in ours.getvalue()


def test_a_qlog_that_logs_its_states_imports_no_metric_state_reader(tmp_path: Path) -> None:
    """metric_states is imported only for states read from metrics; writing an output imports no socket
    (the temporaries' host tag) and no executor for a cluster."""
    qlog = tmp_path / "server.sqlog"
    qlog.write_bytes(gzip.decompress(QLOG.read_bytes()))
    out = str(tmp_path / "t.jsonl")
    logged = _heavy_modules(["parse", str(qlog), "-q", "-o", out], ("quicsm", "socket"))
    assert "quicsm.traces.qlog_columns" in logged and (tmp_path / "t.jsonl").stat().st_size > 0
    assert [m for m in logged if m in ("socket", "quicsm.traces.metric_states", "quicsm.fleet.cluster")] == []
    inferred = _heavy_modules(["parse", str(qlog), "-q", "--states", "metrics", "-o", out], ("quicsm",))
    assert "quicsm.traces.metric_states" in inferred  # asked for: loaded


def test_main_collects_again_once_the_verb_is_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """main() holds the collector off while the verb's modules are imported, then freezes what they made
    and collects as usual: the verb itself never runs with the collector off."""
    import gc

    from quicsm.cli import infer_cmd
    from quicsm.cli.main import main

    learn = infer_cmd.learn_model
    seen: list[bool] = []

    def learn_model(kw: dict[str, Any]) -> Any:
        seen.append(gc.isenabled())
        return learn(kw)

    qlog = tmp_path / "server.sqlog.gz"
    qlog.write_bytes(QLOG.read_bytes())
    monkeypatch.setattr(infer_cmd, "learn_model", learn_model)
    monkeypatch.setattr(sys, "argv", ["quicsm", "infer", str(qlog), "-q", "-o", str(tmp_path / "m.json")])
    try:
        with pytest.raises(SystemExit) as done:
            main()
        assert done.value.code == 0 and seen == [True]
        assert gc.isenabled() and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.enable()


def test_parse_of_a_qlog_to_parquet_imports_no_inference(tmp_path: Path) -> None:
    """parse learns nothing: Arrow for the store, no inference engine, no other verb's package."""
    out = tmp_path / "t.parquet"
    used = _heavy_modules(["parse", str(QLOG), "-q", "-o", str(out)], (*HEAVY, "dask", "quicsm"))
    assert out.stat().st_size > 0  # the parse did run
    assert {m.split(".")[0] for m in used} == {"numpy", "pyarrow", "quicsm"}
    assert [m for m in used if m.startswith((*OTHER_VERBS, "quicsm.inference", "quicsm.pipeline"))] == []
