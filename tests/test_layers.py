"""The layers of docs/architecture.md: imports point down, fleet knows no domain, no private name
crosses a module, no circle between the pipeline's packages."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "quicsm"
ORDER = [
    "textsafe",
    "errors",
    "files",
    "formats",
    "fleet",
    "traces",
    "inference",
    "pipeline",
    "diagrams",
    "compare",
    "check",
    "cli",
]
"""The pipeline's layers, bottom first (instrumentation and testbed stand beside it)."""


def _imports() -> list[tuple[str, str, str]]:
    """(importing module, imported module, name) for every ``from quicsm... import name`` and ``import quicsm...``."""
    out = []
    for path in ROOT.rglob("*.py"):
        mod = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("quicsm"):
                out += [(mod, node.module, a.name) for a in node.names]
            elif isinstance(node, ast.Import):
                out += [(mod, a.name, "") for a in node.names if a.name.startswith("quicsm")]
    return out


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_pipeline_layers_import_only_downwards() -> None:
    bad = [
        (a, b)
        for a, b, _ in _imports()
        if _layer(a) in ORDER and _layer(b) in ORDER and ORDER.index(_layer(b)) > ORDER.index(_layer(a))
    ]
    assert bad == []


def test_fleet_imports_no_domain_package() -> None:
    assert {b for a, b, _ in _imports() if _layer(a) == "fleet" and _layer(b) != "fleet"} <= {
        "quicsm.errors",
        "quicsm.files",
        "quicsm.textsafe",
    }


def test_no_private_name_crosses_a_module() -> None:
    crossing = [(a, b, n) for a, b, n in _imports() if n.startswith("_") and not n.startswith("__") and a != b]
    allowed = {
        ("quicsm.traces.columnar", "quicsm.traces._scan"),  # the C extension's module
        ("quicsm.traces.logscan", "quicsm.traces._scan"),
    }
    assert [(a, b, n) for a, b, n in crossing if (a, b) not in allowed and _layer(a) in ORDER] == []
