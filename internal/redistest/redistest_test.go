package redistest

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// TestStartRefusesAnotherServersPort: a server started on a port another redis-server holds
// (the port was taken between freePort and the bind) is found out — the server answering PING
// there is not the one started — instead of its test silently sharing the other's data; and
// Start's servers come from below the ephemeral range, where no port-0 listener lands.
func TestStartRefusesAnotherServersPort(t *testing.T) {
	first := Start(t, Options{})
	port, _ := strconv.Atoi(first.Addr[strings.LastIndex(first.Addr, ":")+1:])
	if low := ephemeralLow(); port >= low && low > 21000 {
		t.Errorf("Start chose port %d, in the ephemeral range (from %d)", port, low)
	}
	second := &Server{Addr: first.Addr, Dir: t.TempDir(), t: t}
	err := second.start()
	t.Cleanup(second.Kill)
	if !errors.Is(err, errPortTaken) {
		t.Fatalf("starting a second server on %s: %v, want errPortTaken", first.Addr, err)
	}
	if err := second.startOnFreePort(false); err != nil || second.Addr == first.Addr {
		t.Fatalf("startOnFreePort: %v on %s (the first is on %s)", err, second.Addr, first.Addr)
	}
}
