"""The Chromium end-to-end tests' helper on a run where the browser raced a second QUIC connection to the
origin (seen once under load): both connections' states are checked and the page's is the one returned."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from contract_checks import browser_page_trace

RUN = Path(__file__).parents[2] / "traces" / "fig13" / "desktop" / "desktop-00"


def _run(tmp_path: Path, second: int, first_state: str = "SlowStart") -> Path:
    """desktop-00 as a Chromium run: its one connection, plus the first ``second`` lines of another."""
    lines = gzip.decompress((RUN / "server.log.gz").read_bytes()).decode().splitlines(keepends=True)
    conn = [line for line in lines if " conn=" in line]
    raced = [line.replace("conn=0x22920a166480", "conn=0x22920a1664c0") for line in conn[:second]]
    raced = [line.replace("to=SlowStart", f"to={first_state}", 1) for line in raced[:1]] + raced[1:]
    (tmp_path / "server.log").write_text("".join(lines[:1] + raced[:1] + conn + raced[1:]))
    meta = json.loads((RUN / "meta.json").read_text())
    meta["labels"]["client"] = "chromium"
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    return tmp_path


def test_the_page_is_the_connection_with_the_most_states(tmp_path: Path) -> None:
    page = browser_page_trace(_run(tmp_path, second=2), "SlowStart")
    assert page.key == "0x22920a166480" and len(page.events) > 2


def test_every_connection_must_have_logged_its_states_from_init(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="0x22920a1664c0"):
        browser_page_trace(_run(tmp_path, second=2, first_state="Recovery"), "SlowStart")
