"""The formats quicsm reads and writes are declared once (msgspec structs); the JSON Schemas shipped in
quicsm/schemas/ are generated from those declarations and must stay in sync with them, what the
writers write must decode against the declarations, and the docs' field tables must list their fields.

Regenerate the schemas after changing a declaration: ``python tests/test_schemas.py``.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "quicsm" / "schemas"
DECLARED = {
    "trace-line": "quicsm.traces.store:TraceLine",
    "trace-store": "quicsm.traces.parquet:StoreTraces",
    "model": "quicsm.inference.annotate:ModelFile",
    "compare": "quicsm.compare.report:CompareFile",
    "patch-manifest": "quicsm.instrumentation.patchset:Manifest",
    "baseline-bundle": "quicsm.check.bundle:BundleFile",
    "check-report": "quicsm.check.report:CheckReport",
    "scenario": "quicsm.testbed.matrix:MatrixFile",
    "grid": "quicsm.grids.spec:GridFile",
    "grid-run": "quicsm.grids.execute:GridRecord",
    "run-meta": "quicsm.traces.runmeta:RunMeta",
    "flows-meta": "quicsm.traces.runmeta:FlowsRunMeta",
    "fairness": "quicsm.compare.fairness:FairnessFile",
}
"""Schema file name (``<name>.schema.json``) -> the declaration it is generated from."""


def declaration(name: str) -> Any:
    module, attr = DECLARED[name].split(":")
    return getattr(importlib.import_module(module), attr)


def generated(name: str) -> str:
    schema = msgspec.json.schema(declaration(name))
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": f"quicsm {name}", **schema}
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_shipped_schema_is_generated_from_the_declaration(name: str) -> None:
    path = SCHEMAS / f"{name}.schema.json"
    assert path.exists() and path.read_text() == generated(name), "run: python tests/test_schemas.py"


def test_no_schema_without_a_declaration() -> None:
    assert sorted(p.name for p in SCHEMAS.glob("*.json")) == sorted(f"{n}.schema.json" for n in DECLARED)


def _validate(name: str, document: Any) -> None:
    """``document`` decodes against the declaration and validates against the shipped schema."""
    import jsonschema

    msgspec.convert(document, declaration(name))
    jsonschema.validate(document, json.loads((SCHEMAS / f"{name}.schema.json").read_text()))


def test_written_files_hold_to_their_declarations(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from quicsm.cli.main import cli

    traces = ROOT / "traces" / "fig13"
    runner = CliRunner()
    out = {k: tmp_path / k for k in ("t.jsonl", "m.json", "c.json")}
    for args in (
        ["parse", str(traces), "-o", str(out["t.jsonl"])],
        ["infer", str(traces), "-o", str(out["m.json"])],
        ["compare", str(traces / "desktop"), str(traces / "mobile"), "--bootstrap", "100", "--format", "json"]
        + ["-o", str(out["c.json"])],
    ):
        result = runner.invoke(cli, [*args, "-q"])
        assert result.exit_code == 0, result.output
    lines = out["t.jsonl"].read_text().splitlines()
    assert len(lines) > 10
    for line in lines:
        _validate("trace-line", json.loads(line))
    _validate("model", json.loads(out["m.json"].read_text()))
    _validate("compare", json.loads(out["c.json"].read_text()))
    for manifest in sorted((ROOT / "quicsm" / "patches").rglob("manifest.json")):
        _validate("patch-manifest", json.loads(manifest.read_text()))


def test_every_bundled_run_meta_holds_to_its_declaration() -> None:
    """The testbed's meta.json of every bundled run (page loads, grid runs, multi-flow runs and their
    flows) as the runner wrote it."""
    metas = sorted((ROOT / "traces").rglob("meta.json"))
    kinds = [("flows-meta" if json.loads(m.read_bytes()).get("kind") == "flows" else "run-meta") for m in metas]
    assert len(metas) > 500 and kinds.count("flows-meta") >= 10
    for path, kind in zip(metas, kinds):
        _validate(kind, json.loads(path.read_bytes()))


def test_fairness_output_holds_to_its_declaration(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from quicsm.cli.main import cli

    runs = sorted(str(p) for p in (ROOT / "traces" / "table4" / "quicgo-tcp1").iterdir())[:3]
    out = tmp_path / "f.json"
    result = CliRunner().invoke(cli, ["compare", *runs, "--bootstrap", "0", "--format", "json", "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert len(doc["runs"]) == 3 and [f["name"] for f in doc["flows"]] == ["quic", "tcp1"] and "comparison" in doc
    _validate("fairness", doc)


def test_trace_line_leaves_out_a_transitions_kind_whatever_the_string_object() -> None:
    """msgspec omits a default by identity: a kind read from elsewhere (a Dask worker's pickled events,
    a joined string) must still be left out, as the JSON Lines writer always did."""
    from quicsm.traces.events import Trace, TraceEvent
    from quicsm.traces.store import trace_to_json

    kind = "".join(["trans", "ition"])
    events = [TraceEvent(1, "SlowStart", kind), TraceEvent(2, "SlowStart", "".join(["upd", "ate"]), cwnd=5)]
    got = trace_to_json(Trace("a", "cubic", events))["events"]
    assert got == [{"t_us": 1, "state": "SlowStart"}, {"t_us": 2, "state": "SlowStart", "kind": "update", "cwnd": 5}]


def test_compare_docs_example_is_a_compare_file() -> None:
    text = (ROOT / "docs" / "compare.md").read_text()
    example = re.search(r"```json\n(\{\n  \"format\": \"quicsm-compare\".*?)\n```", text, re.S)
    assert example
    msgspec.json.decode(example.group(1), type=declaration("compare"))


def _table_fields(doc: str, heading: str) -> set[str]:
    """The backticked names in the first column of the table under ``heading``."""
    text = (ROOT / "docs" / doc).read_text()
    section = text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| `")]
    return {name for ln in rows for name in re.findall(r"`(\w+)`", ln.split("|")[1])}


@pytest.mark.parametrize(
    ("heading", "attr"), [("## Top level", "ModelFile"), ("## Nodes", "NodeRecord"), ("## Edges", "EdgeRecord")]
)
def test_model_docs_tables_list_the_declared_fields(heading: str, attr: str) -> None:
    from quicsm.inference import annotate

    assert _table_fields("model-format.md", heading) == set(getattr(annotate, attr).__struct_fields__)


def write() -> None:
    for name in DECLARED:
        (SCHEMAS / f"{name}.schema.json").write_text(generated(name))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    write()
