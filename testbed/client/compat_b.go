//go:build quicgo_b

// API generation "b" (checked with quic-go v0.43): http3.RoundTripper with QUICConfig.

package main

import (
	"crypto/tls"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

func newTransport(tlsConf *tls.Config, conf *quic.Config) *http3.RoundTripper {
	return &http3.RoundTripper{TLSClientConfig: tlsConf, QUICConfig: conf}
}
