package wiretest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backchannel-io/backchannel/internal/brokertest"
	"github.com/backchannel-io/backchannel/internal/redistest"
)

// TestReadyzStoreDown covers SPEC 16: /readyz reports store reachability and /healthz liveness.
// With the Redis store and its private redis-server stopped, /readyz answers 503 (an HTTP error
// body of SPEC 3.1) while /healthz stays 200; once the server is back on its port, /readyz is
// 200 again without a broker restart.
func TestReadyzStoreDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{}) // its own server: the test stops it
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = client.Close() }) // after the broker's shutdown (cleanups run last first)
	b := brokertest.Start(t, brokertest.Options{Store: "redis", Redis: client})

	ready := func() (int, []byte) {
		st, _, body := HTTPDo(t, "GET", b.URL+"/readyz", "", "", "")
		return st, body
	}
	if st, body := ready(); st != http.StatusOK {
		t.Fatalf("/readyz with Redis up: %d %s, want 200", st, body)
	}

	srv.Kill()
	st, body := ready()
	if st != http.StatusServiceUnavailable || strings.TrimSpace(string(body)) != `{"ready":false,"reason":"store unreachable"}` {
		t.Errorf("/readyz with Redis down: %d %s, want 503 {\"ready\":false,\"reason\":\"store unreachable\"} (SPEC 18: no internal error text)", st, body)
	}
	if st, _, body := HTTPDo(t, "GET", b.URL+"/healthz", "", "", ""); st != http.StatusOK {
		t.Errorf("/healthz with Redis down: %d %s, want 200 (liveness does not depend on the store)", st, body)
	}

	srv.Restart()
	deadline := time.Now().Add(DefaultTimeout)
	for {
		st, body := ready()
		if st == http.StatusOK {
			if m := decodeObject(t, "/readyz", body); m["status"] != "ready" {
				t.Errorf("/readyz after Redis came back: body %s", body)
			}
			break
		}
		if st != http.StatusServiceUnavailable {
			t.Fatalf("/readyz while Redis comes back: %d %s, want 503 or 200", st, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d %s %v after Redis came back", st, body, DefaultTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
