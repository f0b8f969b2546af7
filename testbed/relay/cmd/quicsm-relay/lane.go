package main

import (
	"container/heap"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"

	"quicsm/testbed/relay/internal/rt"
)

// packet is one datagram waiting in a lane until its own departure time.
type packet struct {
	data   []byte
	arrive int64
	depart int64
	seq    uint64
	conn   *net.UDPConn
	to     *net.UDPAddr // nil: conn is connected
}

type pktHeap []*packet

func (h pktHeap) Len() int { return len(h) }
func (h pktHeap) Less(i, j int) bool {
	if h[i].depart != h[j].depart {
		return h[i].depart < h[j].depart
	}
	return h[i].seq < h[j].seq
}
func (h pktHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pktHeap) Push(x any)   { *h = append(*h, x.(*packet)) }
func (h *pktHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return p
}

// laneConfig is one direction's impairment: fixed delay, uniform jitter (+-), Bernoulli loss.
type laneConfig struct {
	delayNs  int64
	jitterNs int64
	loss     float64
}

// lane delays each packet independently, like netem's tfifo: every packet gets
// delay + U(-jitter, +jitter) and leaves at its own departure time, so jitter reorders.
//
// Readers draw loss and delay under their own lock and hand packets over through a lock-free
// queue; the heap and the send counters belong to the sender thread alone.
type lane struct {
	name string
	cfg  laneConfig
	fifo bool

	readerMu sync.Mutex // readers only: rng, sequence numbers, receive counters
	rng      *rand.Rand
	nextSeq  uint64
	received uint64
	dropped  uint64

	in   *mpsc
	h    pktHeap
	done sync.WaitGroup

	// sender-owned; read after the sender stopped
	sent, bytesSent, reordered, maxSentSeq uint64
	late                                   rt.Sample // send time - departure time, us
	gotFIFO                                atomic.Bool
}

func newLane(name string, cfg laneConfig, seed uint64, fifo bool) *lane {
	return &lane{name: name, cfg: cfg, fifo: fifo, rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), in: newMPSC()}
}

func (l *lane) push(p *packet) {
	l.readerMu.Lock()
	l.received++
	if l.cfg.loss > 0 && l.rng.Float64() < l.cfg.loss {
		l.dropped++
		l.readerMu.Unlock()
		return
	}
	d := l.cfg.delayNs
	if l.cfg.jitterNs > 0 {
		d += l.rng.Int64N(2*l.cfg.jitterNs+1) - l.cfg.jitterNs
	}
	if d < 0 {
		d = 0
	}
	p.depart = p.arrive + d
	l.nextSeq++
	p.seq = l.nextSeq
	l.in.push(p)
	l.readerMu.Unlock()
}

// run is the sender: a pinned thread that never parks in the Go scheduler. It polls the
// queue and sleeps with nanosleep until the head packet is due, at most 200 us at a time, so a
// newly queued packet due earlier than the head is late by no more than that.
func (l *lane) run(stop *atomic.Bool) {
	defer l.done.Done()
	l.gotFIFO.Store(rt.PinThread(l.fifo))
	const chunk = 200_000
	for !stop.Load() {
		for p := l.in.pop(); p != nil; p = l.in.pop() {
			heap.Push(&l.h, p)
		}
		if len(l.h) == 0 {
			rt.Sleep(chunk)
			continue
		}
		head := l.h[0]
		if head.depart > rt.Now() {
			rt.SleepUntil(head.depart, chunk)
			continue
		}
		heap.Pop(&l.h)
		if head.to != nil {
			_, _ = head.conn.WriteToUDP(head.data, head.to)
		} else {
			_, _ = head.conn.Write(head.data)
		}
		l.late.Add((rt.Now() - head.depart) / 1000)
		l.sent++
		l.bytesSent += uint64(len(head.data))
		if head.seq < l.maxSentSeq {
			l.reordered++
		} else {
			l.maxSentSeq = head.seq
		}
	}
}

// laneStats is the JSON summary of one direction.
type laneStats struct {
	Received  uint64     `json:"received"`
	Dropped   uint64     `json:"dropped"`
	Sent      uint64     `json:"sent"`
	BytesSent uint64     `json:"bytes_sent"`
	Reordered uint64     `json:"reordered"`
	Queued    int        `json:"queued"`
	FIFO      bool       `json:"sched_fifo"`
	LateUs    rt.Summary `json:"late_us"`
}

// stats must be called after the sender has stopped.
func (l *lane) stats() laneStats {
	l.readerMu.Lock()
	defer l.readerMu.Unlock()
	return laneStats{Received: l.received, Dropped: l.dropped, Sent: l.sent, BytesSent: l.bytesSent,
		Reordered: l.reordered, Queued: len(l.h), FIFO: l.gotFIFO.Load(), LateUs: l.late.Summarize()}
}
