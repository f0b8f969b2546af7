package rt

import (
	"net"
	"syscall"
)

// BigBuffers sets 8 MiB socket buffers, forcing past rmem_max/wmem_max when running as root,
// so bursts at 100 Mbit/s are queued by the emulator and not dropped by the kernel.
func BigBuffers(c *net.UDPConn) {
	const size = 8 << 20
	_ = c.SetReadBuffer(size)
	_ = c.SetWriteBuffer(size)
	raw, err := c.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, size)
		_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUFFORCE, size)
	})
}
