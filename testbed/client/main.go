// Command quicsm-client loads a testbed page over HTTP/3: it fetches the HTML, then every object it
// references concurrently over the same QUIC connection, and reports the page load time.
//
// Interface (kept stable for quicsm/testbed): flags -url https://HOST:PORT/ (-spki B64 | -insecure)
// [-timeout 60s] [-parallel N]; prints one JSON line
// {"ok":true,"plt_ms":...,"bytes":...,"objects":...,"proto":"h3"} or {"ok":false,"error":"..."}
// (exit status 1). Additive: -log FILE keeps the client's own quicsm lines (discarded by default).
//
// 0-RTT: with -0rtt the client first loads the HTML over a warm-up connection to get a session ticket
// and keeps that connection open (idle), then loads the page over a second connection that resumes the
// session and sends its requests as 0-RTT data. plt_ms is the second connection's page load; the line
// adds "zero_rtt":true, "warmup":1 (connections made before the page load, the first ones in the
// server's log), "warmup_ms" and "resumed" (TLS resumption of the measured connection).
//
// Long flows: with -duration D the client loads the page, then keeps -parallel (at least 2) fetches of
// the page's objects going back to back until D has passed since the start, cancels the ones still
// running, and reports {"ok":true,"duration_ms":...,"bytes":...,"fetches":...,"goodput_mbps":...}: the
// server always has a response queued, so the flow is never application-limited for want of requests,
// and its receive windows open at their largest (quicConfig), so never for want of flow-control credit.
package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"runtime/debug"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// refs finds the sub-resources of a page: src= and href= attributes (the testbed page uses src).
var refs = regexp.MustCompile(`(?i)\b(?:src|href)\s*=\s*["']([^"']+)["']`)

type result struct {
	OK      bool    `json:"ok"`
	PLTms   float64 `json:"plt_ms,omitempty"`
	Bytes   int64   `json:"bytes,omitempty"`
	Objects int     `json:"objects"`
	Proto   string  `json:"proto,omitempty"`
	Error   string  `json:"error,omitempty"`
	// Additive fields: time to the HTML, and the quic-go version compiled in.
	PageMs float64 `json:"page_ms,omitempty"`
	QuicGo string  `json:"quic_go,omitempty"`
	// -duration runs: time until the last fetch was cancelled, fetches completed, goodput over the run.
	DurationMs  float64 `json:"duration_ms,omitempty"`
	Fetches     int     `json:"fetches,omitempty"`
	GoodputMbps float64 `json:"goodput_mbps,omitempty"`
	// -0rtt runs: the warm-up connection(s) made first and what they took; whether the measured
	// connection resumed the TLS session.
	ZeroRTT  bool    `json:"zero_rtt,omitempty"`
	Warmup   int     `json:"warmup,omitempty"`
	WarmupMs float64 `json:"warmup_ms,omitempty"`
	Resumed  *bool   `json:"resumed,omitempty"`
}

// ticketCache is a session cache that signals when a ticket has been stored (the warm-up
// connection's NewSessionTicket arrives after its handshake).
type ticketCache struct {
	tls.ClientSessionCache
	once sync.Once
	got  chan struct{}
}

func (c *ticketCache) Put(key string, cs *tls.ClientSessionState) {
	c.ClientSessionCache.Put(key, cs)
	if cs != nil {
		c.once.Do(func() { close(c.got) })
	}
}

func emit(r result) {
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
	if !r.OK {
		os.Exit(1)
	}
}

// pinned accepts exactly the certificate whose SubjectPublicKeyInfo hashes to pin (base64 SHA-256).
func pinned(pin string) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("server sent no certificate")
		}
		leaf, err := x509.ParseCertificate(raw[0])
		if err != nil {
			return err
		}
		sum := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
		if got := base64.StdEncoding.EncodeToString(sum[:]); got != pin {
			return fmt.Errorf("certificate SPKI %s does not match the pin %s", got, pin)
		}
		return nil
	}
}

// method is GET, or http3.MethodGet0RTT on a resumed connection (the request goes out as 0-RTT data).
var method = http.MethodGet

func get(ctx context.Context, client *http.Client, u string) (int64, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return n, resp.Proto, fmt.Errorf("%s: reading body: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return n, resp.Proto, fmt.Errorf("%s: HTTP %d", u, resp.StatusCode)
	}
	return n, resp.Proto, nil
}

// quicGoVersion is the quic-go version compiled in.
func quicGoVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "github.com/quic-go/quic-go" {
				return d.Version
			}
		}
	}
	return ""
}

func main() {
	rawURL := flag.String("url", "", "page URL, https://HOST:PORT/")
	pin := flag.String("spki", "", "base64 SHA-256 of the server certificate's SubjectPublicKeyInfo")
	insecure := flag.Bool("insecure", false, "accept any certificate (instead of -spki)")
	timeout := flag.Duration("timeout", 60*time.Second, "limit for the whole page load")
	parallel := flag.Int("parallel", 0, "objects fetched at once (0 = all)")
	logPath := flag.String("log", "", "file for the client's own quicsm log lines (default: discarded)")
	duration := flag.Duration("duration", 0, "keep fetching the objects until this much time has passed (long flow)")
	zeroRTT := flag.Bool("0rtt", false, "warm up a connection for a session ticket, then load the page with 0-RTT")
	flag.Parse()
	if *zeroRTT && *duration > 0 {
		emit(result{Error: "-0rtt and -duration: 0-RTT is a page-load measure, give one"})
	}
	if *duration < 0 || (*duration > 0 && *duration >= *timeout) {
		emit(result{Error: fmt.Sprintf("-duration %v must be positive and below -timeout %v", *duration, *timeout)})
	}

	// The client links the same instrumented quic-go; its sender's lines are kept only on request.
	log.SetOutput(io.Discard)
	if *logPath != "" {
		f, err := os.Create(*logPath)
		if err != nil {
			emit(result{Error: "cannot open -log: " + err.Error()})
		}
		defer f.Close()
		log.SetOutput(f)
		log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	}

	page, err := url.Parse(*rawURL)
	if err != nil || page.Scheme != "https" || page.Host == "" {
		emit(result{Error: fmt.Sprintf("-url must be https://HOST:PORT/, got %q", *rawURL)})
	}
	if *pin == "" && !*insecure {
		emit(result{Error: "give -spki B64 (the server's ready line has it) or -insecure"})
	}
	tlsConf := &tls.Config{InsecureSkipVerify: true, ServerName: page.Hostname()}
	if !*insecure {
		tlsConf.VerifyPeerCertificate = pinned(*pin)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var warm warmup
	if *zeroRTT {
		warm = warmUp(ctx, tlsConf, page.String())
		defer warm.rt.Close() // kept open (idle) until the end: its connection stays apart from the measured one
		method = http3.MethodGet0RTT
	}
	rt := newTransport(tlsConf, quicConfig(*duration))
	defer rt.Close()
	client := &http.Client{Transport: rt}

	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, method, page.String(), nil)
	if err != nil {
		emit(result{Error: err.Error()})
	}
	resp, err := client.Do(req)
	if err != nil {
		emit(result{Error: err.Error()})
	}
	html, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		emit(result{Error: "reading page: " + err.Error()})
	}
	if resp.StatusCode != http.StatusOK {
		emit(result{Error: fmt.Sprintf("%s: HTTP %d", page, resp.StatusCode)})
	}
	proto := "h3"
	if resp.ProtoMajor != 3 {
		proto = resp.Proto
	}
	pageMs := float64(time.Since(start).Microseconds()) / 1000

	var objs []string
	seen := map[string]bool{}
	for _, m := range refs.FindAllSubmatch(html, -1) {
		ref, err := page.Parse(string(m[1]))
		if err != nil || ref.Host != page.Host || seen[ref.String()] {
			continue
		}
		seen[ref.String()] = true
		objs = append(objs, ref.String())
	}

	total := int64(len(html))
	if *duration > 0 {
		if len(objs) == 0 {
			emit(result{Error: "-duration: the page references no object to fetch"})
		}
		emit(stream(ctx, client, objs, start, *duration, *parallel, total, proto, pageMs))
		return // emit exits only on failure
	}
	limit := *parallel
	if limit <= 0 || limit > len(objs) {
		limit = len(objs)
	}
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	if limit < 1 {
		limit = 1
	}
	sem := make(chan struct{}, limit)
	for _, u := range objs {
		wg.Add(1)
		sem <- struct{}{}
		go func(u string) {
			defer wg.Done()
			defer func() { <-sem }()
			n, _, err := get(ctx, client, u)
			mu.Lock()
			defer mu.Unlock()
			total += n
			if err != nil && firstErr == nil {
				firstErr = err
				cancel()
			}
		}(u)
	}
	wg.Wait()
	plt := float64(time.Since(start).Microseconds()) / 1000
	if firstErr != nil {
		emit(result{Error: firstErr.Error(), Objects: len(objs), Bytes: total})
	}
	r := result{OK: true, PLTms: plt, Bytes: total, Objects: len(objs), Proto: proto, PageMs: pageMs,
		QuicGo: quicGoVersion()}
	if *zeroRTT {
		r.ZeroRTT, r.Warmup, r.WarmupMs = true, 1, warm.ms
		if resp.TLS != nil {
			r.Resumed = &resp.TLS.DidResume
		}
	}
	emit(r)
}

type warmup struct {
	rt interface{ Close() error }
	ms float64
}

// quicConfig is quic-go's default configuration, except that a long flow (-duration) opens its receive
// windows at the sizes quic-go's auto-tuning would end at (6 MiB per stream, 15 MiB per connection).
// Starting from the default 512 KiB / 768 KiB, the window ramp kept the sender flow-control-blocked for
// seconds on a 50 Mbit/s, 36 ms path; quinn counts a blocked sender as application-limited, and its BBR
// leaves Startup only on rounds that are not, so whole 6 s flows never reached Drain.
func quicConfig(duration time.Duration) *quic.Config {
	if duration <= 0 {
		return &quic.Config{}
	}
	return &quic.Config{
		InitialStreamReceiveWindow:     6 << 20,
		MaxStreamReceiveWindow:         6 << 20,
		InitialConnectionReceiveWindow: 15 << 20,
		MaxConnectionReceiveWindow:     15 << 20,
	}
}

// warmUp loads the HTML over a first connection and waits (up to 2 s) for its session ticket, which
// tlsConf's session cache then holds for the measured connection to resume with 0-RTT.
func warmUp(ctx context.Context, tlsConf *tls.Config, page string) warmup {
	cache := &ticketCache{ClientSessionCache: tls.NewLRUClientSessionCache(8), got: make(chan struct{})}
	tlsConf.ClientSessionCache = cache
	t0 := time.Now()
	rt := newTransport(tlsConf.Clone(), quicConfig(0))
	if _, _, err := get(ctx, &http.Client{Transport: rt}, page); err != nil {
		_ = rt.Close()
		emit(result{Error: "warm-up connection: " + err.Error()})
	}
	select {
	case <-cache.got:
	case <-time.After(2 * time.Second):
		_ = rt.Close()
		emit(result{Error: "warm-up connection: the server sent no session ticket within 2 s (0-RTT impossible)"})
	}
	return warmup{rt: rt, ms: float64(time.Since(t0).Microseconds()) / 1000}
}

// stream fetches objs round-robin with n (at least 2) fetches in flight until d has passed since start,
// then cancels the fetches still running. Bytes of cancelled fetches count: they were delivered.
func stream(ctx context.Context, client *http.Client, objs []string, start time.Time, d time.Duration, n int,
	pageBytes int64, proto string, pageMs float64) result {
	if n < 2 {
		n = 2
	}
	deadline := start.Add(d)
	runCtx, stop := context.WithDeadline(ctx, deadline)
	defer stop()
	var (
		mu       sync.Mutex
		total    = pageBytes
		fetches  int
		firstErr error
		wg       sync.WaitGroup
		next     int
	)
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil {
				mu.Lock()
				u := objs[next%len(objs)]
				next++
				mu.Unlock()
				got, _, err := get(runCtx, client, u)
				mu.Lock()
				total += got
				if err == nil {
					fetches++
				} else if runCtx.Err() == nil && firstErr == nil {
					firstErr = err // a failure before the time was up, not the cancellation at the end
					stop()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return result{Error: firstErr.Error(), Objects: len(objs), Bytes: total, Fetches: fetches}
	}
	if ctx.Err() != nil && time.Now().Before(deadline) {
		return result{Error: "timeout before the duration was up", Objects: len(objs), Bytes: total, Fetches: fetches}
	}
	secs := elapsed.Seconds()
	return result{OK: true, PLTms: float64(elapsed.Microseconds()) / 1000, Bytes: total, Objects: len(objs),
		Proto: proto, PageMs: pageMs, QuicGo: quicGoVersion(), DurationMs: float64(elapsed.Microseconds()) / 1000,
		Fetches: fetches, GoodputMbps: float64(total) * 8 / secs / 1e6}
}
