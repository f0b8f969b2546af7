// Package lane is one direction of an impairment relay: every packet gets its own delay
// (fixed + uniform jitter, so jitter reorders as netem's tfifo does) or is dropped, and a
// pinned sender thread releases it at its departure time, sleeping until then. The UDP relay and the IP-layer
// (TUN) relay share it, so both impair packets by exactly the same rules.
package lane

import (
	"container/heap"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"quicsm/testbed/relay/internal/rt"
)

// Sender puts a packet back on the wire (a UDP socket, a TUN device).
type Sender interface {
	Send(data []byte)
}

// Packet is one datagram or IP packet waiting in a lane until its own departure time.
type Packet struct {
	Data   []byte
	Arrive int64
	Out    Sender
	depart int64
	seq    uint64
}

type pktHeap []*Packet

func (h pktHeap) Len() int { return len(h) }
func (h pktHeap) Less(i, j int) bool {
	if h[i].depart != h[j].depart {
		return h[i].depart < h[j].depart
	}
	return h[i].seq < h[j].seq
}
func (h pktHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pktHeap) Push(x any)   { *h = append(*h, x.(*Packet)) }
func (h *pktHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return p
}

// Config is one direction's impairment: fixed delay, uniform jitter (+-), Bernoulli loss, and
// optionally a delay step: from StepAfterNs after the relay's first packet (either direction)
// on, the fixed delay is StepDelayNs; and outages (link blackouts), times after that same first packet.
type Config struct {
	DelayNs     int64
	JitterNs    int64
	Loss        float64
	StepAfterNs int64
	StepDelayNs int64
	Outages     []Window
}

// Window is one outage: from StartNs to EndNs past the relay's first packet the link carries nothing.
type Window struct {
	StartNs, EndNs int64
}

// inOutage says whether a packet on the link from arrive to depart (relay clock) meets an outage:
// such a packet is lost, whether it entered during the blackout or was still on its way when the
// blackout began.
func (c *Config) inOutage(origin, arrive, depart int64) bool {
	for _, w := range c.Outages {
		if arrive-origin < w.EndNs && depart-origin >= w.StartNs {
			return true
		}
	}
	return false
}

// Lane delays each packet independently: delay + U(-jitter, +jitter), leaving at its own
// departure time. Readers draw loss and delay under their own lock and hand packets over through
// a lock-free queue; the heap and the send counters belong to the sender thread alone.
type Lane struct {
	Name string
	cfg  Config
	fifo bool
	// CPU, when >= 0, binds the sender thread to that CPU (set before Run). The two lanes' SCHED_FIFO
	// senders on one CPU cannot preempt each other: one waited out the other's burst of sends (send
	// lateness p99 1.0 ms; 0.19 ms with one lane per CPU, 50 Mbit/s, load 15).
	CPU int

	readerMu      sync.Mutex // readers only: rng, sequence numbers, receive counters
	rng           *rand.Rand
	nextSeq       uint64
	received      uint64
	dropped       uint64 // random loss
	outageDropped uint64 // lost to an outage

	in   *mpsc
	h    pktHeap
	Done sync.WaitGroup

	// The sender sleeps (a futex wait on wake) until its head packet is due, or while idle; a reader
	// whose packet is due before sleepUntil bumps wake and wakes it. The sender thus no longer
	// wakes every 200 us to poll: as SCHED_FIFO, each such wake-up preempted the endpoints' threads
	// on that CPU (10,000 a second for two lanes), which made them answer later in the handshake.
	wake       uint32 // futex word (sync/atomic functions only)
	sleepUntil atomic.Int64

	// origin is the arrival time of the relay's first packet, shared by both lanes (delay steps, outages).
	origin *atomic.Int64

	// OnSent, when set, is called by the sender thread after each packet left (e.g. per-flow
	// accounting); it must be quick and must not block.
	OnSent func(p *Packet, now int64)

	// sender-owned; read after the sender stopped
	sent, bytesSent, reordered, maxSentSeq uint64
	late                                   rt.Sample // send time - departure time, us
	gotFIFO                                atomic.Bool
}

// New makes a lane; fifo asks for SCHED_FIFO on its sender thread.
func New(name string, cfg Config, seed uint64, fifo bool) *Lane {
	return &Lane{Name: name, cfg: cfg, fifo: fifo, rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), in: newMPSC(),
		origin: new(atomic.Int64), CPU: -1}
}

// Push draws the packet's fate: dropped, or queued for arrive + delay (+ jitter). An outage drops
// the packet after its random draws, so the other packets' fates are those of the same seed
// without the outage.
func (l *Lane) Push(p *Packet) {
	l.readerMu.Lock()
	l.received++
	if l.cfg.Loss > 0 && l.rng.Float64() < l.cfg.Loss {
		l.dropped++
		l.readerMu.Unlock()
		return
	}
	d := l.cfg.DelayNs
	var origin int64
	if l.cfg.StepAfterNs > 0 || len(l.cfg.Outages) > 0 {
		l.origin.CompareAndSwap(0, p.Arrive)
		origin = l.origin.Load()
	}
	if l.cfg.StepAfterNs > 0 && p.Arrive-origin >= l.cfg.StepAfterNs {
		d = l.cfg.StepDelayNs
	}
	if l.cfg.JitterNs > 0 {
		d += l.rng.Int64N(2*l.cfg.JitterNs+1) - l.cfg.JitterNs
	}
	if d < 0 {
		d = 0
	}
	p.depart = p.Arrive + d
	if len(l.cfg.Outages) > 0 && l.cfg.inOutage(origin, p.Arrive, p.depart) {
		l.outageDropped++
		l.readerMu.Unlock()
		return
	}
	l.nextSeq++
	p.seq = l.nextSeq
	l.in.push(p)
	if su := l.sleepUntil.Load(); su != 0 && p.depart < su {
		atomic.AddUint32(&l.wake, 1)
		rt.FutexWake(&l.wake)
	}
	l.readerMu.Unlock()
}

// Run is the sender: a pinned thread that never parks in the Go scheduler. It sleeps until the
// head packet is due (or, idle, until a packet comes or idleNs passed), and a reader whose packet is
// due earlier than that wakes it (see Push), so packets leave on time without polling.
func (l *Lane) Run(stop *atomic.Bool) {
	defer l.Done.Done()
	l.gotFIFO.Store(rt.PinThread(l.fifo))
	if l.CPU >= 0 && !rt.PinCPU(l.CPU) {
		l.CPU = -1
	}
	const idleNs = 50_000_000 // an idle sender still looks at stop this often
	for !stop.Load() {
		for p := l.in.pop(); p != nil; p = l.in.pop() {
			heap.Push(&l.h, p)
		}
		now := rt.Now()
		until := now + idleNs
		if len(l.h) > 0 {
			head := l.h[0]
			if head.depart <= now {
				heap.Pop(&l.h)
				l.send(head)
				continue
			}
			until = head.depart
		}
		seen := atomic.LoadUint32(&l.wake)
		l.sleepUntil.Store(until)
		if p := l.in.pop(); p != nil { // came in before sleepUntil was visible: no wake-up for it
			l.sleepUntil.Store(0)
			heap.Push(&l.h, p)
			continue
		}
		rt.FutexWait(&l.wake, seen, until-rt.Now())
		l.sleepUntil.Store(0)
	}
}

func (l *Lane) send(head *Packet) {
	head.Out.Send(head.Data)
	now := rt.Now()
	l.late.Add((now - head.depart) / 1000)
	l.sent++
	l.bytesSent += uint64(len(head.Data))
	if head.seq < l.maxSentSeq {
		l.reordered++
	} else {
		l.maxSentSeq = head.seq
	}
	if l.OnSent != nil {
		l.OnSent(head, now)
	}
}

// Stats is the JSON summary of one direction.
type Stats struct {
	Received uint64 `json:"received"`
	Dropped  uint64 `json:"dropped"`
	// OutageDropped counts the packets lost to outages (not in Dropped, the random loss).
	OutageDropped uint64     `json:"outage_dropped"`
	Sent          uint64     `json:"sent"`
	BytesSent     uint64     `json:"bytes_sent"`
	Reordered     uint64     `json:"reordered"`
	Queued        int        `json:"queued"`
	FIFO          bool       `json:"sched_fifo"`
	CPU           int        `json:"cpu"`
	LateUs        rt.Summary `json:"late_us"`
}

// Stats must be called after the sender has stopped.
func (l *Lane) Stats() Stats {
	l.readerMu.Lock()
	defer l.readerMu.Unlock()
	return Stats{Received: l.received, Dropped: l.dropped, OutageDropped: l.outageDropped, Sent: l.sent, BytesSent: l.bytesSent,
		Reordered: l.reordered, Queued: len(l.h), FIFO: l.gotFIFO.Load(), CPU: l.CPU, LateUs: l.late.Summarize()}
}
