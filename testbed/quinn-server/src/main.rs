//! quicsm-quinn-server: an HTTP/3 server on quinn (h3 + h3-quinn) serving the same page and objects as
//! testbed/server (Go) and testbed/quiche-server: `/` is an HTML page with N `<script async src="/obj/i">`
//! tags, `/obj/i` is S bytes of a valid empty script. A self-signed certificate is made at start; its SPKI
//! hash goes into the one JSON ready line on stdout. The congestion controller is chosen per run
//! (`-cc newreno|cubic|bbr`); the patched quinn-proto prints the quicsm log lines on stderr, which `-log`
//! points at a file. `-qlog DIR` (feature `qlog`) has quinn-proto's own qlog code write each connection's
//! server qlog to DIR/conn<N>_server.sqlog beside them: the metrics it logs, with no congestion state.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

/// Datagram size used for the whole connection (as the quiche server's 1350), path MTU discovery off,
/// so the three stacks send packets of one size through the emulator.
const MTU: u16 = 1350;
/// Bytes handed to h3 per write: large enough to keep quinn's send buffer full, small enough to be cheap.
const CHUNK: usize = 64 * 1024;

struct Args {
    addr: SocketAddr,
    objects: usize,
    size: usize,
    cc: String,
    log: Option<String>,
    qlog: Option<String>,
}

fn usage_error(msg: &str) -> ! {
    eprintln!("quicsm-quinn-server: {msg}");
    std::process::exit(2);
}

fn parse_args() -> Args {
    let mut addr = "127.0.0.1:4433".to_string();
    let mut a = Args { addr: "127.0.0.1:4433".parse().unwrap(), objects: 1, size: 10000, cc: "bbr".into(), log: None, qlog: None };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage_error(&format!("{flag} needs a value")));
        match flag.trim_start_matches('-') {
            "addr" => addr = value(),
            "objects" => a.objects = value().parse().unwrap_or_else(|_| usage_error("-objects: not a number")),
            "size" => a.size = value().parse().unwrap_or_else(|_| usage_error("-size: not a number")),
            "cc" => a.cc = value(),
            "log" => a.log = Some(value()),
            "qlog" if cfg!(feature = "qlog") => a.qlog = Some(value()),
            "qlog" => usage_error("-qlog: this build has no qlog (quinn-proto before 0.11.14)"),
            _ => usage_error(&format!("unknown flag {flag} (known: -addr -objects -size -cc -log -qlog)")),
        }
    }
    a.addr = addr.parse().unwrap_or_else(|_| usage_error(&format!("-addr {addr}: not HOST:PORT")));
    a
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

/// Point stderr (where the patched quinn-proto prints the quicsm lines) at `path`, like the Go server's -log.
fn redirect_stderr(path: &str) {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::create(path).unwrap_or_else(|e| usage_error(&format!("-log {path}: {e}")));
    // SAFETY: dup2 on two valid descriptors; fd 2 then refers to the log file for the process's lifetime.
    if unsafe { libc::dup2(file.as_raw_fd(), 2) } < 0 {
        usage_error(&format!("-log {path}: dup2 failed"));
    }
}

fn congestion(cc: &str) -> Arc<dyn quinn::congestion::ControllerFactory + Send + Sync> {
    match cc {
        "bbr" => Arc::new(quinn::congestion::BbrConfig::default()),
        "cubic" => Arc::new(quinn::congestion::CubicConfig::default()),
        "newreno" | "reno" => Arc::new(quinn::congestion::NewRenoConfig::default()),
        _ => usage_error(&format!("-cc {cc}: expected bbr, cubic or newreno")),
    }
}

fn server_config(cc: &str) -> (quinn::ServerConfig, String) {
    let key = rcgen::KeyPair::generate().expect("key generation");
    let params = rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).expect("cert params");
    let cert = params.self_signed(&key).expect("self-signed certificate");
    let spki = ring::digest::digest(&ring::digest::SHA256, &key.public_key_der());
    let key_der = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key_der)
        .expect("certificate");
    tls.alpn_protocols = vec![b"h3".to_vec()];
    tls.max_early_data_size = 0;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).expect("QUIC TLS config");
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(Arc::new(transport(cc)));
    (config, base64(spki.as_ref()))
}

/// The transport settings of every connection (a connection's own qlog is added to a copy).
fn transport(cc: &str) -> quinn::TransportConfig {
    let mut transport = quinn::TransportConfig::default();
    transport
        .congestion_controller_factory(congestion(cc))
        .initial_mtu(MTU)
        .min_mtu(MTU)
        .mtu_discovery_config(None)
        .enable_segmentation_offload(false)
        .max_idle_timeout(Some(Duration::from_secs(30).try_into().expect("idle timeout")))
        .stream_receive_window(50_000_000u32.into())
        .receive_window(100_000_000u32.into())
        .send_window(100_000_000)
        .max_concurrent_bidi_streams(1000u32.into());
    transport
}

/// The server config for connection `n`: with `-qlog DIR`, one whose transport writes that connection's
/// qlog (quinn's qlog stream belongs to a transport config, so each connection gets its own).
#[cfg(feature = "qlog")]
fn connection_config(base: &quinn::ServerConfig, cc: &str, dir: &str, n: u64) -> Arc<quinn::ServerConfig> {
    let path = std::path::Path::new(dir).join(format!("conn{n}_server.sqlog"));
    let file = std::fs::File::create(&path).unwrap_or_else(|e| usage_error(&format!("-qlog {}: {e}", path.display())));
    let mut qlog = quinn::QlogConfig::default();
    qlog.writer(Box::new(std::io::BufWriter::new(file))).title(Some(format!(
        "quinn-proto {} {cc} server",
        option_env!("QUICSM_QUINN_PROTO_VERSION").unwrap_or("unknown")
    )));
    let mut t = transport(cc);
    t.qlog_stream(qlog.into_stream());
    let mut config = base.clone();
    config.transport_config(Arc::new(t));
    Arc::new(config)
}

fn page(objects: usize, size: usize) -> Bytes {
    let mut s = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>quicsm {objects} x {size} B</title></head><body>\n"
    );
    for i in 0..objects {
        s.push_str(&format!("<script async src=\"/obj/{i}\"></script>\n"));
    }
    s.push_str("</body></html>\n");
    Bytes::from(s)
}

fn object_body(size: usize) -> Bytes {
    let mut b = vec![b'x'; size];
    if size >= 4 {
        b[..2].copy_from_slice(b"/*");
        b[size - 2..].copy_from_slice(b"*/");
    }
    Bytes::from(b)
}

type Stream = h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

async fn respond(mut stream: Stream, path: String, index: Bytes, body: Bytes, objects: usize) {
    let found = path.strip_prefix("/obj/").and_then(|s| s.parse::<usize>().ok()).is_some_and(|i| i < objects);
    let (status, ctype, data) = if path == "/" {
        (200, "text/html; charset=utf-8", index)
    } else if found {
        (200, "application/javascript", body)
    } else {
        (404, "text/plain", Bytes::from_static(b"not found\n"))
    };
    let resp = http::Response::builder()
        .status(status)
        .header("content-type", ctype)
        .header("cache-control", "no-store")
        .header("content-length", data.len())
        .body(())
        .expect("response");
    if stream.send_response(resp).await.is_err() {
        return;
    }
    let mut off = 0;
    while off < data.len() {
        let end = (off + CHUNK).min(data.len());
        if stream.send_data(data.slice(off..end)).await.is_err() {
            return; // the client stopped the stream (a --duration client cancels the last fetch)
        }
        off = end;
    }
    let _ = stream.finish().await;
}

async fn serve(conn: quinn::Incoming, config: Option<Arc<quinn::ServerConfig>>, index: Bytes, body: Bytes, objects: usize) {
    let accepted = match config {
        Some(config) => conn.accept_with(config),
        None => conn.accept(),
    };
    let Ok(connecting) = accepted else { return };
    let Ok(conn) = connecting.await else { return };
    let Ok(mut h3) = h3::server::Connection::new(h3_quinn::Connection::new(conn)).await else { return };
    loop {
        match h3.accept().await {
            Ok(Some((req, stream))) => {
                let path = req.uri().path().to_string();
                tokio::spawn(respond(stream, path, index.clone(), body.clone(), objects));
            }
            Ok(None) | Err(_) => break,
        }
    }
}

fn main() {
    let args = parse_args();
    if let Some(path) = &args.log {
        redirect_stderr(path);
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    rt.block_on(async move {
        let (config, spki) = server_config(&args.cc);
        if let Some(dir) = &args.qlog {
            std::fs::create_dir_all(dir).unwrap_or_else(|e| usage_error(&format!("-qlog {dir}: {e}")));
        }
        #[cfg(feature = "qlog")]
        let base = config.clone();
        let mut accepted: u64 = 0;
        let endpoint = quinn::Endpoint::server(config, args.addr)
            .unwrap_or_else(|e| usage_error(&format!("bind {}: {e}", args.addr)));
        let local = endpoint.local_addr().expect("local address");
        println!(
            "{{\"ready\":true,\"addr\":\"{local}\",\"spki\":\"{spki}\",\"stack\":\"quinn\",\"quinn_proto\":\"{}\",\"cc\":\"{}\",\"objects\":{},\"size\":{}}}",
            option_env!("QUICSM_QUINN_PROTO_VERSION").unwrap_or("unknown"),
            args.cc,
            args.objects,
            args.size
        );
        eprintln!("quicsm-quinn-server: listening addr={local} cc={} objects={} size={}", args.cc, args.objects, args.size);
        let index = page(args.objects, args.size);
        let body = object_body(args.size);
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM");
        loop {
            tokio::select! {
                incoming = endpoint.accept() => match incoming {
                    Some(conn) => {
                        accepted += 1;
                        #[cfg(feature = "qlog")]
                        let own = args.qlog.as_deref().map(|dir| connection_config(&base, &args.cc, dir, accepted));
                        #[cfg(not(feature = "qlog"))]
                        let own = None;
                        tokio::spawn(serve(conn, own, index.clone(), body.clone(), args.objects));
                    }
                    None => break,
                },
                _ = term.recv() => break,
                _ = tokio::signal::ctrl_c() => break,
            }
        }
        // Close every connection now: their controllers are dropped, which prints their ev=close lines.
        endpoint.close(0u32.into(), b"server stopping");
        endpoint.wait_idle().await;
    });
}
