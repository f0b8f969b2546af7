// Command quicgo_ndjson writes real quic-go v0.43 (NDJSON era) qlogs for quicsm's tests.
//
// A server and a client run in one process over loopback. The server's socket drops a seeded share of
// the datagrams it sends, so its congestion controller (quic-go's Reno/Cubic sender) goes through slow
// start, recovery and congestion avoidance. The qlogs are written by quic-go's own qlog tracer
// (qlog.DefaultTracer, QLOGDIR), one <odcid>_<perspective>.qlog file per connection.
package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"flag"
	"io"
	"log"
	"math/big"
	mrand "math/rand"
	"net"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
)

// lossyConn drops outgoing datagrams with probability loss (seeded, so a run is repeatable up to timing).
type lossyConn struct {
	net.PacketConn
	mu   sync.Mutex
	rng  *mrand.Rand
	loss float64
}

func (c *lossyConn) WriteTo(p []byte, addr net.Addr) (int, error) {
	c.mu.Lock()
	drop := c.rng.Float64() < c.loss
	c.mu.Unlock()
	if drop {
		return len(p), nil
	}
	return c.PacketConn.WriteTo(p, addr)
}

func tlsConfig() *tls.Config {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		log.Fatal(err)
	}
	tmpl := x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, &key.PublicKey, key)
	if err != nil {
		log.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"quicsm-test"}}
}

func main() {
	size := flag.Int("size", 3<<20, "bytes the server sends")
	loss := flag.Float64("loss", 0.02, "share of server datagrams dropped")
	seed := flag.Int64("seed", 1, "loss seed")
	flag.Parse()

	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	conn := &lossyConn{PacketConn: udp, rng: mrand.New(mrand.NewSource(*seed)), loss: *loss}
	tr := &quic.Transport{Conn: conn}
	ln, err := tr.Listen(tlsConfig(), &quic.Config{Tracer: qlog.DefaultTracer})
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		c, err := ln.Accept(context.Background())
		if err != nil {
			log.Fatal(err)
		}
		s, err := c.AcceptStream(context.Background())
		if err != nil {
			log.Fatal(err)
		}
		buf := make([]byte, 1)
		if _, err := io.ReadFull(s, buf); err != nil {
			log.Fatal(err)
		}
		if _, err := s.Write(make([]byte, *size)); err != nil {
			log.Fatal(err)
		}
		s.Close()
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	clientTLS := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"quicsm-test"}}
	c, err := quic.DialAddr(ctx, udp.LocalAddr().String(), clientTLS, &quic.Config{})
	if err != nil {
		log.Fatal(err)
	}
	s, err := c.OpenStreamSync(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := s.Write([]byte{1}); err != nil {
		log.Fatal(err)
	}
	n, err := io.Copy(io.Discard, s)
	if err != nil {
		log.Fatal(err)
	}
	c.CloseWithError(0, "done")
	time.Sleep(200 * time.Millisecond)
	ln.Close()
	log.Printf("received %d bytes", n)
}
