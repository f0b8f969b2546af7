//go:build !qlog_newtracer && !qlog_conntracer

// qlog.DefaultConnectionTracer, which writes <odcid>_server.sqlog under $QLOGDIR (quic-go v0.46 and later).

package main

import (
	"os"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
)

const qlogSupported = true

func setQlog(conf *quic.Config, qlogDir string) {
	if qlogDir != "" {
		_ = os.Setenv("QLOGDIR", qlogDir)
		conf.Tracer = qlog.DefaultConnectionTracer
	}
}
