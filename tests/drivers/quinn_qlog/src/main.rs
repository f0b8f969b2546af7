//! Writes real quinn qlogs for quicsm's metric-state reader: quinn-proto (crates.io, feature `qlog`) logs
//! `recovery_metrics_updated`, `packet_lost` and packet events, and no congestion state.
//!
//! A quinn-proto client and server talk over an emulated path on a virtual clock (quinn-proto is sans-IO:
//! every call takes `now`), so a run is exact and waits for nothing: `delay_ms` each way, a drop-tail
//! bottleneck of `rate_mbps` and one BDP of queue from server to client, seeded random loss per packet and
//! direction, and a uniform per-packet jitter (reorders, as netem does). The server sends one object of
//! `bytes` on the stream the client opens; the server's qlog is written by quinn-proto's own qlog code.
//!
//! usage: quinn_qlog <newreno|cubic|bbr> <out.sqlog> [bytes] [loss] [seed] [rate_mbps] [delay_ms] [jitter_ms]

use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::cmp::Reverse;
use std::fs::File;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use quinn_proto::{
    congestion, ClientConfig, Connection, ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig, Event,
    QlogConfig, ServerConfig, StreamEvent, TransportConfig,
};

/// xorshift64*: a tiny seeded generator, so the loss and jitter pattern is the same on every run.
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545F4914F6CDD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One direction of the path: an optional drop-tail bottleneck, then the delay (with jitter).
struct Link {
    loss: f64,
    delay: Duration,
    jitter: Duration,
    rate_bps: Option<f64>,
    queue_bytes: usize,
    busy_until: Duration,
    backlog: VecDeque<(Duration, usize)>,
}

impl Link {
    /// When a datagram of `size` bytes sent at `now` arrives, or None when it is dropped.
    fn send(&mut self, rng: &mut Rng, now: Duration, size: usize) -> Option<Duration> {
        if rng.next_f64() < self.loss {
            return None;
        }
        let mut leave = now;
        if let Some(rate) = self.rate_bps {
            while matches!(self.backlog.front(), Some(&(t, _)) if t <= now) {
                self.backlog.pop_front();
            }
            if self.backlog.iter().map(|&(_, b)| b).sum::<usize>() + size > self.queue_bytes {
                return None;
            }
            leave = now.max(self.busy_until) + Duration::from_secs_f64(size as f64 * 8.0 / rate);
            self.busy_until = leave;
            self.backlog.push_back((leave, size));
        }
        let j = self.jitter.as_secs_f64() * (2.0 * rng.next_f64() - 1.0);
        Some(Duration::from_secs_f64((leave + self.delay).as_secs_f64() + j).max(now))
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: quinn_qlog <newreno|cubic|bbr> <out.sqlog> [bytes] [loss] [seed] [rate_mbps] [delay_ms] [jitter_ms]");
        std::process::exit(2);
    }
    let arg = |i: usize, d: f64| args.get(i).map_or(d, |s| s.parse().expect("a number"));
    let cc = args[1].clone();
    let out = args[2].clone();
    let size = arg(3, 2_000_000.0) as usize;
    let loss = arg(4, 0.01);
    let seed = arg(5, 1.0) as u64;
    let rate = arg(6, 20.0) * 1e6;
    let delay = Duration::from_secs_f64(arg(7, 20.0) / 1000.0);
    let jitter = Duration::from_secs_f64(arg(8, 0.0) / 1000.0);
    let mut rng = Rng(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1);

    let base = Instant::now();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let cert_der = cert.cert.der().clone();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());

    let mut transport = TransportConfig::default();
    match cc.as_str() {
        "newreno" => transport.congestion_controller_factory(Arc::new(congestion::NewRenoConfig::default())),
        "cubic" => transport.congestion_controller_factory(Arc::new(congestion::CubicConfig::default())),
        "bbr" => transport.congestion_controller_factory(Arc::new(congestion::BbrConfig::default())),
        other => panic!("unknown controller {other}"),
    };
    let mut qlog = QlogConfig::default();
    qlog.writer(Box::new(File::create(&out).expect("qlog file")))
        .title(Some(format!("quinn-proto 0.11.14 {cc} server")))
        .start_time(base);
    transport.qlog_stream(qlog.into_stream());
    let mut server_config = ServerConfig::with_single_cert(vec![cert_der.clone()], key).unwrap();
    server_config.transport_config(Arc::new(transport));
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert_der).unwrap();
    let client_config = ClientConfig::with_root_certificates(Arc::new(roots)).unwrap();

    let server_addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 443);
    let client_addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 4433);
    let mut server_ep = Endpoint::new(Arc::new(EndpointConfig::default()), Some(Arc::new(server_config)), true, Some([7; 32]));
    let mut client_ep = Endpoint::new(Arc::new(EndpointConfig::default()), None, true, Some([9; 32]));
    let bdp = (rate * 2.0 * delay.as_secs_f64() / 8.0) as usize;
    let mut down = Link { loss, delay, jitter, rate_bps: Some(rate), queue_bytes: bdp.max(15_000), busy_until: Duration::ZERO, backlog: VecDeque::new() };
    let mut up = Link { loss, delay, jitter, rate_bps: None, queue_bytes: 0, busy_until: Duration::ZERO, backlog: VecDeque::new() };

    let mut now = Duration::ZERO;
    let (client_ch, client) = client_ep.connect(base, client_config, server_addr, "localhost").unwrap();
    // (0: client, 1: server) connections by handle
    let mut conns: [HashMap<ConnectionHandle, Connection>; 2] = [HashMap::new(), HashMap::new()];
    conns[0].insert(client_ch, client);
    // arrivals: (time, seq) -> (to side, bytes)
    let mut heap: BinaryHeap<Reverse<(Duration, u64)>> = BinaryHeap::new();
    let mut packets: HashMap<u64, (usize, Vec<u8>)> = HashMap::new();
    let mut seq = 0u64;
    let mut received = 0usize;
    let mut stream = None;
    let mut done = false;
    let mut buf = Vec::new();
    let mut left: HashMap<quinn_proto::StreamId, usize> = HashMap::new();
    let limit = Duration::from_secs(300);

    while now < limit && !done {
        // everything each connection wants to send now, and its endpoint events
        for side in 0..2 {
            let handles: Vec<ConnectionHandle> = conns[side].keys().copied().collect();
            for ch in handles {
                loop {
                    let conn = conns[side].get_mut(&ch).unwrap();
                    buf.clear();
                    let Some(t) = conn.poll_transmit(base + now, 1, &mut buf) else { break };
                    let link = if side == 0 { &mut up } else { &mut down };
                    if let Some(at) = link.send(&mut rng, now, t.size) {
                        seq += 1;
                        heap.push(Reverse((at, seq)));
                        packets.insert(seq, (1 - side, buf[..t.size].to_vec()));
                    }
                }
                while let Some(ev) = conns[side].get_mut(&ch).unwrap().poll_endpoint_events() {
                    let ep = if side == 0 { &mut client_ep } else { &mut server_ep };
                    if let Some(back) = ep.handle_event(ch, ev) {
                        conns[side].get_mut(&ch).unwrap().handle_event(back);
                    }
                }
            }
        }
        // the next thing to happen: an arrival or a timer
        let mut next_timer: Option<(Instant, usize, ConnectionHandle)> = None;
        for (s, m) in conns.iter_mut().enumerate() {
            for (ch, c) in m.iter_mut() {
                if let Some(t) = c.poll_timeout() {
                    if next_timer.map_or(true, |(u, _, _)| t < u) {
                        next_timer = Some((t, s, *ch));
                    }
                }
            }
        }
        let next_arrival = heap.peek().map(|Reverse((t, _))| *t);
        match (next_arrival, next_timer) {
            (None, None) => break,
            (Some(a), t) if t.map_or(true, |(tt, _, _)| a <= tt.duration_since(base)) => {
                let Reverse((at, id)) = heap.pop().unwrap();
                now = now.max(at);
                let (side, data) = packets.remove(&id).unwrap();
                let (ep, from) = if side == 0 { (&mut client_ep, server_addr) } else { (&mut server_ep, client_addr) };
                let mut resp = Vec::new();
                match ep.handle(base + now, from, None, None, BytesMut::from(&data[..]), &mut resp) {
                    Some(DatagramEvent::NewConnection(incoming)) => {
                        let (ch, conn) = ep.accept(incoming, base + now, &mut resp, None).unwrap();
                        conns[side].insert(ch, conn);
                    }
                    Some(DatagramEvent::ConnectionEvent(ch, ev)) => {
                        if let Some(c) = conns[side].get_mut(&ch) {
                            c.handle_event(ev);
                        }
                    }
                    Some(DatagramEvent::Response(_)) | None => {}
                }
            }
            (_, Some((t, side, ch))) => {
                now = now.max(t.duration_since(base));
                conns[side].get_mut(&ch).unwrap().handle_timeout(base + now);
            }
            _ => break,
        }
        // application events: the client asks once connected and reads; the server answers the request
        for side in 0..2 {
            let handles: Vec<ConnectionHandle> = conns[side].keys().copied().collect();
            for ch in handles {
                let conn = conns[side].get_mut(&ch).unwrap();
                while let Some(ev) = conn.poll() {
                    match ev {
                        Event::Connected if side == 0 => {
                            let id = conn.streams().open(Dir::Bi).unwrap();
                            conn.send_stream(id).write(b"GET /\r\n").unwrap();
                            conn.send_stream(id).finish().unwrap();
                            stream = Some(id);
                        }
                        Event::Stream(StreamEvent::Opened { dir: Dir::Bi }) if side == 1 => {
                            if let Some(id) = conn.streams().accept(Dir::Bi) {
                                left.insert(id, size);
                                write_body(conn, id, &mut left);
                            }
                        }
                        Event::Stream(StreamEvent::Writable { id }) if side == 1 => write_body(conn, id, &mut left),
                        Event::Stream(StreamEvent::Readable { id }) if side == 0 => {
                            let mut rs = conn.recv_stream(id);
                            if let Ok(mut chunks) = rs.read(true) {
                                while let Ok(Some(chunk)) = chunks.next(usize::MAX) {
                                    received += chunk.bytes.len();
                                }
                                let _ = chunks.finalize();
                            }
                            if received >= size {
                                conn.close(base + now, 0u32.into(), bytes::Bytes::new());
                                done = true;
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        let _ = stream;
    }
    if received < size {
        eprintln!("transfer incomplete: {received} of {size} bytes");
        std::process::exit(1);
    }
    eprintln!("{cc}: {size} bytes in {:.3} s (virtual)", now.as_secs_f64());
}

/// Writes what flow control takes now of the object still to send on `id`; finishes the stream at its end.
fn write_body(conn: &mut Connection, id: quinn_proto::StreamId, left: &mut HashMap<quinn_proto::StreamId, usize>) {
    let Some(rest) = left.get_mut(&id) else { return };
    let chunk = vec![b'x'; 65536];
    while *rest > 0 {
        match conn.send_stream(id).write(&chunk[..(*rest).min(chunk.len())]) {
            Ok(n) if n > 0 => *rest -= n,
            _ => return,
        }
    }
    conn.send_stream(id).finish().ok();
    left.remove(&id);
}
