// Command quicsm-udpprobe measures the emulator: "send" paces timestamped UDP datagrams at a
// given rate, "recv" reports achieved rate, one-way delay percentiles and reordering as JSON.
// Both ends run on one machine (in different network namespaces), so CLOCK_REALTIME stamps
// are comparable.
package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"quicsm/testbed/relay/internal/rt"
)

const (
	magic  = 0x71736d70 // "qsmp"
	endSeq = ^uint64(0)
	hdr    = 20
	// wireOverhead is IPv4 + UDP headers, so rates compare with the configured link rate
	// (tbf additionally counts the 14-byte Ethernet header).
	wireOverhead = 28
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: quicsm-udpprobe send|recv [flags]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "send":
		send(os.Args[2:])
	case "recv":
		recv(os.Args[2:])
	default:
		fmt.Fprintln(os.Stderr, "quicsm-udpprobe: unknown mode", os.Args[1])
		os.Exit(2)
	}
}

func send(args []string) {
	fs := flag.NewFlagSet("send", flag.ExitOnError)
	to := fs.String("to", "", "receiver HOST:PORT")
	rate := fs.Float64("rate", 1e6, "offered rate in bit/s (IP+UDP bytes)")
	size := fs.Int("size", 1200, "UDP payload bytes")
	dur := fs.Duration("duration", 3*time.Second, "how long to send")
	_ = fs.Parse(args)
	if *size < hdr {
		*size = hdr
	}
	raddr, err := net.ResolveUDPAddr("udp", *to)
	check(err)
	c, err := net.DialUDP("udp", nil, raddr)
	check(err)
	rt.BigBuffers(c)
	rt.ReserveProcs(1)
	rt.PinThread(true)
	buf := make([]byte, *size)
	binary.BigEndian.PutUint32(buf, magic)
	gap := int64(float64((*size+wireOverhead)*8) / *rate * 1e9)
	start := rt.Now()
	end := start + int64(*dur)
	next := start
	var seq uint64
	for next < end {
		for rt.Now() < next {
			rt.SleepUntil(next, 200_000)
		}
		binary.BigEndian.PutUint64(buf[4:], seq)
		binary.BigEndian.PutUint64(buf[12:], uint64(rt.Wall()))
		_, _ = c.Write(buf)
		seq++
		next += gap
	}
	binary.BigEndian.PutUint64(buf[4:], endSeq)
	time.Sleep(300 * time.Millisecond) // let delayed packets drain before the end marker
	for i := 0; i < 5; i++ {
		_, _ = c.Write(buf[:hdr])
		time.Sleep(20 * time.Millisecond)
	}
	out, _ := json.Marshal(map[string]any{"sent": seq, "size": *size, "rate": *rate})
	fmt.Println(string(out))
}

type result struct {
	Received     uint64     `json:"received"`
	Bytes        uint64     `json:"bytes"`
	Seconds      float64    `json:"seconds"`
	RateBps      float64    `json:"rate_bps"`
	OwdUs        rt.Summary `json:"owd_us"`
	Reordered    uint64     `json:"reordered"`
	ReorderedGE3 uint64     `json:"reordered_ge3"`
	MaxSeq       uint64     `json:"max_seq"`
	// MaxGapUs is the longest silence between two arrivals and GapAtUs when it began, past the first
	// arrival (an outage shows here).
	MaxGapUs int64 `json:"max_gap_us"`
	GapAtUs  int64 `json:"gap_at_us"`
}

func recv(args []string) {
	fs := flag.NewFlagSet("recv", flag.ExitOnError)
	listen := fs.String("listen", "", "HOST:PORT to listen on")
	idle := fs.Duration("idle", 3*time.Second, "stop after this long without packets (once started)")
	wait := fs.Duration("wait", 30*time.Second, "give up if nothing arrives for this long")
	skip := fs.Duration("skip", 500*time.Millisecond, "leave the first part out of the rate (tbf burst, queue fill)")
	outPath := fs.String("out", "", "write the JSON result here (default stdout)")
	_ = fs.Parse(args)
	laddr, err := net.ResolveUDPAddr("udp", *listen)
	check(err)
	c, err := net.ListenUDP("udp", laddr)
	check(err)
	rt.BigBuffers(c)
	ready, _ := json.Marshal(map[string]any{"ready": true, "listen": c.LocalAddr().String()})
	fmt.Println(string(ready))

	var r result
	var owd rt.Sample
	var first, last int64
	var rateBytes uint64
	var rateStart int64 = -1
	var maxSeq uint64
	seen := false
	buf := make([]byte, 65536)
	for {
		limit := *wait
		if seen {
			limit = *idle
		}
		_ = c.SetReadDeadline(time.Now().Add(limit))
		n, _, err := c.ReadFromUDP(buf)
		if err != nil {
			break
		}
		now := rt.Wall()
		if n < hdr || binary.BigEndian.Uint32(buf) != magic {
			continue
		}
		seq := binary.BigEndian.Uint64(buf[4:])
		if seq == endSeq {
			break
		}
		sent := int64(binary.BigEndian.Uint64(buf[12:]))
		if !seen {
			seen, first, last = true, now, now
		}
		if gap := (now - last) / 1000; gap > r.MaxGapUs {
			r.MaxGapUs, r.GapAtUs = gap, (last-first)/1000
		}
		last = now
		r.Received++
		r.Bytes += uint64(n + wireOverhead)
		if now-first >= int64(*skip) {
			if rateStart < 0 {
				rateStart = now
			} else {
				rateBytes += uint64(n + wireOverhead)
			}
		}
		owd.Add((now - sent) / 1000)
		if r.Received > 1 && seq < maxSeq {
			r.Reordered++
			if seq+3 <= maxSeq {
				r.ReorderedGE3++
			}
		} else {
			maxSeq = seq
		}
	}
	r.MaxSeq = maxSeq
	if seen {
		r.Seconds = float64(last-first) / 1e9
		if last > rateStart && rateStart > 0 {
			r.RateBps = float64(rateBytes*8) / (float64(last-rateStart) / 1e9)
		}
	}
	r.OwdUs = owd.Summarize()
	out, _ := json.Marshal(r)
	if *outPath == "" {
		fmt.Println(string(out))
		return
	}
	check(os.WriteFile(*outPath, out, 0o644))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "quicsm-udpprobe:", err)
		os.Exit(1)
	}
}
