//go:build !quicgo_a && !quicgo_b

// Current API (checked with quic-go v0.52 and v0.65): http3.Server.QUICConfig,
// qlog.DefaultConnectionTracer reading $QLOGDIR.

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
		conf.Tracer = qlog.DefaultConnectionTracer
	}
	return &http3.Server{Handler: h, TLSConfig: tlsConf, QUICConfig: conf}
}
