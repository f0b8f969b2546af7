// Command quicsm-relay is the testbed's userspace UDP impairment relay: clients send to its
// listen address, it forwards to the upstream server, and each direction delays, jitters
// (reordering like netem) and drops packets. The bottleneck rate is tc tbf's job, not ours.
//
// It prints {"ready":true,...} on stdout once listening, and on SIGTERM/SIGINT writes a JSON
// summary (per-direction counters, send lateness percentiles, reordering) to -stats.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"quicsm/testbed/relay/internal/rt"
)

type session struct {
	up *net.UDPConn
}

func main() {
	listen := flag.String("listen", "", "client-facing UDP address HOST:PORT")
	upstream := flag.String("upstream", "", "server UDP address HOST:PORT")
	delayDown := flag.Duration("delay-down", 0, "one-way delay server->client")
	delayUp := flag.Duration("delay-up", 0, "one-way delay client->server")
	jitterDown := flag.Duration("jitter-down", 0, "uniform jitter +- server->client (reorders)")
	jitterUp := flag.Duration("jitter-up", 0, "uniform jitter +- client->server (reorders)")
	lossDown := flag.Float64("loss-down", 0, "drop probability server->client (0..1)")
	lossUp := flag.Float64("loss-up", 0, "drop probability client->server (0..1)")
	seed := flag.Uint64("seed", 1, "random seed for loss and jitter")
	fifo := flag.Bool("rt", true, "SCHED_FIFO for the two sender threads only")
	statsPath := flag.String("stats", "", "write the JSON summary here on exit")
	flag.Parse()
	rt.ReserveProcs(2)
	debug.SetGCPercent(400) // fewer collections: each one can stall the sender threads
	if *listen == "" || *upstream == "" {
		fmt.Fprintln(os.Stderr, "quicsm-relay: -listen and -upstream are required")
		os.Exit(2)
	}
	for _, p := range []float64{*lossDown, *lossUp} {
		if p < 0 || p > 1 {
			fmt.Fprintln(os.Stderr, "quicsm-relay: loss must be within 0..1")
			os.Exit(2)
		}
	}
	laddr, err := net.ResolveUDPAddr("udp", *listen)
	check(err)
	uaddr, err := net.ResolveUDPAddr("udp", *upstream)
	check(err)
	lc, err := net.ListenUDP("udp", laddr)
	check(err)
	rt.BigBuffers(lc)

	down := newLane("down", laneConfig{int64(*delayDown), int64(*jitterDown), *lossDown}, *seed, *fifo)
	up := newLane("up", laneConfig{int64(*delayUp), int64(*jitterUp), *lossUp}, *seed+1, *fifo)
	var stop atomic.Bool
	down.done.Add(1)
	up.done.Add(1)
	go down.run(&stop)
	go up.run(&stop)

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
		client := &net.UDPAddr{IP: append(net.IP(nil), from.IP...), Port: from.Port}
		go func() { // server -> client
			buf := make([]byte, 65536)
			for {
				n, err := c.Read(buf)
				if err != nil {
					return
				}
				down.push(&packet{data: append([]byte(nil), buf[:n]...), arrive: rt.Now(), conn: lc, to: client})
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
			up.push(&packet{data: append([]byte(nil), buf[:n]...), arrive: now, conn: s.up})
		}
	}()

	ready, _ := json.Marshal(map[string]any{"ready": true, "listen": lc.LocalAddr().String(), "upstream": uaddr.String()})
	fmt.Println(string(ready))

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	started := time.Now()
	<-sig
	stop.Store(true)
	down.done.Wait()
	up.done.Wait()
	if *statsPath != "" {
		mu.Lock()
		nsess := len(sessions)
		mu.Unlock()
		out, _ := json.MarshalIndent(map[string]any{
			"down": down.stats(), "up": up.stats(), "sessions": nsess,
			"seconds": time.Since(started).Seconds(),
		}, "", "  ")
		tmp := *statsPath + ".tmp"
		if err := os.WriteFile(tmp, out, 0o644); err == nil {
			_ = os.Rename(tmp, *statsPath)
		}
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "quicsm-relay:", err)
		os.Exit(1)
	}
}
