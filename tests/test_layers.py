"""The layer contract (``[tool.quicsm] layers`` in pyproject.toml; drawn in docs/architecture.md) over
every import of every module: module level, inside functions, under TYPE_CHECKING. Each package imports
only lower layers, peers in one layer are independent, no file takes part in an import circle, nothing
inside the package imports its facade, fleet knows no domain, and no private name crosses a module.

This is what import-linter's ``layers`` and ``independence`` contracts check, plus what they do not: a
circle between two files anywhere, counted with the imports that run later (in functions, under
TYPE_CHECKING), which break a circle at run time but not in the design.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("architecture", REPO / "scripts" / "architecture.py")
assert _spec is not None and _spec.loader is not None
arch = importlib.util.module_from_spec(_spec)
sys.modules["architecture"] = arch
_spec.loader.exec_module(arch)

LAYERS = arch.layers()
MODULES = arch.modules()
IMPORTS = list(arch.imports(MODULES))
KNOWN_CYCLES: dict[frozenset[str], str] = {}
"""Circles being taken apart by their owners (issue 32): each must still exist, so the list only shrinks."""


def _level(package: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if package in layer)


def test_every_package_has_a_layer() -> None:
    packages = {arch.package(m) for m in MODULES} - {"quicsm"}
    missing = sorted(p for p in packages if not any(p in layer for layer in LAYERS))
    assert missing == [], "put each new package of quicsm/ into a layer: [tool.quicsm] layers in pyproject.toml"


def test_imports_point_down_and_peers_are_independent() -> None:
    bad = [
        f"{i.importer}:{i.line} imports {i.target}"
        for i in IMPORTS
        if (a := arch.package(i.importer)) != (b := arch.package(i.target))
        and "quicsm" not in (a, b)
        and _level(b) >= _level(a)
    ]
    assert bad == []


def test_nothing_inside_imports_the_facade() -> None:
    """``from quicsm import __version__`` pointed back up at the facade: quicsm.version holds it."""
    assert [f"{i.importer}:{i.line}" for i in IMPORTS if i.target == "quicsm" and i.importer != "quicsm"] == []


def test_no_file_takes_part_in_an_import_circle() -> None:
    cycles = arch.cycles(IMPORTS)
    assert [sorted(c) for c in cycles if c not in KNOWN_CYCLES] == []
    gone = [why for c, why in KNOWN_CYCLES.items() if c not in cycles]
    assert gone == [], "a known circle is gone: remove it from KNOWN_CYCLES"


def test_the_circle_check_sees_lazy_and_type_checking_imports() -> None:
    """The circle test would miss what it is for if it read module-level imports only."""
    lazy = {(i.importer, i.target) for i in IMPORTS}
    assert ("quicsm.cli.infer_cmd", "quicsm.inference.graphs") in lazy  # inside a function
    assert arch.cycles([arch.Import("a", "b", "", 1), arch.Import("b", "c", "", 1), arch.Import("c", "a", "", 9)])


def test_fleet_imports_no_domain_package() -> None:
    assert {i.target for i in IMPORTS if arch.package(i.importer) == "fleet" and arch.package(i.target) != "fleet"} <= {
        "quicsm.errors",
        "quicsm.files",
        "quicsm.textsafe",
    }


def test_no_private_name_crosses_a_module() -> None:
    crossing = [
        (i.importer, i.target, i.name)
        for i in IMPORTS
        if i.name.startswith("_") and not i.name.startswith("__") and i.importer != i.target
    ]
    assert crossing == []


def test_docs_architecture_shows_the_code_as_it_is() -> None:
    """Its generated blocks (the layers, their imports, sizes within 10 %) are what the code says now."""
    assert arch.stale(arch.DOC.read_text()) == [], (
        "docs/architecture.md is out of date: python3 scripts/architecture.py"
    )


def test_a_stale_table_is_noticed() -> None:
    text = arch.update(arch.DOC.read_text())
    assert arch.stale(text) == []
    grown = re.sub(r"(\| `traces` \| \d+ \| )([\d,]+)", lambda m: m.group(1) + "99,999", text)
    assert any("traces" in p for p in arch.stale(grown))
    moved = text.replace("| `compare` |", "| `comparison` |")
    assert arch.stale(moved)
