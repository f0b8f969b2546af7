// Command quicsm-h2server serves the testbed page (N objects of S bytes, as quicsm-server does
// over HTTP/3) over HTTP/2 + TLS 1.3 on the kernel's TCP, with the congestion controller, pacing
// and buffer settings a run asks for, so the kernel's TCP can be traced and compared with QUIC.
//
// Interface (as quicsm-server's): flags -addr HOST:PORT -objects N -size BYTES [-page N:S,N:S,...] [-log FILE]
// [-cc cubic|reno|bbr] [-pacing-rate BYTES_PER_S] [-http 2|1.1] (1.1: HTTP/1.1 over TLS only, no h2 in
// ALPN); once listening it prints one JSON line
// {"ready":true,"addr":"...","spki":"<base64 SHA-256 of the certificate's SPKI>","cc":"...",...}.
// Every accepted connection is logged with its ports, controller and pacing cap.
// SIGTERM/SIGINT close the server.
package main

import (
	"context"
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
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

const (
	soMaxPacingRate = 47
	tcpCongestion   = 13
)

// selfSigned makes an ECDSA P-256 certificate for the listening IP and returns its SPKI pin.
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
		SerialNumber: serial, Subject: pkix.Name{CommonName: "quicsm testbed"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(14 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, DNSNames: []string{"localhost"},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
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
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		base64.StdEncoding.EncodeToString(sum[:]), nil
}

// page references the N objects as async scripts (Chromium loads them all; see quicsm-server).
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

// writeObject streams size bytes that form an empty script (a comment) from one 64 KiB buffer,
// so a multi-gigabyte object for a long flow costs no memory.
func writeObject(w http.ResponseWriter, size int) {
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = 'x'
	}
	for off := 0; off < size; {
		n := min(size-off, len(chunk))
		if rest := size - off - n; rest > 0 && rest < 2 {
			n -= 2 // keep the closing "*/" within the last write
		}
		buf := chunk[:n]
		if size >= 4 && (off == 0 || off+n == size) {
			buf = append([]byte(nil), buf...)
			if off == 0 {
				copy(buf, "/*")
			}
			if off+n == size {
				copy(buf[n-2:], "*/")
			}
		}
		if _, err := w.Write(buf); err != nil {
			return
		}
		off += n
	}
}

// pageSizes is the size of every object: -page groups N:S,... (mixed pages), or -objects copies of -size.
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
		w.Header().Set("Content-Type", "application/javascript")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Length", strconv.Itoa(sizes[i]))
		writeObject(w, sizes[i])
	})
	return mux
}

// tunedListener sets the congestion controller and the pacing cap on every accepted socket
// (children inherit the listener's, but setting them again makes a refusal visible per connection).
type tunedListener struct {
	net.Listener
	cc     string
	pacing int
}

func (l tunedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c, nil
	}
	var got string
	var serr error
	_ = raw.Control(func(fd uintptr) {
		serr = setTuning(int(fd), l.cc, l.pacing)
		got = congestionOf(int(fd))
	})
	if serr != nil {
		log.Printf("quicsm-h2server: conn %s -> %s: %v", c.LocalAddr(), c.RemoteAddr(), serr)
	}
	log.Printf("quicsm-h2server: conn local=%s remote=%s cc=%s pacing_rate=%d", c.LocalAddr(), c.RemoteAddr(),
		got, l.pacing)
	return c, nil
}

// congestionOf reads TCP_CONGESTION back (the syscall package has no string getsockopt).
func congestionOf(fd int) string {
	var buf [16]byte
	n := uint32(len(buf))
	_, _, errno := syscall.Syscall6(syscall.SYS_GETSOCKOPT, uintptr(fd), syscall.IPPROTO_TCP, tcpCongestion,
		uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
	if errno != 0 {
		return "?"
	}
	return strings.TrimRight(string(buf[:n]), "\x00")
}

func setTuning(fd int, cc string, pacing int) error {
	if cc != "" {
		if err := syscall.SetsockoptString(fd, syscall.IPPROTO_TCP, tcpCongestion, cc); err != nil {
			return fmt.Errorf("TCP_CONGESTION %s: %w", cc, err)
		}
	}
	if pacing > 0 {
		// Any cap below ~0U also switches on the kernel's internal TCP pacing for controllers
		// that do not ask for it themselves (Cubic, Reno): no fq qdisc is needed.
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, soMaxPacingRate, pacing); err != nil {
			return fmt.Errorf("SO_MAX_PACING_RATE %d: %w", pacing, err)
		}
	}
	return nil
}

func fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	log.Print("quicsm-h2server: error: " + msg)
	fmt.Fprintln(os.Stderr, "quicsm-h2server: "+msg)
	os.Exit(1)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:4433", "TCP address to listen on")
	objects := flag.Int("objects", 1, "number of objects on the page")
	size := flag.Int("size", 10000, "bytes per object")
	pageSpec := flag.String("page", "", "objects of mixed sizes N:BYTES,N:BYTES,... (instead of -objects/-size)")
	logPath := flag.String("log", "", "file for server messages (default stderr)")
	cc := flag.String("cc", "cubic", "TCP congestion control (a name in net.ipv4.tcp_available_congestion_control)")
	pacing := flag.Int("pacing-rate", 0, "SO_MAX_PACING_RATE in bytes/s; > 0 also turns on internal TCP pacing")
	httpVersion := flag.String("http", "2", "HTTP version: 2, or 1.1 (HTTP/1.1 over TLS only)")
	flag.Parse()
	if *httpVersion != "2" && *httpVersion != "1.1" {
		fmt.Fprintf(os.Stderr, "quicsm-h2server: -http %q: expected 2 or 1.1\n", *httpVersion)
		os.Exit(2)
	}
	if *objects < 0 || *size < 0 {
		fmt.Fprintln(os.Stderr, "quicsm-h2server: -objects and -size must be >= 0")
		os.Exit(2)
	}
	if *logPath != "" {
		f, err := os.Create(*logPath)
		if err != nil {
			fmt.Fprintf(os.Stderr, "quicsm-h2server: cannot open log: %v\n", err)
			os.Exit(1)
		}
		defer f.Close()
		log.SetOutput(f)
	}
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	sizes, err := pageSizes(*pageSpec, *objects, *size)
	if err != nil {
		fail("%v", err)
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		fail("bad -addr %q: %v", *addr, err)
	}
	cert, spki, err := selfSigned(host)
	if err != nil {
		fail("certificate: %v", err)
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = setTuning(int(fd), *cc, *pacing) }); err != nil {
			return err
		}
		return serr
	}}
	ln, err := lc.Listen(context.Background(), "tcp4", *addr)
	if err != nil {
		fail("listen %s: %v", *addr, err)
	}
	srv := &http.Server{
		Handler:   handler(sizes),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13, NextProtos: []string{"h2"}},
		ErrorLog:  log.Default(),
	}
	proto := "h2"
	if *httpVersion == "1.1" {
		proto = "http/1.1"
		srv.TLSConfig.NextProtos = []string{"http/1.1"}
		srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){} // non-nil and empty: no HTTP/2
	}
	ready, _ := json.Marshal(map[string]any{"ready": true, "addr": ln.Addr().String(), "spki": spki, "cc": *cc,
		"pacing_rate": *pacing, "objects": len(sizes), "size": *size, "proto": proto})
	log.Printf("quicsm-h2server: listening addr=%s objects=%d size=%d cc=%s pacing_rate=%d pid=%d",
		ln.Addr(), *objects, *size, *cc, *pacing, os.Getpid())
	fmt.Println(string(ready))

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(tunedListener{ln, *cc, *pacing}, "", "") }()
	select {
	case s := <-sigs:
		log.Printf("quicsm-h2server: %s, closing", s)
		_ = srv.Close()
	case err := <-done:
		if err != nil && err != http.ErrServerClosed {
			fail("serve: %v", err)
		}
	}
}
