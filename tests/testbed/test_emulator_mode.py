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


def test_without_a_tun_device_the_error_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine or container without /dev/net/tun: one line naming the device, the fix and the other relay."""
    from quicsm.testbed import netns

    def fake_ip(ns: str, *args: str) -> None:
        if args[:2] == ("tuntap", "add"):
            raise TestbedError("ip -n x tuntap add dev qt0 mode tun: exit 1: open: No such file or directory")

    monkeypatch.setattr(netns, "_ip", fake_ip)
    with pytest.raises(TestbedError, match=r"needs a TUN device .*No such file.*modprobe tun.*QUICSM_EMULATOR=udp"):
        netns._route_through_tun(netns.Topology(tag="t"))
