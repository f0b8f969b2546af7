// Command quicsm-relay is the testbed's userspace UDP impairment relay: clients send to its
// listen address, it forwards to the upstream server, and each direction delays, jitters
// (reordering like netem) and drops packets. The bottleneck rate is tc tbf's job, not ours.
//
// It prints {"ready":true,...} on stdout once listening, and on SIGTERM/SIGINT writes a JSON
// summary (per-direction counters, send lateness percentiles, reordering) to -stats.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"sync"

	"quicsm/testbed/relay/internal/lane"
	"quicsm/testbed/relay/internal/rt"
)

type session struct {
	up *net.UDPConn
}

// toConn sends on a connected socket; toAddr sends to one client from the listening socket.
type toConn struct{ c *net.UDPConn }

func (t toConn) Send(b []byte) { _, _ = t.c.Write(b) }

type toAddr struct {
	c  *net.UDPConn
	to *net.UDPAddr
}

func (t *toAddr) Send(b []byte) { _, _ = t.c.WriteToUDP(b, t.to) }

func main() {
	listen := flag.String("listen", "", "client-facing UDP address HOST:PORT")
	upstream := flag.String("upstream", "", "server UDP address HOST:PORT")
	impair := lane.RegisterFlags()
	flag.Parse()
	if *listen == "" || *upstream == "" {
		fmt.Fprintln(os.Stderr, "quicsm-relay: -listen and -upstream are required")
		os.Exit(2)
	}
	laddr, err := net.ResolveUDPAddr("udp", *listen)
	check(err)
	uaddr, err := net.ResolveUDPAddr("udp", *upstream)
	check(err)
	lc, err := net.ListenUDP("udp", laddr)
	check(err)
	rt.BigBuffers(lc)

	pair := impair.Start("quicsm-relay")
	down, up := pair.Down, pair.Up

	var mu sync.Mutex
	sessions := map[string]*session{}
	getSession := func(from *net.UDPAddr) *session {
		mu.Lock()
		defer mu.Unlock()
		if s, ok := sessions[from.String()]; ok {
			return s
		}
		c, err := net.DialUDP("udp", nil, uaddr)
		check(err)
		rt.BigBuffers(c)
		s := &session{up: c}
		sessions[from.String()] = s
		client := &toAddr{lc, &net.UDPAddr{IP: append(net.IP(nil), from.IP...), Port: from.Port}}
		go func() { // server -> client
			buf := make([]byte, 65536)
			for {
				n, err := c.Read(buf)
				if err != nil {
					return
				}
				down.Push(&lane.Packet{Data: append([]byte(nil), buf[:n]...), Arrive: rt.Now(), Out: client})
			}
		}()
		return s
	}
	go func() { // client -> server
		buf := make([]byte, 65536)
		for {
			n, from, err := lc.ReadFromUDP(buf)
			if err != nil {
				return
			}
			now := rt.Now()
			s := getSession(from)
			up.Push(&lane.Packet{Data: append([]byte(nil), buf[:n]...), Arrive: now, Out: toConn{s.up}})
		}
	}()

	pair.Serve(map[string]any{"ready": true, "listen": lc.LocalAddr().String(), "upstream": uaddr.String()},
		func() map[string]any {
			mu.Lock()
			defer mu.Unlock()
			return map[string]any{"sessions": len(sessions)}
		})
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "quicsm-relay:", err)
		os.Exit(1)
	}
}
