"""0-RTT, HTTP/1.1 over TLS, a rebuilt maximum congestion window, qlog beside the contract lines: what each
asks of the server and client command lines, which stacks refuse what, and the scenario file's keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from quicsm.errors import TestbedError
from quicsm.testbed.config import parse_delay
from quicsm.testbed.matrix import load_matrix, scenario_keys
from quicsm.testbed.runner import HTTP_PROTOCOLS, RunConfig
from quicsm.testbed.stacks import Built
from quicsm.testbed.threshold import set_constant

BINS = Built("x", "v", "cubic", Path("/srv"), Path("/cli"), None, True, 0.0)


def _argv(cfg: RunConfig) -> tuple[list[str], list[str]]:
    st = cfg.server_stack
    return st.server_argv(cfg, BINS, "1.2.3.4:4433", Path("/run/server.log")), st.client_argv(cfg, BINS, "u", "k")


def test_zero_rtt_asks_server_and_client() -> None:
    srv, cli = _argv(RunConfig(cc="cubic", zero_rtt=True, size=5000))
    assert "-0rtt" in srv and "-0rtt" in cli
    srv, cli = _argv(RunConfig(cc="cubic"))
    assert "-0rtt" not in srv and "-0rtt" not in cli
    assert RunConfig(cc="cubic", zero_rtt=True).label_dict()["zero_rtt"] == "on"
    assert "zero_rtt" not in RunConfig().label_dict()  # runs without it keep their labels


@pytest.mark.parametrize(
    ("kw", "msg"),
    [
        ({"stack": "tcp", "cc": "cubic", "zero_rtt": True}, "0-RTT: stack tcp"),
        ({"zero_rtt": True, "client": "chromium"}, "0-RTT runs need the Go client"),
        ({"zero_rtt": True, "duration_s": 30.0}, "0-RTT is a page-load measure"),
        ({"http": "h1"}, "http 'h1' on quic-go"),
        ({"stack": "tcp", "cc": "cubic", "http": "h3"}, "http 'h3' on tcp"),
        ({"stack": "tcp", "cc": "cubic", "max_cwnd": 100}, "max cwnd: only the quic-go"),
        ({"stack": "tcp", "cc": "cubic", "qlog": True}, "qlog: only the quic-go, ngtcp2, quinn servers"),
        ({"max_cwnd": 1}, "max cwnd 1"),
    ],
)
def test_refused_combinations(kw: dict[str, object], msg: str) -> None:
    with pytest.raises(TestbedError, match=msg):
        RunConfig(**kw)  # type: ignore[arg-type]


def test_http1_over_tls_on_the_tcp_stack() -> None:
    cfg = RunConfig(stack="tcp", cc="cubic", http="h1", objects=20)
    srv, cli = _argv(cfg)
    assert srv[srv.index("-http") + 1] == "1.1" and cli[cli.index("-http") + 1] == "1.1"
    assert cfg.http_version == "h1" and HTTP_PROTOCOLS[cfg.http_version] == "http/1.1"
    assert cfg.label_dict()["http"] == "h1"
    srv, cli = _argv(RunConfig(stack="tcp", cc="cubic"))
    assert "-http" not in srv and "-http" not in cli and RunConfig(stack="tcp", cc="cubic").http_version == "h2"
    assert RunConfig().http_version == "h3"


def test_chromium_flags_per_http_version() -> None:
    from quicsm.testbed.chromium import chromium_flags

    h1 = chromium_flags("o:1", "k", Path("/p"), "http/1.1")
    assert "--disable-quic" in h1 and "--disable-http2" in h1
    h2 = chromium_flags("o:1", "k", Path("/p"), "h2")
    assert "--disable-quic" in h2 and "--disable-http2" not in h2
    assert "--origin-to-force-quic-on=o:1" in chromium_flags("o:1", "k", Path("/p"), "h3")


def test_mixed_pages() -> None:
    cfg = RunConfig(stack="tcp", cc="cubic", page="18x2.6KB+3x86.5KB")
    assert cfg.page_groups == ((18, 2600), (3, 86500)) and cfg.page_bytes == 18 * 2600 + 3 * 86500
    srv, _ = _argv(cfg)
    assert srv[srv.index("-page") + 1] == "18:2600,3:86500" and cfg.label_dict()["page"] == "18x2.6KB+3x86.5KB"
    srv, _ = _argv(RunConfig(cc="cubic", page="2x5KB"))
    assert srv[srv.index("-page") + 1] == "2:5000"
    assert RunConfig(objects=3, size=10).page_groups == ((3, 10),) and "-page" not in _argv(RunConfig())[0]
    with pytest.raises(TestbedError, match="page '3 objects'"):
        RunConfig(page="3 objects")
    with pytest.raises(TestbedError, match="page: stack quiche serves N objects of one size"):
        RunConfig(stack="quiche", cc="cubic", page="2x5KB")


def test_qlog_dir_beside_the_log() -> None:
    srv, _ = _argv(RunConfig(cc="cubic", qlog=True))
    assert srv[srv.index("-qlog") + 1] == "/run/qlog"


def test_max_cwnd_constant_rewrite() -> None:
    src = "package protocol\n\n// MaxCongestionWindowPackets is the maximum\nconst MaxCongestionWindowPackets = 10000\n"
    assert "const MaxCongestionWindowPackets = 430\n" in set_constant(
        src, "MaxCongestionWindowPackets", 430, where="p.go"
    )
    block = "const (\n\tpacketThreshold = 3\n\ttimeThreshold = 9.0 / 8\n)\n"
    assert "\tpacketThreshold = 30\n" in set_constant(block, "packetThreshold", 30, where="s.go")
    with pytest.raises(TestbedError, match="p.go: expected one `MaxCongestionWindowPackets = N`"):
        set_constant("package x\n", "MaxCongestionWindowPackets", 5, where="p.go")


def test_parse_delay() -> None:
    assert parse_delay("36ms") == 36.0 and parse_delay("0.1s") == 100.0 and parse_delay(50) == 50.0
    for bad in ("fast", "-3", True):
        with pytest.raises(TestbedError, match="delay"):
            parse_delay(bad)  # type: ignore[arg-type]


def test_scenario_keys_struct(tmp_path: Path) -> None:
    assert scenario_keys({"rate": 5, "buffer": "30kb"}, where="w") == {"rate_mbps": 5, "queue": "30kb"}
    with pytest.raises(TestbedError, match="w: rate and rate_mbps are the same key"):
        scenario_keys({"rate": 5, "rate_mbps": 6}, where="w")
    with pytest.raises(TestbedError, match="w: zero_rtt: expected `bool"):
        scenario_keys({"zero_rtt": "yes"}, where="w")
    f = tmp_path / "m.toml"
    f.write_text(
        '[defaults]\nrtt = "50ms"\nbuffer = "13kb"\n[[scenario]]\nname = "h1"\nstack = "tcp"\ncc = "cubic"\nhttp = "h1"\n'
    )
    (sc,) = load_matrix(f).scenarios
    assert (sc.config.rtt_ms, sc.config.queue, sc.config.http) == (50.0, "13kb", "h1")
    f.write_text('[defaults]\nruns = 0\n[[scenario]]\nname = "a"\n')
    with pytest.raises(TestbedError, match=r"\[defaults\]: runs"):
        load_matrix(f)
