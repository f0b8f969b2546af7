// Package rt holds the precise-timer helpers of the relay and the probe: a thread-pinned
// nanosleep loop with 1 ns timer slack, optional SCHED_FIFO for that thread only, and a
// monotonic clock. time.Sleep overshoots by hundreds of microseconds under load, which would
// show up as delay error and destroy netem-like reordering (see testbed-facts).
package rt

import (
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

const (
	prSetTimerSlack  = 29
	schedFIFO        = 1
	futexWaitPrivate = 128 // FUTEX_WAIT | FUTEX_PRIVATE_FLAG
	futexWakePrivate = 129 // FUTEX_WAKE | FUTEX_PRIVATE_FLAG
)

var base = time.Now()

// ReserveProcs raises GOMAXPROCS so that threads parked in raw nanosleep (which keep their P)
// leave enough Ps for the socket readers.
func ReserveProcs(pinned int) {
	if n := runtime.NumCPU() + pinned; runtime.GOMAXPROCS(0) < n {
		runtime.GOMAXPROCS(n)
	}
}

// Now is nanoseconds on a monotonic clock shared by all goroutines of the process.
func Now() int64 { return int64(time.Since(base)) }

// Wall is nanoseconds since the Unix epoch (CLOCK_REALTIME), comparable across processes and
// network namespaces of one machine.
func Wall() int64 { return time.Now().UnixNano() }

// PinThread locks the calling goroutine to its OS thread, sets 1 ns timer slack and, when
// fifo is true, SCHED_FIFO priority 10 for that thread only. It returns whether FIFO was granted.
func PinThread(fifo bool) bool {
	runtime.LockOSThread()
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0)
	if !fifo {
		return false
	}
	param := [1]int32{10}
	_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, 0, schedFIFO,
		uintptr(unsafe.Pointer(&param[0])))
	return errno == 0
}

// AllowedCPUs lists the CPUs the calling thread may run on (nil if that cannot be read).
func AllowedCPUs() []int {
	var mask [16]uint64
	n, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, uintptr(len(mask)*8), uintptr(unsafe.Pointer(&mask[0])))
	if errno != 0 {
		return nil
	}
	var cpus []int
	for i := 0; i < int(n)*8; i++ {
		if mask[i/64]&(1<<(uint(i)%64)) != 0 {
			cpus = append(cpus, i)
		}
	}
	return cpus
}

// PinCPU binds the calling thread (locked to its goroutine) to one CPU; it returns whether it could.
func PinCPU(cpu int) bool {
	if cpu < 0 || cpu >= 16*64 {
		return false
	}
	var mask [16]uint64
	mask[cpu/64] |= 1 << (uint(cpu) % 64)
	_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, uintptr(len(mask)*8), uintptr(unsafe.Pointer(&mask[0])))
	return errno == 0
}

// Sleep sleeps d with nanosleep on the current thread (no Go timer, no scheduler round trip).
func Sleep(d int64) {
	if d <= 0 {
		return
	}
	// RawSyscall keeps this thread's P: a plain syscall would hand the P away and, under load,
	// the sender would wait in Go's run queue for milliseconds after the kernel woke it.
	ts := syscall.NsecToTimespec(d)
	for {
		var rem syscall.Timespec
		_, _, errno := syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), uintptr(unsafe.Pointer(&rem)), 0)
		if errno != syscall.EINTR {
			return
		}
		ts = rem
	}
}

// FutexWait sleeps until *addr differs from val, FutexWake is called on addr, or d nanoseconds
// passed, on the current thread without handing its P away (like Sleep): a sender can sleep to a
// packet's departure and still be woken at once by a packet due earlier.
func FutexWait(addr *uint32, val uint32, d int64) {
	if d <= 0 {
		return
	}
	ts := syscall.NsecToTimespec(d)
	_, _, _ = syscall.RawSyscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWaitPrivate, uintptr(val),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// FutexWake wakes a thread in FutexWait on addr.
func FutexWake(addr *uint32) {
	_, _, _ = syscall.RawSyscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWakePrivate, 1, 0, 0, 0)
}

// SleepUntil sleeps until the monotonic time t (from Now), in chunks of at most maxChunk so
// the caller can recheck its queue.
func SleepUntil(t int64, maxChunk int64) {
	d := t - Now()
	if d > maxChunk {
		d = maxChunk
	}
	Sleep(d)
}
