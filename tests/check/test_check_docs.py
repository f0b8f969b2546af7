"""docs/check.md is held to the declared formats: every field of every struct is documented, and no more."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from quicsm.check.bundle import BundleConnection, BundleFile, BundleSet
from quicsm.check.config import CheckConfig, Tolerance
from quicsm.check.report import CheckReport, FindingRecord, ScenarioRecord

DOC = (Path(__file__).resolve().parents[2] / "docs" / "check.md").read_text()


def _section(title: str) -> str:
    start = DOC.index(title)
    nxt = DOC.find("\n#", start + 1)
    return DOC[start : nxt if nxt > 0 else None]


@pytest.mark.parametrize(
    ("struct", "after"),
    [(BundleFile, "### Bundle format"), (BundleSet, "A set:"), (BundleConnection, "A connection:")],
)
def test_bundle_tables_list_every_field(struct: type[msgspec.Struct], after: str) -> None:
    section = _section("### Bundle format")
    table = section[section.index(after) :]
    table = table[: table.index("\n\n", table.index("|---"))]
    documented = re.findall(r"^\| `([a-z_]+)` \|", table, re.M)
    assert documented == list(struct.__struct_fields__)


def test_report_fields_are_documented() -> None:
    section = _section("### Report JSON")
    for struct in (CheckReport, ScenarioRecord, FindingRecord):
        for name in struct.__struct_fields__:
            assert f"`{name}`" in section, f"{struct.__name__}.{name} missing from docs/check.md"


def test_config_keys_are_documented_with_their_defaults() -> None:
    section = _section("## Tolerances")
    defaults = CheckConfig()
    for name in CheckConfig.__struct_fields__:
        if name in ("states", "edges", "paths"):
            assert f"[{name}." in section
            continue
        value = getattr(defaults, name)
        shown = f'"{value}"' if isinstance(value, str) else str(value)
        assert re.search(rf"^{name} = {re.escape(shown)}\s", section, re.M), f"{name} = {shown} not in the example"
    for name in Tolerance.__struct_fields__:
        assert name in section
