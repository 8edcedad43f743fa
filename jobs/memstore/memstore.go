// Package memstore is the embedded, in-process jobs.Store and cluster.Cluster (for the nodes of
// one process): the default of `backchannel serve`. It applies each transition under its tenant's lock with exactly the semantics of the Redis
// store (the jobs/storetest suite runs against both), and keeps copies, never the caller's
// values. Terminal jobs, burned handles and timelines expire after the transition's retention.
package memstore

import (
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/backchannel-io/backchannel/jobs"
)

// cascadePrefix marks a cascade marker among the deadline entries (call ids never start with it).
const cascadePrefix = "^"

// Store is the in-memory jobs.Store. The zero value is not usable; call New.
type Store struct {
	clock jobs.Clock

	mu      sync.Mutex
	tenants map[string]*space
	parked  map[string]parked // by session id (parked.go)
	relay   relay             // relay.go
	dir     directory         // directory.go
	jr      journal           // journal.go
}

// New returns an empty store. clock (nil: the system clock) decides when retained records expire.
func New(clock jobs.Clock) *Store {
	if clock == nil {
		clock = jobs.SystemClock{}
	}
	return &Store{clock: clock, tenants: make(map[string]*space), parked: make(map[string]parked)}
}

type space struct {
	mu        sync.Mutex
	jobs      map[string]*record
	handles   map[string]handle
	deadlines map[string]int64 // member → due time (ms)
	due       dueHeap          // the same entries in order; stale ones are skipped
	open      map[string]map[string]struct{}
	children  map[string]map[string]struct{}
	timelines map[string]*timeline
	expiry    dueHeap // member is "j:CALLID", "h:HANDLE" or "t:SESSION"
}

type record struct {
	job     *jobs.Job // a private copy, without arguments
	args    []byte
	version int64
	txn     string // the last transition applied to the job
	expires int64  // 0: never
}

type handle struct {
	rec     jobs.HandleRecord
	expires int64
}

type timeline struct {
	entries [][]byte
	// offered is the sum of the encoded sizes of the entries offered whole (the timeline cap of
	// jobs.Transition.TimelineMax; the notice is not counted).
	offered int64
	expires int64
}

func (s *Store) space(name string) *space {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenants[name]
	if t == nil {
		t = &space{
			jobs: make(map[string]*record), handles: make(map[string]handle),
			deadlines: make(map[string]int64), open: make(map[string]map[string]struct{}),
			children: make(map[string]map[string]struct{}), timelines: make(map[string]*timeline),
		}
		s.tenants[name] = t
	}
	return t
}

func (s *Store) now() int64 { return s.clock.Now().UnixMilli() }

// Apply implements jobs.Store.
func (s *Store) Apply(ctx context.Context, tr *jobs.Transition) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var copied *jobs.Job
	if tr.Job != nil {
		if tr.Job.Version != tr.Expect+1 {
			return fmt.Errorf("memstore: job %s written at version %d, want %d", tr.CallID, tr.Job.Version, tr.Expect+1)
		}
		bare := *tr.Job
		bare.Arguments = nil // kept apart, once, in the record
		copied = bare.Clone()
	}
	entries := make([][]byte, len(tr.Entries))
	offered, long := int64(0), false
	for i, e := range tr.Entries {
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("memstore: encode timeline entry: %w", err)
		}
		entries[i] = b
		offered += int64(len(b))
		long = long || len(b) > jobs.CutBytes
	}
	now := s.now()
	t := s.space(tr.Tenant)
	// The entries past the timeline's cap are stored cut (jobs.Transition.TimelineMax). Cutting
	// a long entry takes time: it is done before taking the lock when the timeline looks like it
	// passes its cap, and under the lock only if another writer took it there in between.
	var cuts [][]byte
	passes := func() bool { return tr.TimelineMax > 0 && t.offered(tr.SessionID)+offered > tr.TimelineMax }
	if long && tr.TimelineMax > 0 {
		t.mu.Lock()
		early := passes()
		t.mu.Unlock()
		if early {
			var err error
			if cuts, err = cutAll(entries); err != nil {
				return err
			}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire(now)
	if cuts == nil && passes() {
		var err error
		if cuts, err = cutAll(entries); err != nil {
			return err
		}
	}

	rec := t.jobs[tr.CallID]
	if tr.Check || tr.Job != nil {
		var v int64
		if rec != nil {
			v = rec.version
		}
		if v != tr.Expect {
			if rec != nil && rec.txn == tr.ID {
				t.report(tr) // a retry of a transition that was applied
				return nil
			}
			return &jobs.ConflictError{CallID: tr.CallID, Version: v}
		}
	}
	retention := tr.Retention.Milliseconds()
	if h := tr.Handle; h != nil {
		if h.Claim {
			if cur, ok := t.handles[h.Handle]; ok {
				return &jobs.HandleTakenError{Handle: h.Handle, Record: cur.rec}
			}
		}
		exp := now + h.TTL.Milliseconds()
		t.handles[h.Handle] = handle{rec: jobs.HandleRecord{CallID: h.CallID, Burned: !h.Claim}, expires: exp}
		heap.Push(&t.expiry, dueItem{at: exp, member: "h:" + h.Handle})
	}
	if j := tr.Job; j != nil {
		if rec == nil {
			rec = &record{}
			t.jobs[tr.CallID] = rec
		}
		rec.job, rec.version = copied, j.Version
		if tr.Created() {
			rec.args = slices.Clone(j.Arguments)
		}
		rec.txn = tr.ID
		if jobs.IsOpen(j.State) && j.DeadlineMS > 0 {
			t.setDeadline(tr.CallID, j.DeadlineMS)
		} else {
			delete(t.deadlines, tr.CallID)
		}
		if tr.Created() {
			add(t.open, j.SessionID, tr.CallID)
			if j.ParentCallID != "" {
				add(t.children, j.ParentCallID, tr.CallID)
			}
		}
		if tr.Terminated() {
			remove(t.open, j.SessionID, tr.CallID)
			if tr.Cascade && len(t.children[tr.CallID]) > 0 {
				t.setDeadline(cascadePrefix+tr.CallID, tr.NowMS+tr.LeaseMS)
			}
			rec.expires = now + retention
			heap.Push(&t.expiry, dueItem{at: rec.expires, member: "j:" + tr.CallID})
		}
		t.report(tr)
	}
	if tr.ClearCascade != "" {
		delete(t.deadlines, cascadePrefix+tr.ClearCascade)
	}
	if len(entries) > 0 {
		// The retention of a timeline runs from its creation and is renewed whenever a job ends.
		tl := t.timelines[tr.SessionID]
		if tl == nil || tr.Terminated() {
			if tl == nil {
				tl = &timeline{}
				t.timelines[tr.SessionID] = tl
			}
			tl.expires = now + retention
			heap.Push(&t.expiry, dueItem{at: tl.expires, member: "t:" + tr.SessionID})
		}
		// The cap: whole while the sum offered stays within it; past it cut, the first cut
		// entry after the notice.
		limit := tr.TimelineMax
		for i, b := range entries {
			was := tl.offered
			tl.offered += int64(len(b))
			if limit <= 0 || tl.offered <= limit {
				tl.entries = append(tl.entries, b)
				continue
			}
			if was <= limit {
				tl.entries = append(tl.entries, jobs.AppendTimelineNotice(nil, tr.Entries[i].AtMS, limit))
			}
			if cuts[i] != nil {
				b = cuts[i]
			}
			tl.entries = append(tl.entries, b)
		}
	}
	if f := tr.Frame; f != nil && len(f.Data) > 0 {
		s.frameOut(tr.Tenant, tr.SessionID, f) // the frame the transition produces (SPEC 15)
	}
	return nil
}

// offered returns the sum of the sizes offered to a session's timeline so far (t.mu held).
func (t *space) offered(sessionID string) int64 {
	if tl := t.timelines[sessionID]; tl != nil {
		return tl.offered
	}
	return 0
}

// cutAll returns the cut form of each encoded entry (jobs.CutEntry), nil for one with nothing
// to cut.
func cutAll(entries [][]byte) ([][]byte, error) {
	cuts := make([][]byte, len(entries))
	for i, b := range entries {
		c, ok, err := jobs.CutEntry(b)
		if err != nil {
			return nil, fmt.Errorf("memstore: %w", err)
		}
		if ok {
			cuts[i] = c
		}
	}
	return cuts, nil
}

// report fills in what Apply tells the engine about an applied job-writing transition: the
// children of a job that ended with a cascade, the state of a new job's parent.
func (t *space) report(tr *jobs.Transition) {
	j := tr.Job
	if j == nil {
		return
	}
	if tr.Cascade && tr.Terminated() {
		tr.Children = sortedKeys(t.children[tr.CallID])
	}
	if tr.Created() && j.ParentCallID != "" {
		tr.ParentState = ""
		if p := t.jobs[j.ParentCallID]; p != nil {
			tr.ParentState = p.job.State
		}
	}
}

func sortedKeys(set map[string]struct{}) []string {
	if len(set) == 0 {
		return nil
	}
	out := make([]string, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func (t *space) setDeadline(member string, at int64) {
	t.deadlines[member] = at
	heap.Push(&t.due, dueItem{at: at, member: member})
}

func add(m map[string]map[string]struct{}, k, v string) {
	if m[k] == nil {
		m[k] = make(map[string]struct{})
	}
	m[k][v] = struct{}{}
}

func remove(m map[string]map[string]struct{}, k, v string) {
	delete(m[k], v)
	if len(m[k]) == 0 {
		delete(m, k)
	}
}

// expire drops retained records whose time has come.
func (t *space) expire(now int64) {
	for t.expiry.Len() > 0 && t.expiry[0].at <= now {
		it := heap.Pop(&t.expiry).(dueItem)
		kind, key, _ := strings.Cut(it.member, ":")
		switch kind {
		case "j":
			if r := t.jobs[key]; r != nil && r.expires != 0 && r.expires <= now {
				delete(t.jobs, key)
				delete(t.children, key)
			}
		case "h":
			if h, ok := t.handles[key]; ok && h.expires <= now {
				delete(t.handles, key)
			}
		case "t":
			if tl := t.timelines[key]; tl != nil && tl.expires <= now {
				delete(t.timelines, key)
			}
		}
	}
}

// Job implements jobs.Store.
func (s *Store) Job(ctx context.Context, tenant, callID string) (*jobs.Job, error) {
	t := s.space(tenant)
	t.mu.Lock()
	t.expire(s.now())
	var snap record
	rec := t.jobs[callID]
	if rec != nil {
		snap = record{job: rec.job, args: rec.args}
	}
	t.mu.Unlock()
	if rec == nil {
		return nil, jobs.ErrNotFound
	}
	return snap.copy(), nil
}

// copy returns a copy of the record's job with its arguments. A stored job and arguments are
// never modified (Apply replaces them), so a snapshot of the two pointers taken under the lock
// can be copied outside it.
func (r *record) copy() *jobs.Job {
	j := r.job.Clone()
	j.Arguments = slices.Clone(r.args)
	return j
}

// Handle implements jobs.Store.
func (s *Store) Handle(ctx context.Context, tenant, h string) (jobs.HandleRecord, error) {
	t := s.space(tenant)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire(s.now())
	cur, ok := t.handles[h]
	if !ok {
		return jobs.HandleRecord{}, jobs.ErrNotFound
	}
	return cur.rec, nil
}

// ClaimDue implements jobs.Store.
func (s *Store) ClaimDue(ctx context.Context, tenant string, now time.Time, lease time.Duration, limit int) ([]jobs.Due, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	nowMS := now.UnixMilli()
	t := s.space(tenant)
	t.mu.Lock()
	type claimed struct {
		rec     *record
		cascade string
	}
	var got []claimed
	for t.due.Len() > 0 && t.due[0].at <= nowMS && len(got) < limit {
		it := heap.Pop(&t.due).(dueItem)
		if at, ok := t.deadlines[it.member]; !ok || at != it.at {
			continue // stale: the entry moved or went
		}
		if id, ok := strings.CutPrefix(it.member, cascadePrefix); ok {
			t.setDeadline(it.member, nowMS+lease.Milliseconds())
			got = append(got, claimed{cascade: id})
			continue
		}
		rec := t.jobs[it.member]
		if rec == nil {
			delete(t.deadlines, it.member)
			continue
		}
		t.setDeadline(it.member, nowMS+lease.Milliseconds())
		got = append(got, claimed{rec: &record{job: rec.job, args: rec.args}})
	}
	t.mu.Unlock()
	out := make([]jobs.Due, 0, len(got))
	for _, c := range got {
		if c.cascade != "" {
			out = append(out, jobs.Due{Cascade: c.cascade})
			continue
		}
		out = append(out, jobs.Due{Job: c.rec.copy()})
	}
	return out, nil
}

// DoneCascade implements jobs.Store.
func (s *Store) DoneCascade(ctx context.Context, tenant, callID string) error {
	t := s.space(tenant)
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.deadlines, cascadePrefix+callID)
	return nil
}

// OpenJobs implements jobs.Store.
func (s *Store) OpenJobs(ctx context.Context, tenant, sessionID string) ([]string, error) {
	return s.members(tenant, func(t *space) map[string]struct{} { return t.open[sessionID] }), nil
}

// Children implements jobs.Store.
func (s *Store) Children(ctx context.Context, tenant, callID string) ([]string, error) {
	return s.members(tenant, func(t *space) map[string]struct{} { return t.children[callID] }), nil
}

func (s *Store) members(name string, set func(*space) map[string]struct{}) []string {
	t := s.space(name)
	t.mu.Lock()
	defer t.mu.Unlock()
	out := sortedKeys(set(t))
	if out == nil {
		out = []string{}
	}
	return out
}

// Timeline implements jobs.Store.
func (s *Store) Timeline(ctx context.Context, tenant, sessionID string, from int) ([]jobs.Entry, error) {
	t := s.space(tenant)
	t.mu.Lock()
	t.expire(s.now())
	var raw [][]byte
	if tl := t.timelines[sessionID]; tl != nil && from < len(tl.entries) {
		raw = slices.Clone(tl.entries[max(from, 0):])
	}
	t.mu.Unlock()
	out := make([]jobs.Entry, len(raw))
	for i, b := range raw {
		if err := json.Unmarshal(b, &out[i]); err != nil {
			return nil, fmt.Errorf("memstore: decode timeline entry: %w", err)
		}
	}
	return out, nil
}

// Ping implements jobs.Store: the memory store is always reachable.
func (s *Store) Ping(ctx context.Context) error { return ctx.Err() }

// dueItem is one timed entry of a heap.
type dueItem struct {
	at     int64
	member string
}

// dueHeap is a min-heap by time.
type dueHeap []dueItem

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueItem)) }
func (h *dueHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
