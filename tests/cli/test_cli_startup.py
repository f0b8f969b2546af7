"""Start-up: ``quicsm parse`` must not pay for libraries only other verbs use (scipy, pyarrow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def _heavy_modules(args: list[str]) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=set(HEAVY)), *args],
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
