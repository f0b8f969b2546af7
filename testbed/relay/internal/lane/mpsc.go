package lane

import "sync/atomic"

// mpsc is Vyukov's intrusive multi-producer single-consumer queue: readers push without locks,
// so the real-time sender never waits on a lock held by a descheduled reader thread.
type mpsc struct {
	head atomic.Pointer[qnode]
	tail *qnode
}

type qnode struct {
	next atomic.Pointer[qnode]
	p    *Packet
}

func newMPSC() *mpsc {
	q := &mpsc{}
	stub := &qnode{}
	q.head.Store(stub)
	q.tail = stub
	return q
}

func (q *mpsc) push(p *Packet) {
	n := &qnode{p: p}
	prev := q.head.Swap(n)
	prev.next.Store(n)
}

// pop returns nil when empty (or while a push is half done; the next call sees it).
func (q *mpsc) pop() *Packet {
	next := q.tail.next.Load()
	if next == nil {
		return nil
	}
	q.tail = next
	p := next.p
	next.p = nil
	return p
}
