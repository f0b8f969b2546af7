//go:build quicgo_a

// API generation "a" (checked with quic-go v0.33): http3.RoundTripper with QuicConfig.

package main

import (
	"crypto/tls"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

func newTransport(tlsConf *tls.Config, conf *quic.Config) *http3.RoundTripper {
	return &http3.RoundTripper{TLSClientConfig: tlsConf, QuicConfig: conf}
}
