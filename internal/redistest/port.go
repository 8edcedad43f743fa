package redistest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// Ports. A server's port must stay its own for the whole test, also while the server is
// down between Kill and Restart. A port the kernel hands out for port 0 is in the ephemeral
// range, which every test process on the machine draws from (listeners on port 0, the local
// end of each outgoing connection): another test's listener or a second redistest server
// could take it while the first is down, or between freePort and redis-server's bind — and a
// client of the first would then talk to a Redis that is not its test's. So the servers'
// ports come from below the ephemeral range, where the kernel never picks one by itself, at
// random, each checked free; start checks that the server answering is the one it started
// (ours) and tries another port when the port was taken meanwhile.

// freePort returns a port no listener holds now, below the ephemeral range when it can.
func freePort() (int, error) {
	lo, hi := 20000, ephemeralLow()
	if hi-lo < 1000 {
		return kernelPort()
	}
	for range 100 {
		p := lo + rand.IntN(hi-lo)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		_ = l.Close()
		return p, nil
	}
	return kernelPort()
}

// kernelPort is a port the kernel picks (in the ephemeral range): the fallback when there is
// no room below it.
func kernelPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's default 32768 when
// it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}
