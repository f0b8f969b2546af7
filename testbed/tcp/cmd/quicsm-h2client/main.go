// Command quicsm-h2client loads a testbed page over HTTP/2 + TLS 1.3 on TCP, as quicsm-client does
// over HTTP/3: the HTML, then every object it references concurrently over one connection. With
// -http 1.1 it speaks HTTP/1.1 over TLS instead, over up to six connections (a browser's limit per
// origin), each carrying one request at a time.
//
// Interface (as quicsm-client's): flags -url https://HOST:PORT/ (-spki B64 | -insecure)
// [-timeout 60s] [-parallel N] [-duration D] [-http 2|1.1]; prints one JSON line
// {"ok":true,"plt_ms":...,"bytes":...,"objects":...,"proto":"HTTP/2.0","conns":1} or
// {"ok":false,"error":"..."} (exit status 1).
//
// Long flows, as quicsm-client: with -duration D the client loads the page, then keeps -parallel (at
// least 2) fetches of the page's objects going back to back over the one connection until D has passed
// since the start, cancels the ones still running, and adds "duration_ms", "fetches" and "goodput_mbps"
// to its line, so the server always has a response queued.
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
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"regexp"
	"sync"
	"time"
)

var refs = regexp.MustCompile(`(?i)\b(?:src|href)\s*=\s*["']([^"']+)["']`)

type result struct {
	OK      bool    `json:"ok"`
	PLTms   float64 `json:"plt_ms,omitempty"`
	Bytes   int64   `json:"bytes,omitempty"`
	Objects int     `json:"objects"`
	Proto   string  `json:"proto,omitempty"`
	Error   string  `json:"error,omitempty"`
	PageMs  float64 `json:"page_ms,omitempty"`
	TLS     string  `json:"tls,omitempty"`
	// Connections the page load opened (1 over HTTP/2; up to six over HTTP/1.1).
	Conns int `json:"conns,omitempty"`
	// -duration runs: time until the last fetch was cancelled, fetches completed, goodput over the run.
	DurationMs  float64 `json:"duration_ms,omitempty"`
	Fetches     int     `json:"fetches,omitempty"`
	GoodputMbps float64 `json:"goodput_mbps,omitempty"`
}

func emit(r result) {
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
	if !r.OK {
		os.Exit(1)
	}
}

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

func get(ctx context.Context, client *http.Client, u string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return n, fmt.Errorf("%s: reading body: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return n, fmt.Errorf("%s: HTTP %d", u, resp.StatusCode)
	}
	return n, nil
}

func main() {
	rawURL := flag.String("url", "", "page URL, https://HOST:PORT/")
	pin := flag.String("spki", "", "base64 SHA-256 of the server certificate's SubjectPublicKeyInfo")
	insecure := flag.Bool("insecure", false, "accept any certificate (instead of -spki)")
	timeout := flag.Duration("timeout", 60*time.Second, "limit for the whole page load")
	parallel := flag.Int("parallel", 0, "objects fetched at once (0 = all)")
	duration := flag.Duration("duration", 0, "keep fetching the objects until this much time has passed (long flow)")
	httpVersion := flag.String("http", "2", "HTTP version: 2, or 1.1 (HTTP/1.1 over TLS, up to six connections)")
	flag.Parse()
	if *httpVersion != "2" && *httpVersion != "1.1" {
		emit(result{Error: fmt.Sprintf("-http %q: expected 2 or 1.1", *httpVersion)})
	}
	if *duration < 0 || (*duration > 0 && *duration >= *timeout) {
		emit(result{Error: fmt.Sprintf("-duration %v must be positive and below -timeout %v", *duration, *timeout)})
	}

	page, err := url.Parse(*rawURL)
	if err != nil || page.Scheme != "https" || page.Host == "" {
		emit(result{Error: fmt.Sprintf("-url must be https://HOST:PORT/, got %q", *rawURL)})
	}
	if *pin == "" && !*insecure {
		emit(result{Error: "give -spki B64 (the server's ready line has it) or -insecure"})
	}
	tlsConf := &tls.Config{InsecureSkipVerify: true, ServerName: page.Hostname(), MinVersion: tls.VersionTLS13}
	if !*insecure {
		tlsConf.VerifyPeerCertificate = pinned(*pin)
	}
	var tlsVersion string
	tr := &http.Transport{TLSClientConfig: tlsConf, ForceAttemptHTTP2: true, MaxConnsPerHost: 1,
		DisableCompression: true}
	if *httpVersion == "1.1" {
		tlsConf.NextProtos = []string{"http/1.1"}
		tr = &http.Transport{TLSClientConfig: tlsConf, ForceAttemptHTTP2: false, MaxConnsPerHost: 6,
			MaxIdleConnsPerHost: 6, DisableCompression: true,
			TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}} // non-nil and empty: no HTTP/2
	}
	client := &http.Client{Transport: tr}
	var conns sync.Map
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		conns.Store(info.Conn.LocalAddr().String(), true)
	}})
	countConns := func() int {
		n := 0
		conns.Range(func(_, _ any) bool { n++; return true })
		return n
	}

	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, page.String(), nil)
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
	if resp.TLS != nil {
		tlsVersion = tls.VersionName(resp.TLS.Version)
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
		r := stream(ctx, client, objs, start, *duration, *parallel, total)
		r.Proto, r.PageMs, r.TLS, r.Conns = resp.Proto, pageMs, tlsVersion, countConns()
		emit(r)
		return // emit exits only on failure
	}
	limit := *parallel
	if limit <= 0 || limit > len(objs) {
		limit = len(objs)
	}
	limit = max(limit, 1)
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	sem := make(chan struct{}, limit)
	for _, u := range objs {
		wg.Add(1)
		sem <- struct{}{}
		go func(u string) {
			defer wg.Done()
			defer func() { <-sem }()
			n, err := get(ctx, client, u)
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
	emit(result{OK: true, PLTms: plt, Bytes: total, Objects: len(objs), Proto: resp.Proto, PageMs: pageMs, TLS: tlsVersion,
		Conns: countConns()})
}

// stream fetches objs round-robin with n (at least 2) fetches in flight until d has passed since start,
// then cancels the fetches still running. Bytes of cancelled fetches count: they were delivered.
func stream(ctx context.Context, client *http.Client, objs []string, start time.Time, d time.Duration, n int,
	pageBytes int64) result {
	n = max(n, 2)
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
				got, err := get(runCtx, client, u)
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
	ms := float64(elapsed.Microseconds()) / 1000
	return result{OK: true, PLTms: ms, Bytes: total, Objects: len(objs), DurationMs: ms, Fetches: fetches,
		GoodputMbps: float64(total) * 8 / elapsed.Seconds() / 1e6}
}
