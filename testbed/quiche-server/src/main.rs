//! quicsm-quiche-server: an HTTP/3 server on Cloudflare quiche serving the same page and objects as
//! testbed/server (Go): `/` is an HTML page with N `<script async src="/obj/i">` tags, `/obj/i` is S bytes
//! of a valid empty script. A self-signed certificate is made at start; its SPKI hash goes into the
//! one JSON ready line on stdout, like the Go server. The congestion controller is chosen per run
//! (`--cc reno|cubic|bbr2`); the patched quiche prints the quicsm log lines on stderr.

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
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage_error(&format!("{flag} needs a value")));
        match flag.trim_start_matches('-') {
            "addr" => a.addr = value(),
            "objects" => a.objects = value().parse().unwrap_or_else(|_| usage_error("--objects: not a number")),
            "size" => a.size = value().parse().unwrap_or_else(|_| usage_error("--size: not a number")),
            "cc" => a.cc = value(),
            _ => usage_error(&format!("unknown flag {flag} (known: --addr --objects --size --cc)")),
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

struct Client {
    conn: quiche::Connection,
    h3: Option<quiche::h3::Connection>,
    /// Stream -> (body, bytes already written).
    pending: HashMap<u64, (std::rc::Rc<Vec<u8>>, usize)>,
}

fn respond(client: &mut Client, stream: u64, path: &str, index: &std::rc::Rc<Vec<u8>>, body: &std::rc::Rc<Vec<u8>>, objects: usize) {
    let (status, ctype, data) = if path == "/" {
        ("200", "text/html; charset=utf-8", index.clone())
    } else if let Some(i) = path.strip_prefix("/obj/").and_then(|s| s.parse::<usize>().ok()).filter(|i| *i < objects) {
        let _ = i;
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
    let h3 = client.h3.as_mut().expect("h3 connection");
    if h3.send_response(&mut client.conn, stream, &headers, false).is_err() {
        return;
    }
    client.pending.insert(stream, (data, 0));
    flush_body(client, stream);
}

fn flush_body(client: &mut Client, stream: u64) {
    let Some((data, off)) = client.pending.get_mut(&stream) else { return };
    let h3 = client.h3.as_mut().expect("h3 connection");
    while *off < data.len() {
        match h3.send_body(&mut client.conn, stream, &data[*off..], true) {
            Ok(n) => *off += n,
            Err(_) => return,
        }
        if *off < data.len() {
            return; // the stream is blocked; continue when it becomes writable
        }
    }
    client.pending.remove(&stream);
}

fn main() {
    let args = parse_args();
    let cc = cc_name(&args.cc);
    let socket = UdpSocket::bind(&args.addr).unwrap_or_else(|e| usage_error(&format!("bind {}: {e}", args.addr)));
    let local = socket.local_addr().expect("local address");
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
    config.set_cc_algorithm_name(cc).expect("congestion controller");
    let h3_config = quiche::h3::Config::new().expect("h3 config");

    println!(
        "{{\"ready\":true,\"addr\":\"{local}\",\"spki\":\"{spki}\",\"stack\":\"quiche\",\"cc\":\"{}\",\"objects\":{},\"size\":{}}}",
        args.cc, args.objects, args.size
    );
    eprintln!("quicsm-quiche-server: listening addr={local} cc={} objects={} size={}", args.cc, args.objects, args.size);

    let index = std::rc::Rc::new(page(args.objects, args.size));
    let body = std::rc::Rc::new(object_body(args.size));
    let mut clients: HashMap<quiche::ConnectionId<'static>, Client> = HashMap::new();
    let mut buf = [0u8; 65535];
    let mut out = [0u8; MAX_DATAGRAM];

    loop {
        let timeout = clients.values().filter_map(|c| c.conn.timeout()).min().unwrap_or(Duration::from_millis(100));
        socket.set_read_timeout(Some(timeout.max(Duration::from_micros(50)))).expect("read timeout");
        let deadline = Instant::now() + timeout;
        match socket.recv_from(&mut buf) {
            Ok((len, from)) => handle_datagram(&mut buf[..len], from, local, &socket, &mut config, &h3_config, &mut clients, &mut out),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => usage_error(&format!("recv: {e}")),
        }
        if Instant::now() >= deadline {
            for c in clients.values_mut() {
                c.conn.on_timeout();
            }
        }
        for c in clients.values_mut() {
            serve(c, &index, &body, args.objects);
            while let Ok((n, info)) = c.conn.send(&mut out) {
                let _ = socket.send_to(&out[..n], info.to);
            }
        }
        clients.retain(|_, c| !c.conn.is_closed());
    }
}

#[allow(clippy::too_many_arguments)]
fn handle_datagram(
    pkt: &mut [u8], from: SocketAddr, local: SocketAddr, socket: &UdpSocket, config: &mut quiche::Config,
    h3_config: &quiche::h3::Config, clients: &mut HashMap<quiche::ConnectionId<'static>, Client>, out: &mut [u8],
) {
    let Ok(hdr) = quiche::Header::from_slice(pkt, quiche::MAX_CONN_ID_LEN) else { return };
    let key = if clients.contains_key(&hdr.dcid) {
        hdr.dcid.clone().into_owned()
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
        clients.insert(scid.clone(), Client { conn, h3: None, pending: HashMap::new() });
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
    let writable: Vec<u64> = c.conn.writable().collect();
    for s in writable {
        flush_body(c, s);
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
