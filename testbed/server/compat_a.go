//go:build quicgo_a

// API generation "a" (checked with quic-go v0.33): http3.Server.QuicConfig, a qlog.NewTracer callback.

package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/logging"
	"github.com/quic-go/quic-go/qlog"
)

const qlogSupported = true

// bufferedFile flushes its buffer on Close (qlog writes many small records).
type bufferedFile struct {
	*bufio.Writer
	f *os.File
}

func (b bufferedFile) Close() error {
	if err := b.Flush(); err != nil {
		return err
	}
	return b.f.Close()
}

func newServer(h http.Handler, tlsConf *tls.Config, qlogDir string) *http3.Server {
	conf := &quic.Config{}
	if qlogDir != "" {
		conf.Tracer = qlog.NewTracer(func(p logging.Perspective, connID []byte) io.WriteCloser {
			path := filepath.Join(qlogDir, fmt.Sprintf("%x_%s.qlog", connID, strings.ToLower(p.String())))
			f, err := os.Create(path)
			if err != nil {
				log.Printf("quicsm-server: qlog: %v", err)
				return nil
			}
			return bufferedFile{bufio.NewWriter(f), f}
		})
	}
	return &http3.Server{Handler: h, TLSConfig: tlsConf, QuicConfig: conf}
}
