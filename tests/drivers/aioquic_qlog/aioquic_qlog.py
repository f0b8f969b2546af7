"""Writes real aioquic qlogs (a stack that logs no congestion state) for quicsm's metric-state reader.

An aioquic client and server (aioquic from PyPI, its own QUIC and recovery code, its own qlog logger)
talk over an emulated path driven by a virtual clock, so a run is exact and takes no wall time to wait:
``delay`` ms each way, a drop-tail bottleneck of ``rate`` Mbit/s and a queue of one BDP from server to
client, seeded random loss per packet and direction, and (``--jitter``) a uniform per-packet delay
that reorders, as netem does. The server sends one object of ``size`` bytes on the first stream the
client opens; its qlog is written as aioquic's QuicLogger makes it (qlog 0.3 JSON, ``traces[]``).

    python3 aioquic_qlog.py --cc reno --size 2000000 --loss 0.01 --seed 1 out.qlog

aioquic stamps its qlog events with ``time.time()``; the driver points that at the virtual clock.
"""

from __future__ import annotations

import argparse
import datetime
import heapq
import json
import random
import sys
from collections import deque
from pathlib import Path

from aioquic.quic import logger as quic_logger_module
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import StreamDataReceived
from aioquic.quic.logger import QuicLogger
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CLIENT = ("10.0.0.1", 4433)
SERVER = ("10.0.0.2", 443)
EPOCH = 1_800_000_000.0


class Clock:
    """The virtual time every component reads (seconds)."""

    def __init__(self) -> None:
        self.now = EPOCH

    def time(self) -> float:
        return self.now


def certificate() -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(start)
        .not_valid_after(start + datetime.timedelta(days=3650))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


class Link:
    """One direction: a drop-tail bottleneck (rate, queue in bytes) then a propagation delay with jitter."""

    def __init__(
        self, rng: random.Random, delay: float, jitter: float, loss: float, rate_bps: float | None, queue: int
    ):
        self.rng, self.delay, self.jitter, self.loss = rng, delay, jitter, loss
        self.rate, self.queue = rate_bps, queue
        self.busy_until = 0.0
        self.backlog: deque[tuple[float, int]] = deque()  # (leaves the bottleneck at, bytes)

    def send(self, now: float, size: int) -> float | None:
        """When a datagram sent now arrives (None: dropped)."""
        if self.rng.random() < self.loss:
            return None
        leave = now
        if self.rate:
            while self.backlog and self.backlog[0][0] <= now:
                self.backlog.popleft()
            if sum(b for _, b in self.backlog) + size > self.queue:
                return None
            leave = max(now, self.busy_until) + size * 8 / self.rate
            self.busy_until = leave
            self.backlog.append((leave, size))
        return leave + self.delay + (self.rng.uniform(-self.jitter, self.jitter) if self.jitter else 0.0)


def run(cc: str, size: int, loss: float, seed: int, rate_mbps: float, delay_ms: float, jitter_ms: float) -> dict:
    clock = Clock()
    quic_logger_module.time = clock  # aioquic's logger stamps events with time.time()
    cert, key = certificate()
    qlog = QuicLogger()
    server_conf = QuicConfiguration(is_client=False, alpn_protocols=["quicsm"], quic_logger=qlog)
    server_conf.congestion_control_algorithm = cc
    server_conf.certificate, server_conf.private_key = cert, key
    client_conf = QuicConfiguration(is_client=True, alpn_protocols=["quicsm"], verify_mode=0)
    client_conf.server_name = "localhost"
    client = QuicConnection(configuration=client_conf)
    server: QuicConnection | None = None
    rng = random.Random(seed)
    rate = rate_mbps * 1e6
    bdp = int(rate * 2 * delay_ms / 1000 / 8)
    down = Link(rng, delay_ms / 1000, jitter_ms / 1000, loss, rate, max(bdp, 15_000))
    up = Link(rng, delay_ms / 1000, jitter_ms / 1000, loss, None, 0)
    arrivals: list[tuple[float, int, str, bytes]] = []
    seq = 0
    received = 0
    stream_id = None
    client.connect(SERVER, now=clock.now)

    def flush(conn: QuicConnection, side: str) -> None:
        nonlocal seq
        link = up if side == "client" else down
        for data, _ in conn.datagrams_to_send(now=clock.now):
            at = link.send(clock.now, len(data))
            if at is not None:
                seq += 1
                heapq.heappush(arrivals, (at, seq, "server" if side == "client" else "client", data))

    flush(client, "client")
    deadline = clock.now + 120
    while clock.now < deadline:
        timers = [
            (t, s)
            for s, c in (("client", client), ("server", server))
            if c is not None and (t := c.get_timer()) is not None
        ]
        next_arrival = arrivals[0][0] if arrivals else None
        next_timer = min(timers) if timers else None
        if next_arrival is None and next_timer is None:
            break
        if next_timer is not None and (next_arrival is None or next_timer[0] < next_arrival):
            clock.now = max(clock.now, next_timer[0])
            conn = client if next_timer[1] == "client" else server
            assert conn is not None
            conn.handle_timer(now=clock.now)
            flush(conn, next_timer[1])
        else:
            at, _, to, data = heapq.heappop(arrivals)
            clock.now = max(clock.now, at)
            if to == "server":
                if server is None:
                    server = QuicConnection(
                        configuration=server_conf,
                        original_destination_connection_id=client.original_destination_connection_id,
                    )
                server.receive_datagram(data, CLIENT, now=clock.now)
                conn, side = server, "server"
            else:
                client.receive_datagram(data, SERVER, now=clock.now)
                conn, side = client, "client"
            while (ev := conn.next_event()) is not None:
                if side == "server" and isinstance(ev, StreamDataReceived) and ev.end_stream:
                    conn.send_stream_data(ev.stream_id, b"x" * size, end_stream=True)
                elif side == "client" and isinstance(ev, StreamDataReceived):
                    received += len(ev.data)
                    if ev.end_stream:
                        client.close()
                elif side == "client" and type(ev).__name__ == "HandshakeCompleted" and stream_id is None:
                    stream_id = client.get_next_available_stream_id()
                    client.send_stream_data(stream_id, b"GET /\r\n", end_stream=True)
            flush(conn, side)
            if side == "client" and stream_id is not None:
                flush(client, "client")
        if received >= size and not arrivals:
            break
    if received < size:
        raise SystemExit(f"transfer incomplete: {received} of {size} bytes")
    return qlog.to_dict()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--cc", default="reno", choices=["reno", "cubic"])
    ap.add_argument("--size", type=int, default=2_000_000)
    ap.add_argument("--loss", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rate", type=float, default=20.0, help="bottleneck Mbit/s (server to client)")
    ap.add_argument("--delay", type=float, default=20.0, help="one-way delay in ms")
    ap.add_argument("--jitter", type=float, default=0.0, help="uniform +- ms per packet (reorders)")
    a = ap.parse_args()
    doc = run(a.cc, a.size, a.loss, a.seed, a.rate, a.delay, a.jitter)
    doc["title"] = f"aioquic {a.cc} server, {a.rate:g} Mbit/s, {2 * a.delay:g} ms RTT, loss {a.loss:g}, seed {a.seed}"
    Path(a.out).write_text(json.dumps(doc))
    print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
