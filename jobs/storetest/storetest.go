// Package storetest is the conformance suite every jobs.Store must pass, and the benchmarks run
// against every store. The memory and Redis stores call Run and the Benchmark functions from
// their own tests, so both are held to exactly the same behaviour: the store-level contract of
// Apply, ClaimDue and the indexes, and the whole job lifecycle of SPEC 5–7, 9, 11 and 12 driven
// through a jobs.Engine with a fake clock, to the millisecond, including the races.
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/jobs"
)

// Factory returns a new, empty store for one test. clock is the time the store must use for
// expiry where it keeps its own time (the memory store); a store that has its own clock (Redis)
// ignores it. Each call must return a store that shares nothing with earlier ones.
type Factory func(t testing.TB, clock jobs.Clock) jobs.Store

// Run runs the whole suite against the stores newStore makes.
func Run(t *testing.T, newStore Factory) {
	t.Run("Store", func(t *testing.T) { runStore(t, newStore) })
	t.Run("Engine", func(t *testing.T) { runEngine(t, newStore) })
	t.Run("Races", func(t *testing.T) { runRaces(t, newStore) })
	t.Run("Parking", func(t *testing.T) { runParking(t, newStore) })
	t.Run("Relay", func(t *testing.T) { runRelay(t, newStore) })
	t.Run("Directory", func(t *testing.T) { runDirectory(t, newStore) })
	t.Run("TimelineCap", func(t *testing.T) { runTimelineCap(t, newStore) })
}

// epoch is where every fake clock starts: a fixed instant, so deadlines are exact numbers.
var epoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

const (
	tenantA = "acme"
	tenantB = "globex"
)

// fixture is one engine over one store with a fake clock, recording every change it reports.
type fixture struct {
	t      testing.TB
	ctx    context.Context
	clock  *jobs.FakeClock
	store  jobs.Store
	engine *jobs.Engine

	mu      sync.Mutex
	changes []jobs.Change
}

func newFixture(t testing.TB, newStore Factory) *fixture {
	clock := jobs.NewFakeClock(epoch)
	f := &fixture{t: t, ctx: context.Background(), clock: clock}
	f.store = newStore(t, clock)
	f.engine = f.newEngine()
	return f
}

// newEngine returns another engine (a second "node") over the fixture's store and clock.
func (f *fixture) newEngine() *jobs.Engine {
	return jobs.NewEngine(f.store, jobs.Options{
		Clock:      f.clock,
		Tenants:    []string{tenantA, tenantB},
		StoreRetry: 5 * time.Second,
		OnChange: func(c jobs.Change) {
			f.mu.Lock()
			f.changes = append(f.changes, c)
			f.mu.Unlock()
		},
	})
}

// events returns the changes reported for callID, in order.
func (f *fixture) events(callID string) []jobs.Change {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []jobs.Change
	for _, c := range f.changes {
		if c.Job != nil && c.Job.CallID == callID {
			out = append(out, c)
		}
	}
	return out
}

func (f *fixture) eventKinds(callID string) []jobs.Event {
	var out []jobs.Event
	for _, c := range f.events(callID) {
		out = append(out, c.Event)
	}
	return out
}

var sessionSeq struct {
	sync.Mutex
	n int
}

// session returns a fresh session id.
func session() string {
	sessionSeq.Lock()
	defer sessionSeq.Unlock()
	sessionSeq.n++
	return fmt.Sprintf("sess_%d_%d", time.Now().UnixNano(), sessionSeq.n)
}

// tools used by the tests.
var (
	instantTool  = jobs.Tool{Name: "lookup", Timeout: 10 * time.Second}
	deferredTool = jobs.Tool{Name: "render", Timeout: 10 * time.Second, Deferred: true, DeferredTimeout: time.Hour, NotifyOnComplete: true}
	permitTool   = jobs.Tool{Name: "buy", Timeout: 10 * time.Second, RequiresPermission: true}
)

// call creates a job in session sess.
func (f *fixture) call(sess string, tool jobs.Tool) *jobs.Job {
	f.t.Helper()
	j, err := f.engine.Call(f.ctx, jobs.NewCall{Tenant: tenantA, SessionID: sess, Slot: "slot-1", Tool: tool,
		Arguments: json.RawMessage(`{"x":1}`)})
	if err != nil {
		f.t.Fatalf("Call: %v", err)
	}
	return j
}

// addr addresses a job by call id from its own session.
func addr(j *jobs.Job) jobs.Addr {
	return jobs.Addr{Tenant: j.Tenant, SessionID: j.SessionID, CallID: j.CallID}
}

// byHandle addresses a job by handle from session sess.
func byHandle(sess, h string) jobs.Addr {
	return jobs.Addr{Tenant: tenantA, SessionID: sess, Handle: h}
}

// load reads a job straight from the store.
func (f *fixture) load(callID string) *jobs.Job {
	f.t.Helper()
	j, err := f.store.Job(f.ctx, tenantA, callID)
	if err != nil {
		f.t.Fatalf("store.Job(%s): %v", callID, err)
	}
	return j
}

// tick runs the engine's scheduler at the fake clock's time.
func (f *fixture) tick() int {
	f.t.Helper()
	n, err := f.engine.Tick(f.ctx, f.clock.Now())
	if err != nil {
		f.t.Fatalf("Tick: %v", err)
	}
	return n
}

// at moves the fake clock to epoch+d.
func (f *fixture) at(d time.Duration) { f.clock.Set(epoch.Add(d)) }

// timeline returns the session's timeline.
func (f *fixture) timeline(sess string) []jobs.Entry {
	f.t.Helper()
	es, err := f.store.Timeline(f.ctx, tenantA, sess, 0)
	if err != nil {
		f.t.Fatalf("Timeline: %v", err)
	}
	return es
}

// kinds returns the kinds of the entries about callID.
func kinds(entries []jobs.Entry, callID string) []string {
	var out []string
	for _, e := range entries {
		if e.CallID == callID {
			out = append(out, e.Kind)
		}
	}
	return out
}

func count(entries []jobs.Entry, callID, kind string) int {
	n := 0
	for _, e := range entries {
		if e.CallID == callID && e.Kind == kind {
			n++
		}
	}
	return n
}

func wantState(t testing.TB, j *jobs.Job, want jobs.State) {
	t.Helper()
	if j.State != want {
		t.Fatalf("job %s: state %s, want %s", j.CallID, j.State, want)
	}
}

func wantKinds(t testing.TB, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("timeline kinds %v, want %v", got, want)
	}
}

// ms is epoch+d in epoch milliseconds.
func ms(d time.Duration) int64 { return epoch.Add(d).UnixMilli() }
