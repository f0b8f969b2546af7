"""Which relay a run uses: the IP-layer relay unless ``QUICSM_EMULATOR`` says ``udp``."""

from __future__ import annotations

import pytest

from quicsm.errors import TestbedError
from quicsm.testbed.emulator import default_mode


def test_the_ip_relay_is_the_default_and_udp_stays_an_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QUICSM_EMULATOR", raising=False)
    assert default_mode() == "ip"
    monkeypatch.setenv("QUICSM_EMULATOR", " UDP ")
    assert default_mode() == "udp"
    monkeypatch.setenv("QUICSM_EMULATOR", "tap")
    with pytest.raises(TestbedError, match="QUICSM_EMULATOR='tap': choose udp or ip"):
        default_mode()
