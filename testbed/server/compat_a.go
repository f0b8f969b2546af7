//go:build quicgo_a

// http3.Server.QuicConfig (quic-go up to v0.42); the qlog tracer is set by qlog*.go.

package main

import (
	"crypto/tls"
	"net/http"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

func newServer(h http.Handler, tlsConf *tls.Config, qlogDir string, zeroRTT bool) *http3.Server {
	conf := &quic.Config{}
	setQlog(conf, qlogDir)
	if zeroRTT {
		allow0RTT(conf)
	}
	return &http3.Server{Handler: h, TLSConfig: tlsConf, QuicConfig: conf}
}
