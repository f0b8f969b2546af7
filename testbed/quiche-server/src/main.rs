//! quicsm-quiche-server: an HTTP/3 server on Cloudflare quiche serving the same page and objects as
//! testbed/server (Go): `/` is an HTML page with N `<script async src="/obj/i">` tags, `/obj/i` is S bytes
//! of a valid empty script. A self-signed certificate is made at start; its SPKI hash goes into the
//! one JSON ready line on stdout, like the Go server. The congestion controller is chosen per run
//! (`--cc reno|cubic|bbr2`); the patched quiche prints the quicsm log lines on stderr. With `--0rtt` it
//! accepts early data from clients that resume a session (their session tickets are this process's).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::net::UdpSocket;
use std::time::Duration;
use std::time::Instant;

use quiche::h3::NameValue;

const MAX_DATAGRAM: usize = 1350;

struct Args {
    addr: String,
    objects: usize,
    size: usize,
    cc: String,
    log: Option<String>,
    zero_rtt: bool,
}

fn usage_error(msg: &str) -> ! {
    eprintln!("quicsm-quiche-server: {msg}");
    std::process::exit(2);
}

fn parse_args() -> Args {
    let mut a = Args {
        addr: "127.0.0.1:4433".into(),
        objects: 1,
        size: 10000,
        cc: "cubic".into(),
        log: None,
        zero_rtt: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag.trim_start_matches('-') == "0rtt" {
            a.zero_rtt = true;
            continue;
        }
        let mut value = || it.next().unwrap_or_else(|| usage_error(&format!("{flag} needs a value")));
        match flag.trim_start_matches('-') {
            "addr" => a.addr = value(),
            "objects" => a.objects = value().parse().unwrap_or_else(|_| usage_error("--objects: not a number")),
            "size" => a.size = value().parse().unwrap_or_else(|_| usage_error("--size: not a number")),
            "cc" => a.cc = value(),
            "log" => a.log = Some(value()),
            _ => usage_error(&format!("unknown flag {flag} (known: --addr --objects --size --cc --log --0rtt)")),
        }
    }
    a
}

/// quiche's name of a congestion controller.
fn cc_name(cc: &str) -> &'static str {
    match cc {
        "reno" => "reno",
        "cubic" => "cubic",
        "bbr2" => "bbr2_gcongestion",
        _ => usage_error(&format!("--cc {cc}: expected reno, cubic or bbr2")),
    }
}

fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Self-signed certificate and key as PEM files in a fresh directory, and the base64 SHA-256 of the SPKI.
fn self_signed(dir: &std::path::Path) -> (String, String, String) {
    let key = rcgen::KeyPair::generate().expect("key generation");
    let params = rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).expect("cert params");
    let cert = params.self_signed(&key).expect("self-signed certificate");
    let spki = ring::digest::digest(&ring::digest::SHA256, &key.public_key_der());
    let cert_path = dir.join("cert.pem");
    let key_path = dir.join("key.pem");
    std::fs::write(&cert_path, cert.pem()).expect("write cert");
    std::fs::write(&key_path, key.serialize_pem()).expect("write key");
    (cert_path.display().to_string(), key_path.display().to_string(), base64(spki.as_ref()))
}

fn page(objects: usize, size: usize) -> Vec<u8> {
    let mut s = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>quicsm {objects} x {size} B</title></head><body>\n"
    );
    for i in 0..objects {
        s.push_str(&format!("<script async src=\"/obj/{i}\"></script>\n"));
    }
    s.push_str("</body></html>\n");
    s.into_bytes()
}

fn object_body(size: usize) -> Vec<u8> {
    let mut b = vec![b'x'; size];
    if size >= 4 {
        b[..2].copy_from_slice(b"/*");
        b[size - 2..].copy_from_slice(b"*/");
    }
    b
}

/// A response in progress: headers until quiche takes them, then the body from `off` on.
struct Response {
    headers: Option<Vec<quiche::h3::Header>>,
    body: std::rc::Rc<Vec<u8>>,
    off: usize,
}

struct Client {
    conn: quiche::Connection,
    h3: Option<quiche::h3::Connection>,
    /// Responses not fully written yet, by stream.
    pending: HashMap<u64, Response>,
    /// A datagram quiche's pacer releases later than now + PACING_SLACK: (release time, bytes, destination).
    held: Option<(Instant, Vec<u8>, SocketAddr)>,
}

/// Datagrams due within this are sent at once (a small burst, like a kernel fq quantum); later ones wait.
const PACING_SLACK: Duration = Duration::from_micros(500);

fn respond(client: &mut Client, stream: u64, path: &str, index: &std::rc::Rc<Vec<u8>>, body: &std::rc::Rc<Vec<u8>>, objects: usize) {
    let (status, ctype, data) = if path == "/" {
        ("200", "text/html; charset=utf-8", index.clone())
    } else if path.strip_prefix("/obj/").and_then(|s| s.parse::<usize>().ok()).is_some_and(|i| i < objects) {
        ("200", "application/javascript", body.clone())
    } else {
        ("404", "text/plain", std::rc::Rc::new(b"not found\n".to_vec()))
    };
    let len = data.len().to_string();
    let headers = vec![
        quiche::h3::Header::new(b":status", status.as_bytes()),
        quiche::h3::Header::new(b"content-type", ctype.as_bytes()),
        quiche::h3::Header::new(b"cache-control", b"no-store"),
        quiche::h3::Header::new(b"content-length", len.as_bytes()),
    ];
    client.pending.insert(stream, Response { headers: Some(headers), body: data, off: 0 });
    flush_response(client, stream);
}

/// Write as much of a pending response as flow control and congestion control let through now.
fn flush_response(client: &mut Client, stream: u64) {
    let Some(r) = client.pending.get_mut(&stream) else { return };
    let h3 = client.h3.as_mut().expect("h3 connection");
    if let Some(headers) = &r.headers {
        match h3.send_response(&mut client.conn, stream, headers, false) {
            Ok(()) => r.headers = None,
            Err(quiche::h3::Error::StreamBlocked | quiche::h3::Error::Done) => return,
            Err(_) => {
                client.pending.remove(&stream);
                return;
            }
        }
    }
    while r.off < r.body.len() {
        match h3.send_body(&mut client.conn, stream, &r.body[r.off..], true) {
            Ok(n) if n > 0 => r.off += n,
            Ok(_) | Err(quiche::h3::Error::Done) => return, // blocked: retried on the next pass
            Err(_) => break,
        }
    }
    client.pending.remove(&stream);
}

/// Send a client's datagrams, holding one back while quiche's pacer says it is not due yet.
fn flush_datagrams(c: &mut Client, socket: &UdpSocket, out: &mut [u8]) {
    let now = Instant::now();
    if let Some((at, pkt, to)) = c.held.take() {
        if at > now + PACING_SLACK {
            c.held = Some((at, pkt, to));
            return;
        }
        let _ = socket.send_to(&pkt, to);
    }
    while let Ok((n, info)) = c.conn.send(out) {
        if info.at > now + PACING_SLACK {
            c.held = Some((info.at, out[..n].to_vec(), info.to));
            return;
        }
        let _ = socket.send_to(&out[..n], info.to);
    }
}

static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// SIGTERM/SIGINT end the server between two loop turns (ppoll returns early on a signal).
fn stop_on_signals() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { libc::signal(sig, on_stop as extern "C" fn(libc::c_int) as libc::sighandler_t) };
    }
}

/// Sleep until the socket is readable or `timeout` has passed. ppoll takes nanoseconds on a high-resolution
/// timer; SO_RCVTIMEO (set_read_timeout) is rounded up to scheduler ticks (4-10 ms), far coarser than the
/// gaps between paced datagrams (0.2 ms at 50 Mbit/s), and held every paced sender to about 100 packets/s.
fn wait_readable(socket: &UdpSocket, timeout: Duration) {
    use std::os::fd::AsRawFd;
    let mut fds = libc::pollfd { fd: socket.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    let ts = libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as libc::c_long };
    // SAFETY: one valid pollfd and a valid timespec; no signal mask change.
    unsafe { libc::ppoll(&mut fds, 1, &ts, std::ptr::null()) };
}

/// Point stderr (where the patched quiche prints the quicsm lines) at `path`, like the Go server's -log.
fn redirect_stderr(path: &str) {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::create(path).unwrap_or_else(|e| usage_error(&format!("--log {path}: {e}")));
    // SAFETY: dup2 on two valid descriptors; fd 2 then refers to the log file for the process's lifetime.
    if unsafe { libc::dup2(file.as_raw_fd(), 2) } < 0 {
        usage_error(&format!("--log {path}: dup2 failed"));
    }
}

fn main() {
    let args = parse_args();
    let cc = cc_name(&args.cc);
    if let Some(path) = &args.log {
        redirect_stderr(path);
    }
    stop_on_signals();
    let socket = UdpSocket::bind(&args.addr).unwrap_or_else(|e| usage_error(&format!("bind {}: {e}", args.addr)));
    let local = socket.local_addr().expect("local address");
    socket.set_nonblocking(true).expect("non-blocking socket");
    let dir = std::env::temp_dir().join(format!("quicsm-quiche-server-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (cert, key, spki) = self_signed(&dir);

    let mut config = quiche::Config::new(quiche::PROTOCOL_VERSION).expect("quiche config");
    config.load_cert_chain_from_pem_file(&cert).expect("load certificate");
    config.load_priv_key_from_pem_file(&key).expect("load key");
    let _ = std::fs::remove_dir_all(&dir);
    config.set_application_protos(quiche::h3::APPLICATION_PROTOCOL).expect("alpn");
    config.set_max_idle_timeout(30_000);
    config.set_max_recv_udp_payload_size(MAX_DATAGRAM);
    config.set_max_send_udp_payload_size(MAX_DATAGRAM);
    config.set_initial_max_data(100_000_000);
    config.set_initial_max_stream_data_bidi_local(50_000_000);
    config.set_initial_max_stream_data_bidi_remote(50_000_000);
    config.set_initial_max_stream_data_uni(1_000_000);
    config.set_initial_max_streams_bidi(1000);
    config.set_initial_max_streams_uni(100);
    config.set_disable_active_migration(true);
    config.enable_pacing(true);
    config.set_cc_algorithm_name(cc).expect("congestion controller");
    if args.zero_rtt {
        config.enable_early_data();
    }
    let h3_config = quiche::h3::Config::new().expect("h3 config");

    println!(
        "{{\"ready\":true,\"addr\":\"{local}\",\"spki\":\"{spki}\",\"stack\":\"quiche\",\"quiche\":\"{}\",\"cc\":\"{}\",\"objects\":{},\"size\":{},\"zero_rtt\":{}}}",
        quiche_version(),
        args.cc,
        args.objects,
        args.size,
        args.zero_rtt
    );
    eprintln!("quicsm-quiche-server: listening addr={local} cc={} objects={} size={}", args.cc, args.objects, args.size);

    let index = std::rc::Rc::new(page(args.objects, args.size));
    let body = std::rc::Rc::new(object_body(args.size));
    let mut clients: HashMap<quiche::ConnectionId<'static>, Client> = HashMap::new();
    let mut aliases: HashMap<quiche::ConnectionId<'static>, quiche::ConnectionId<'static>> = HashMap::new();
    let mut buf = [0u8; 65535];
    let mut out = [0u8; MAX_DATAGRAM];

    loop {
        let now = Instant::now();
        let timeout = clients
            .values()
            .flat_map(|c| [c.conn.timeout(), c.held.as_ref().map(|h| h.0.saturating_duration_since(now))])
            .flatten()
            .min()
            .unwrap_or(Duration::from_millis(100));
        wait_readable(&socket, timeout);
        if STOP.load(std::sync::atomic::Ordering::Relaxed) {
            clients.clear(); // the controllers' ev=close lines, then exit like the Go server on SIGTERM
            std::process::exit(0);
        }
        loop {
            match socket.recv_from(&mut buf) {
                Ok((len, from)) => handle_datagram(
                    &mut buf[..len],
                    from,
                    local,
                    &socket,
                    &mut config,
                    &h3_config,
                    &mut clients,
                    &mut aliases,
                    &mut out,
                ),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => usage_error(&format!("recv: {e}")),
            }
        }
        for c in clients.values_mut() {
            if c.conn.timeout() == Some(Duration::ZERO) {
                c.conn.on_timeout();
            }
            serve(c, &index, &body, args.objects);
            flush_datagrams(c, &socket, &mut out);
        }
        // A connection the peer closed is dropped at once (no draining period to wait out): dropping it
        // drops its congestion controller, which prints the connection's ev=close line now.
        clients.retain(|_, c| !c.conn.is_closed() && !c.conn.is_draining());
        aliases.retain(|_, scid| clients.contains_key(scid));
    }
}

/// The quiche version this binary was built against (the build pins it; Cargo.lock records it).
fn quiche_version() -> &'static str {
    option_env!("QUICSM_QUICHE_VERSION").unwrap_or("unknown")
}

#[allow(clippy::too_many_arguments)]
fn handle_datagram(
    pkt: &mut [u8], from: SocketAddr, local: SocketAddr, socket: &UdpSocket, config: &mut quiche::Config,
    h3_config: &quiche::h3::Config, clients: &mut HashMap<quiche::ConnectionId<'static>, Client>,
    aliases: &mut HashMap<quiche::ConnectionId<'static>, quiche::ConnectionId<'static>>, out: &mut [u8],
) {
    let Ok(hdr) = quiche::Header::from_slice(pkt, quiche::MAX_CONN_ID_LEN) else { return };
    let key = if clients.contains_key(&hdr.dcid) {
        hdr.dcid.clone().into_owned()
    } else if let Some(scid) = aliases.get(&hdr.dcid) {
        // A repeated Initial still addressed to the client's original destination ID.
        scid.clone()
    } else {
        if hdr.ty != quiche::Type::Initial {
            return;
        }
        if !quiche::version_is_supported(hdr.version) {
            if let Ok(n) = quiche::negotiate_version(&hdr.scid, &hdr.dcid, out) {
                let _ = socket.send_to(&out[..n], from);
            }
            return;
        }
        let mut id = [0u8; quiche::MAX_CONN_ID_LEN];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut id).expect("random connection id");
        let scid = quiche::ConnectionId::from_vec(id.to_vec());
        let Ok(conn) = quiche::accept(&scid, None, local, from, config) else { return };
        clients.insert(scid.clone(), Client { conn, h3: None, pending: HashMap::new(), held: None });
        aliases.insert(hdr.dcid.clone().into_owned(), scid.clone());
        scid
    };
    let client = clients.get_mut(&key).expect("client");
    let _ = client.conn.recv(pkt, quiche::RecvInfo { from, to: local });
    if client.h3.is_none() && (client.conn.is_established() || client.conn.is_in_early_data()) {
        client.h3 = quiche::h3::Connection::with_transport(&mut client.conn, h3_config).ok();
    }
}

fn serve(c: &mut Client, index: &std::rc::Rc<Vec<u8>>, body: &std::rc::Rc<Vec<u8>>, objects: usize) {
    if c.h3.is_none() {
        return;
    }
    // Every pending response gets another try (there are few; this needs no writable-stream bookkeeping).
    let pending: Vec<u64> = c.pending.keys().copied().collect();
    for s in pending {
        flush_response(c, s);
    }
    loop {
        let ev = c.h3.as_mut().expect("h3").poll(&mut c.conn);
        match ev {
            Ok((stream, quiche::h3::Event::Headers { list, .. })) => {
                let path = list
                    .iter()
                    .find(|h| h.name() == b":path")
                    .map(|h| String::from_utf8_lossy(h.value()).into_owned())
                    .unwrap_or_default();
                respond(c, stream, &path, index, body, objects);
            }
            Ok(_) => {}
            Err(quiche::h3::Error::Done) => break,
            Err(_) => break,
        }
    }
}
