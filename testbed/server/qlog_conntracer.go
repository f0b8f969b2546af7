//go:build qlog_conntracer

// quic.Config.Tracer is a function returning a connection tracer, which qlog.NewConnectionTracer makes for a
// writer (quic-go v0.36 to v0.45; the tracer is an interface up to v0.39 and a struct pointer after, so
// the function is built for whichever type the field has).

package main

import (
	"context"
	"io"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/logging"
	"github.com/quic-go/quic-go/qlog"
)

const qlogSupported = true

func tracerFor[T any](
	_ func(context.Context, logging.Perspective, quic.ConnectionID) T,
	newTracer func(io.WriteCloser, logging.Perspective, quic.ConnectionID) T,
	dir string,
) func(context.Context, logging.Perspective, quic.ConnectionID) T {
	return func(_ context.Context, p logging.Perspective, connID quic.ConnectionID) T {
		return newTracer(qlogFile(dir, connID, p), p, connID)
	}
}

func setQlog(conf *quic.Config, qlogDir string) {
	if qlogDir != "" {
		conf.Tracer = tracerFor(conf.Tracer, qlog.NewConnectionTracer, qlogDir)
	}
}
