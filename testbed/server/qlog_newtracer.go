//go:build qlog_newtracer

// quic.Config.Tracer is a logging.Tracer made by qlog.NewTracer (quic-go up to v0.34).

package main

import (
	"fmt"
	"io"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/logging"
	"github.com/quic-go/quic-go/qlog"
)

const qlogSupported = true

type hexID []byte

func (h hexID) String() string { return fmt.Sprintf("%x", []byte(h)) }

func setQlog(conf *quic.Config, qlogDir string) {
	if qlogDir != "" {
		conf.Tracer = qlog.NewTracer(func(p logging.Perspective, connID []byte) io.WriteCloser {
			return qlogFile(qlogDir, hexID(connID), p)
		})
	}
}
