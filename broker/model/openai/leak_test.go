package openai

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/broker/model/openai/sim"
)

// Every way a model ends leaves no goroutine, timer or connection behind: Close during the
// first dial (its context ends), Close while a redial hangs in the handshake, and giving up
// without Close. (TestMain checks the whole package once more at the end.)

// blackHole accepts TCP connections and never answers: a WebSocket dial to it hangs in the
// handshake until its context ends.
type blackHole struct {
	ln       net.Listener
	accepted chan struct{} // gets a value per connection accepted
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

func newBlackHole(t *testing.T) *blackHole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackHole{ln: ln, accepted: make(chan struct{}, 16)}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns = append(b.conns, c)
			b.mu.Unlock()
			select {
			case b.accepted <- struct{}{}:
			default:
			}
		}
	}()
	return b
}

// waitAccepted waits for a connection.
func (b *blackHole) waitAccepted(t *testing.T) {
	t.Helper()
	select {
	case <-b.accepted:
	case <-time.After(waitFor):
		t.Fatal("nothing dialled the black hole")
	}
}

func (b *blackHole) close() {
	_ = b.ln.Close()
	b.wg.Wait()
	b.mu.Lock()
	for _, c := range b.conns {
		_ = c.Close()
	}
	b.mu.Unlock()
}

// TestCloseDuringFirstDial: the factory's context ending while the first dial hangs in the
// handshake ends the dial at once, with nothing left running.
func TestCloseDuringFirstDial(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	hole := newBlackHole(t)
	tr := &http.Transport{}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := New(Options{URL: "ws://" + hole.ln.Addr().String() + "/v1/realtime", HTTPClient: &http.Client{Transport: tr}})(ctx, model.Config{}, newRecorder())
		errc <- err
	}()
	hole.waitAccepted(t)
	cancel()
	select {
	case err := <-errc:
		if err == nil || !errors.Is(err, context.Canceled) {
			t.Errorf("dial: %v, want it cancelled", err)
		}
	case <-time.After(time.Second):
		t.Fatal("the dial did not end with its context")
	}
	hole.close()
	tr.CloseIdleConnections()
	goleak.VerifyNone(t, ignore)
}

// TestCloseDuringRedial: Close while a redial hangs in the handshake returns at once; the
// dial, the backoff and the old connection's goroutines all end.
func TestCloseDuringRedial(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	srv := sim.New(sim.Options{APIKey: testKey})
	defer srv.Close()
	hole := newBlackHole(t)
	defer hole.close()
	simAddr := strings.TrimPrefix(strings.TrimSuffix(srv.URL(), "/v1/realtime"), "ws://")
	var dials atomic.Int32
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		addr := simAddr
		if dials.Add(1) > 1 {
			addr = hole.ln.Addr().String() // every redial hangs
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	rec := newRecorder()
	m, err := Dial(context.Background(), Options{URL: srv.URL(), APIKey: testKey, HTTPClient: &http.Client{Transport: tr}}, model.Config{}, rec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancelWait := context.WithTimeout(context.Background(), waitFor)
	defer cancelWait()
	sess, err := srv.Session(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	sess.Drop()
	rec.wait(t, "the drop", isLost)
	hole.waitAccepted(t)
	begin := time.Now()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begin); d > time.Second {
		t.Errorf("Close took %v while a redial hung", d)
	}
	n := len(rec.all())
	srv.Close()
	hole.close()
	tr.CloseIdleConnections()
	goleak.VerifyNone(t, ignore)
	if got := len(rec.all()); got != n {
		t.Errorf("%d events after Close", got-n)
	}
}

// TestGiveUpLeavesNothingRunning: a model that gave up reconnecting has stopped every
// goroutine and timer of its own, before and without Close.
func TestGiveUpLeavesNothingRunning(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	h := start(t, setup{opts: Options{ReconnectTimeout: 300 * time.Millisecond, ReconnectInterval: 20 * time.Millisecond}})
	h.m.SetTools([]model.Tool{lookupTool})
	h.m.SetContext(model.ContextItem{ID: "open_jobs", Text: "Open jobs:"})
	h.srv.Close()
	h.rec.wait(t, "giving up", func(e ev) bool {
		return e.kind == "error" && strings.Contains(e.err.Error(), "could not be re-established")
	})
	select {
	case <-h.m.done:
	case <-time.After(waitFor):
		t.Fatal("the model's goroutine still runs after giving up")
	}
	goleak.VerifyNone(t, ignore)
}
