"""Hand-written reference pages agree with the code they describe (the rest is generated at build time).

The log contract (docs/log-format.md) is prose with tables; its field table and event kinds must be the
ones the reader declares (quicsm.traces.contract), so a field added to the reader without a line in the
contract, or a documented field the reader no longer knows, fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

from quicsm.traces import contract
from quicsm.traces.events import EVENT_KINDS

ROOT = Path(__file__).resolve().parents[2]


def _fields_table(text: str) -> list[str]:
    section = text.split("\n## Fields\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z_]+)` \|", section, re.M)


def test_log_contract_fields_are_the_readers() -> None:
    text = (ROOT / "docs" / "log-format.md").read_text()
    documented = _fields_table(text)
    assert len(documented) == len(set(documented))
    assert set(documented) == set(contract._ORDER), (
        f"only in docs/log-format.md: {sorted(set(documented) - set(contract._ORDER))}; "
        f"only in the reader: {sorted(set(contract._ORDER) - set(documented))}"
    )
    assert f"this document describes `{contract.FORMAT_VERSION}`" in text


def test_log_contract_event_kinds_are_the_readers() -> None:
    text = (ROOT / "docs" / "log-format.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `ev` |"))
    assert set(re.findall(r"`([a-z]+)`", row)) - {"ev"} == set(EVENT_KINDS)
