// Command quicsm-server serves the paper's Table 2 workloads (a page of N objects of S bytes) over
// HTTP/3 with an instrumented quic-go, routing the congestion-state log lines to a file.
//
// It builds against every quic-go version quicsm patches: the few API differences live in the
// compat*.go (http3 API) and qlog*.go (tracer API) files, chosen by build tags that quicsm reads
// from the quic-go source (quicsm.instrumentation.targets.quic_go.build_requirements).
//
// Mixed pages (Carlucci et al.'s small/medium/large pages): -page N:S,N:S,... serves N objects of S bytes,
// then the next group, instead of -objects/-size.
//
// Interface (kept stable for quicsm/testbed): flags -addr HOST:PORT -objects N -size BYTES -log FILE
// [-qlog DIR] [-0rtt] (accept 0-RTT data from resumed clients); once listening it prints one JSON line to stdout:
// {"ready":true,"addr":"...","spki":"<base64 SHA-256 of the certificate's SubjectPublicKeyInfo>",...}.
// SIGTERM/SIGINT close the server and flush the log.
package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// lockedWriter buffers log output (a write per congestion-state change would cost a syscall each)
// and is flushed periodically and at exit.
type lockedWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Flush()
}

// selfSigned makes an ECDSA P-256 certificate valid for localhost and the listening IP.
func selfSigned(host string) (tls.Certificate, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "quicsm testbed"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(14 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	} else if host != "" && ip == nil && host != "localhost" {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	sum := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	return cert, base64.StdEncoding.EncodeToString(sum[:]), nil
}

// page is the HTML that references the N objects as async scripts. (Not <img>: Chromium cancels an
// image download as soon as the bytes fail to decode, so the page would load without the object.)
func page(sizes []int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>quicsm %d objects</title></head><body>\n",
		len(sizes))
	for i := range sizes {
		fmt.Fprintf(&b, "<script async src=\"/obj/%d\"></script>\n", i)
	}
	b.WriteString("</body></html>\n")
	return []byte(b.String())
}

// objectBody is S bytes that are also a valid (empty) script: a comment.
func objectBody(size int) []byte {
	body := make([]byte, size)
	for i := range body {
		body[i] = 'x'
	}
	if size >= 4 {
		copy(body, "/*")
		copy(body[size-2:], "*/")
	}
	return body
}

// pageSizes is the size of every object: -page groups N:S,... or -objects copies of -size.
func pageSizes(spec string, objects, size int) ([]int, error) {
	if spec == "" {
		out := make([]int, objects)
		for i := range out {
			out[i] = size
		}
		return out, nil
	}
	var out []int
	for _, part := range strings.Split(spec, ",") {
		n, s, ok := strings.Cut(part, ":")
		cnt, err1 := strconv.Atoi(n)
		sz, err2 := strconv.Atoi(s)
		if !ok || err1 != nil || err2 != nil || cnt < 0 || sz < 0 {
			return nil, fmt.Errorf("-page %q: expected N:BYTES,N:BYTES,...", spec)
		}
		for i := 0; i < cnt; i++ {
			out = append(out, sz)
		}
	}
	return out, nil
}

func handler(sizes []int) http.Handler {
	index := page(sizes)
	bodies := map[int][]byte{}
	for _, s := range sizes {
		if bodies[s] == nil {
			bodies[s] = objectBody(s)
		}
	}
	objects := len(sizes)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Length", strconv.Itoa(len(index)))
		_, _ = w.Write(index)
	})
	mux.HandleFunc("/obj/", func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/obj/"))
		if err != nil || i < 0 || i >= objects {
			http.NotFound(w, r)
			return
		}
		body := bodies[sizes[i]]
		w.Header().Set("Content-Type", "application/javascript")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	})
	return mux
}

// quicGoVersion is the quic-go version compiled in (with the replace target when patched).
func quicGoVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range info.Deps {
		if d.Path == "github.com/quic-go/quic-go" {
			return d.Version
		}
	}
	return ""
}

// readyLine is the one JSON line printed once listening (field order: ready, addr, spki, then additions).
type readyLine struct {
	Ready   bool   `json:"ready"`
	Addr    string `json:"addr"`
	SPKI    string `json:"spki"`
	QuicGo  string `json:"quic_go"`
	Objects int    `json:"objects"`
	Size    int    `json:"size"`
	Qlog    bool   `json:"qlog"`
	ZeroRTT bool   `json:"zero_rtt"`
}

func fail(format string, args ...interface{}) {
	msg := fmt.Sprintf(format, args...)
	log.Print("quicsm-server: error: " + msg)
	fmt.Fprintln(os.Stderr, "quicsm-server: "+msg)
	os.Exit(1)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:4433", "UDP address to listen on (port 0 picks one)")
	objects := flag.Int("objects", 1, "number of objects on the page")
	size := flag.Int("size", 10000, "bytes per object")
	pageSpec := flag.String("page", "", "objects of mixed sizes N:BYTES,N:BYTES,... (instead of -objects/-size)")
	logPath := flag.String("log", "", "file for the quicsm log lines and server messages (default stderr)")
	qlogDir := flag.String("qlog", "", "directory for qlog files (where the quic-go version supports it)")
	zeroRTT := flag.Bool("0rtt", false, "accept 0-RTT data from clients that resume a session")
	flag.Parse()
	if *objects < 0 || *size < 0 {
		fmt.Fprintln(os.Stderr, "quicsm-server: -objects and -size must be >= 0")
		os.Exit(2)
	}

	var out io.Writer = os.Stderr
	var lw *lockedWriter
	if *logPath != "" {
		f, err := os.Create(*logPath)
		if err != nil {
			fmt.Fprintf(os.Stderr, "quicsm-server: cannot open log: %v\n", err)
			os.Exit(1)
		}
		defer f.Close()
		lw = &lockedWriter{w: bufio.NewWriterSize(f, 256<<10)}
		out = lw
		go func() {
			for range time.Tick(200 * time.Millisecond) {
				_ = lw.Flush()
			}
		}()
	}
	log.SetOutput(out)
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	flush := func() {
		if lw != nil {
			_ = lw.Flush()
		}
	}

	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		fail("bad -addr %q: %v", *addr, err)
	}
	cert, spki, err := selfSigned(host)
	if err != nil {
		fail("certificate: %v", err)
	}
	if *qlogDir != "" {
		if err := os.MkdirAll(*qlogDir, 0o755); err != nil {
			fail("qlog dir: %v", err)
		}
	}
	conn, err := net.ListenPacket("udp", *addr)
	if err != nil {
		flush()
		fail("listen %s: %v", *addr, err)
	}
	tlsConf := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	sizes, err := pageSizes(*pageSpec, *objects, *size)
	if err != nil {
		fail("%v", err)
	}
	srv := newServer(handler(sizes), tlsConf, *qlogDir, *zeroRTT)

	ready, _ := json.Marshal(readyLine{
		Ready: true, Addr: conn.LocalAddr().String(), SPKI: spki, QuicGo: quicGoVersion(),
		Objects: len(sizes), Size: *size, Qlog: qlogSupported && *qlogDir != "", ZeroRTT: *zeroRTT,
	})
	log.Printf("quicsm-server: listening addr=%s objects=%d size=%d quic-go=%s pid=%d",
		conn.LocalAddr(), *objects, *size, quicGoVersion(), os.Getpid())
	if *qlogDir != "" && !qlogSupported {
		log.Printf("quicsm-server: -qlog ignored: this quic-go version has no qlog support here")
	}
	flush()
	fmt.Println(string(ready))

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(conn) }()
	select {
	case s := <-sigs:
		log.Printf("quicsm-server: %s, closing", s)
		_ = srv.Close()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
		}
		log.Printf("quicsm-server: closed")
		flush()
	case err := <-done:
		flush()
		if err != nil && err != http.ErrServerClosed {
			fail("serve: %v", err)
		}
	}
}
