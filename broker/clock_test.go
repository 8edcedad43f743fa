package broker

import (
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/backchannel-io/backchannel/jobs/memstore"
)

// keepingClock is a Clock whose timers keep their function after they are stopped, as Go's
// own do until the moment they were due (the runtime's timer heap removes a stopped timer
// lazily).
type keepingClock struct {
	SystemClock
	kept []func()
}

func (k *keepingClock) AfterFunc(_ time.Duration, fn func()) Timer {
	k.kept = append(k.kept, fn)
	return keptTimer{}
}

type keptTimer struct{}

func (keptTimer) Stop() bool { return true }

// TestStoppedTimerLetsGo: a session's stopped timer keeps nothing of what its event would have
// used alive, even while the clock still holds the timer (TestSchemaCacheFreedWithSessions
// failed when a stopped resume window kept an ended session's compiled schemas for seconds).
func TestStoppedTimerLetsGo(t *testing.T) {
	kc := &keepingClock{}
	n := NewNode(Config{APIKeys: map[string]string{testKey: "tenant-t"}, Clock: kc}, memstore.New(nil))
	s := sessionOf(n, "sess_timer", "tenant-t", time.Now())
	w, timer := timerUsing(s)
	timer.Stop()
	for i := 0; i < 20 && w.Value() != nil; i++ {
		runtime.GC()
	}
	if w.Value() != nil {
		t.Error("a stopped timer keeps what its event uses alive")
	}
	runtime.KeepAlive(kc.kept)
}

// timerUsing starts a timer of s whose event uses a MiB of its own, and returns a weak
// pointer to that MiB.
func timerUsing(s *Session) (weak.Pointer[[1 << 20]byte], Timer) {
	big := new([1 << 20]byte)
	return weak.Make(big), s.after(time.Hour, func() { big[0]++ })
}
