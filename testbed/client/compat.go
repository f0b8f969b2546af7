//go:build !quicgo_a && !quicgo_b

// Current API (checked with quic-go v0.52 and v0.65): http3.Transport.

package main

import (
	"crypto/tls"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

func newTransport(tlsConf *tls.Config, conf *quic.Config) *http3.Transport {
	return &http3.Transport{TLSClientConfig: tlsConf, QUICConfig: conf}
}
