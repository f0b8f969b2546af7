// Command quicsm-iprelay is the testbed's IP-layer impairment relay: the relay namespace routes
// every packet it forwards into a TUN device (policy routing on the incoming interface), this
// program reads it, delays, jitters (reordering like netem) or drops it exactly as the UDP relay
// does (internal/lane), and writes it back into the TUN device, from where the kernel forwards it
// on. Any protocol passes: TCP and QUIC flows share one emulated path and one set of impairments.
//
// Direction: a packet whose destination lies in -down-net goes "down" (server to client),
// anything else "up". Down packets are also counted per flow (protocol, source, destination) in
// bins of -bin, so each flow's throughput over time can be read from the summary.
//
// It prints {"ready":true,...} on stdout once the TUN device is attached, and on SIGTERM/SIGINT
// writes a JSON summary (per-direction counters, send lateness percentiles, reordering, flows)
// to -stats, in the same form as quicsm-relay plus "flows".
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"quicsm/testbed/relay/internal/lane"
	"quicsm/testbed/relay/internal/rt"
)

const (
	iffTun     = 0x0001
	iffNoPI    = 0x1000
	tunSetIff  = 0x400454ca
	ifNameSize = 16
)

// tun is a TUN device opened blocking; writes are raw syscalls so the real-time sender threads
// keep their Go P (see rt.Sleep).
type tun struct{ fd int }

func openTun(name string) (*tun, error) {
	fd, err := syscall.Open("/dev/net/tun", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	var req [40]byte
	if len(name) >= ifNameSize {
		return nil, fmt.Errorf("TUN name %q too long", name)
	}
	copy(req[:], name)
	binary.LittleEndian.PutUint16(req[ifNameSize:], iffTun|iffNoPI)
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), tunSetIff, uintptr(unsafe.Pointer(&req[0]))); errno != 0 {
		syscall.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF %s: %w", name, errno)
	}
	return &tun{fd: fd}, nil
}

func (t *tun) Send(b []byte) {
	_, _, _ = syscall.RawSyscall(syscall.SYS_WRITE, uintptr(t.fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
}

// flowKey names one direction of a flow: protocol and both endpoints.
type flowKey struct {
	proto    uint8
	src, dst [4]byte
	sp, dp   uint16
}

func (k flowKey) protoName() string {
	switch k.proto {
	case 6:
		return "tcp"
	case 17:
		return "udp"
	case 1:
		return "icmp"
	}
	return fmt.Sprint(k.proto)
}

func (k flowKey) String() string {
	return fmt.Sprintf("%s %s:%d>%s:%d", k.protoName(), net.IP(k.src[:]), k.sp, net.IP(k.dst[:]), k.dp)
}

func parseKey(b []byte) (flowKey, bool) {
	var k flowKey
	if len(b) < 20 || b[0]>>4 != 4 {
		return k, false
	}
	ihl := int(b[0]&0x0f) * 4
	k.proto = b[9]
	copy(k.src[:], b[12:16])
	copy(k.dst[:], b[16:20])
	frag := binary.BigEndian.Uint16(b[6:8]) & 0x1fff
	if (k.proto == 6 || k.proto == 17) && frag == 0 && len(b) >= ihl+4 {
		k.sp = binary.BigEndian.Uint16(b[ihl:])
		k.dp = binary.BigEndian.Uint16(b[ihl+2:])
	}
	return k, true
}

// flows counts bytes per flow and bin; only the down lane's sender thread touches it.
type flows struct {
	binNs int64
	t0    int64
	bins  map[flowKey][]uint64
	order []flowKey
}

func (f *flows) add(p *lane.Packet, now int64) {
	k, ok := parseKey(p.Data)
	if !ok {
		return
	}
	i := int((now - f.t0) / f.binNs)
	b, seen := f.bins[k]
	if !seen {
		f.order = append(f.order, k)
	}
	for len(b) <= i {
		b = append(b, 0)
	}
	b[i] += uint64(len(p.Data))
	f.bins[k] = b
}

type flowOut struct {
	Flow  string   `json:"flow"`
	Proto string   `json:"proto"`
	Src   string   `json:"src"`
	Dst   string   `json:"dst"`
	Bytes uint64   `json:"bytes"`
	Bins  []uint64 `json:"bins"`
}

func main() {
	tunName := flag.String("tun", "qt0", "TUN device to attach to (created and routed by the caller)")
	downNet := flag.String("down-net", "", "CIDR of the client side: packets to it go down (server to client)")
	impair := lane.RegisterFlags()
	bin := flag.Duration("bin", 100*time.Millisecond, "bin width of the per-flow byte counts")
	flag.Parse()
	_, down4, err := net.ParseCIDR(*downNet)
	if err != nil || down4.IP.To4() == nil {
		fmt.Fprintln(os.Stderr, "quicsm-iprelay: -down-net must be an IPv4 CIDR, e.g. 198.18.3.0/24")
		os.Exit(2)
	}
	if *bin <= 0 {
		fmt.Fprintln(os.Stderr, "quicsm-iprelay: -bin must be positive")
		os.Exit(2)
	}
	dev, err := openTun(*tunName)
	if err != nil {
		fmt.Fprintln(os.Stderr, "quicsm-iprelay:", err)
		os.Exit(1)
	}

	pair := impair.Start("quicsm-iprelay")
	down, up := pair.Down, pair.Up
	fl := &flows{binNs: int64(*bin), t0: rt.Now(), bins: map[flowKey][]uint64{}}
	t0Wall := rt.Wall()
	down.OnSent = fl.add

	mask, netIP := down4.Mask, down4.IP.To4()
	var nonIP atomic.Uint64
	go func() {
		runtime.LockOSThread()
		buf := make([]byte, 65536)
		for {
			n, err := syscall.Read(dev.fd, buf)
			if err != nil {
				if err == syscall.EINTR {
					continue
				}
				return
			}
			now := rt.Now()
			if n < 20 || buf[0]>>4 != 4 {
				nonIP.Add(1) // IPv6 and others are not routed here; count and drop
				continue
			}
			p := &lane.Packet{Data: append([]byte(nil), buf[:n]...), Arrive: now, Out: dev}
			dst := buf[16:20]
			toClient := true
			for i := 0; i < 4; i++ {
				if dst[i]&mask[i] != netIP[i] {
					toClient = false
					break
				}
			}
			if toClient {
				down.Push(p)
			} else {
				up.Push(p)
			}
		}
	}()

	pair.Serve(map[string]any{"ready": true, "tun": *tunName, "down_net": down4.String()}, func() map[string]any {
		out := make([]flowOut, 0, len(fl.order))
		for _, k := range fl.order {
			var total uint64
			for _, v := range fl.bins[k] {
				total += v
			}
			out = append(out, flowOut{Flow: k.String(), Proto: k.protoName(),
				Src: fmt.Sprintf("%s:%d", net.IP(k.src[:]), k.sp), Dst: fmt.Sprintf("%s:%d", net.IP(k.dst[:]), k.dp),
				Bytes: total, Bins: fl.bins[k]})
		}
		return map[string]any{"non_ipv4": nonIP.Load(), "mode": "ip", "flows": out,
			"bin_ms": float64(*bin) / 1e6, "t0_unix_ns": t0Wall}
	})
}
