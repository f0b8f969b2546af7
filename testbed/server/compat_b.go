//go:build quicgo_b

// API generation "b" (checked with quic-go v0.43): http3.Server.QUICConfig,
// qlog.DefaultTracer reading $QLOGDIR.

package main

import (
	"crypto/tls"
	"net/http"
	"os"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/qlog"
)

const qlogSupported = true

func newServer(h http.Handler, tlsConf *tls.Config, qlogDir string) *http3.Server {
	conf := &quic.Config{}
	if qlogDir != "" {
		_ = os.Setenv("QLOGDIR", qlogDir)
		conf.Tracer = qlog.DefaultTracer
	}
	return &http3.Server{Handler: h, TLSConfig: tlsConf, QUICConfig: conf}
}
