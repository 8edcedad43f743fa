package memstore

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/jobs"
)

var _ cluster.Store = (*Store)(nil)

// journal is the memory store's cluster.Journal, for nodes in one process, with the semantics
// of the Redis store's (the storetest suite checks both): records, leases and outboxes, by
// tenant and session. Leases run on the system clock, as the directory's do. It dies with its
// process, so the store is not Durable: a node on it sends its frames at once and journals
// nothing (broker/held.go), which keeps a single node's path free of the journal.
type journal struct {
	mu       sync.Mutex
	records  map[journalKey]*journalRecord
	outboxes map[outboxKey]*journalOutbox
	tenants  map[string]string // session id → tenant, for tenant-less takeovers
}

type journalKey struct{ tenant, id string }

type outboxKey struct{ tenant, id, slot string }

// journalRecord is one journaled session: its record, its slots, its lease and the text
// agent's state.
type journalRecord struct {
	record   []byte
	slots    []string
	holder   string // "" after a take-back of the parked session (TakeParked)
	leaseEnd int64  // epoch ms
	agent    []byte
	settled  [][]byte // the agent's settled calls
}

// journalOutbox is one slot's journaled outbox: frames in seq order, and the replacements of
// some of them.
type journalOutbox struct {
	frames   []cluster.JournaledFrame
	replaced map[int64][]byte
}

// errTaken is AppendFrames' answer to a frame whose seq the outbox holds with other bytes, or
// that would leave a gap.
var errTaken = errors.New("memstore: journal frames: the seqs do not follow the outbox's (another frame there, or a gap)")

// Durable implements cluster.Cluster: the memory store dies with its process.
func (s *Store) Durable() bool { return false }

// lockJournal returns the journal, locked (the caller unlocks it), unless ctx ended.
func (s *Store) lockJournal(ctx context.Context) (*journal, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	j := &s.jr
	j.mu.Lock()
	if j.records == nil {
		j.records = make(map[journalKey]*journalRecord)
		j.outboxes = make(map[outboxKey]*journalOutbox)
		j.tenants = make(map[string]string)
	}
	return j, nil
}

func nowMS() int64 { return time.Now().UnixMilli() }

// SaveSession implements cluster.Journal.
func (s *Store) SaveSession(ctx context.Context, node, tenant, id string, record []byte, slots []string, ttl time.Duration) error {
	j, err := s.lockJournal(ctx)
	if err != nil {
		return err
	}
	defer j.mu.Unlock()
	j.tenants[id] = tenant
	k := journalKey{tenant, id}
	r := j.records[k]
	if r == nil {
		r = &journalRecord{}
		j.records[k] = r
	} else if r.holder != "" && r.holder != node {
		return cluster.ErrLeaseLost
	}
	r.record, r.slots, r.holder = slices.Clone(record), slices.Clone(slots), node
	r.leaseEnd = nowMS() + ttl.Milliseconds()
	return nil
}

// AppendFrames implements cluster.Journal.
func (s *Store) AppendFrames(ctx context.Context, node, tenant, id string, w cluster.JournalWrite) error {
	j, err := s.lockJournal(ctx)
	if err != nil {
		return err
	}
	defer j.mu.Unlock()
	r := j.records[journalKey{tenant, id}]
	if r == nil || r.holder != node {
		return cluster.ErrLeaseLost
	}
	next := map[string]int64{} // each outbox's next seq (0: empty, any seq may start it)
	skip := make([]bool, len(w.Frames))
	for i, f := range w.Frames {
		if f.Replace {
			continue
		}
		ob := j.outboxes[outboxKey{tenant, id, f.Slot}]
		nx, ok := next[f.Slot]
		if !ok {
			nx = ob.next()
		}
		switch {
		case nx != 0 && f.Seq < nx:
			if d, ok := ob.at(f.Seq); !ok || !bytes.Equal(d, f.Data) {
				return errTaken // another frame there, or a later seq written first
			}
			skip[i] = true // written already
		case nx != 0 && f.Seq > nx:
			return errTaken // it would leave a gap
		default:
			nx = f.Seq + 1
		}
		next[f.Slot] = nx
	}
	for i, f := range w.Frames {
		ob := j.outbox(outboxKey{tenant, id, f.Slot})
		switch {
		case f.Replace:
			ob.replaced[f.Seq] = slices.Clone(f.Data)
		case !skip[i]:
			ob.add(f.Seq, f.Data, w.Max)
		}
	}
	if w.AgentState != nil {
		r.agent = slices.Clone(w.AgentState)
	}
	if w.AgentSettledReset {
		r.settled = nil
	}
	for _, b := range w.AgentSettled {
		r.settled = append(r.settled, slices.Clone(b))
	}
	return nil
}

// frameOut appends the frame a transition carries (jobs.FrameOut) to its slot's outbox, in the
// transition's own step (Apply calls it under the tenant's lock). A seq the outbox has passed
// loses the frame, never the transition, as in the Redis store.
func (s *Store) frameOut(tenant, id string, f *jobs.FrameOut) {
	j, _ := s.lockJournal(context.Background())
	defer j.mu.Unlock()
	ob := j.outbox(outboxKey{tenant, id, f.Slot})
	if n := ob.next(); n == 0 || f.Seq >= n {
		ob.add(f.Seq, f.Data, max(f.Max, 1))
	}
}

// RenewLeases implements cluster.Journal.
func (s *Store) RenewLeases(ctx context.Context, node, tenant string, ids []string, ttl time.Duration) ([]string, error) {
	j, err := s.lockJournal(ctx)
	if err != nil {
		return nil, err
	}
	defer j.mu.Unlock()
	var lost []string
	end := nowMS() + ttl.Milliseconds()
	for _, id := range ids {
		if r := j.records[journalKey{tenant, id}]; r != nil && r.holder == node {
			r.leaseEnd = end
		} else {
			lost = append(lost, id)
		}
	}
	return lost, nil
}

// TakeOver implements cluster.Journal.
func (s *Store) TakeOver(ctx context.Context, node, tenant, id string, ttl time.Duration) (*cluster.JournaledSession, error) {
	j, err := s.lockJournal(ctx)
	if err != nil {
		return nil, err
	}
	defer j.mu.Unlock()
	if tenant == "" {
		t, ok := j.tenants[id]
		if !ok {
			return nil, jobs.ErrNotFound
		}
		tenant = t
	}
	r := j.records[journalKey{tenant, id}]
	if r == nil {
		return nil, jobs.ErrNotFound
	}
	now := nowMS()
	if r.leaseEnd > now {
		return nil, cluster.ErrLeaseHeld
	}
	ended := r.leaseEnd
	r.holder, r.leaseEnd = node, now+ttl.Milliseconds()
	js := &cluster.JournaledSession{Tenant: tenant, SessionID: id, Record: slices.Clone(r.record),
		AgentState: slices.Clone(r.agent), AgentSettled: slices.Clone(r.settled), LeaseEndMS: ended, Outboxes: make(map[string][]cluster.JournaledFrame)}
	for _, sl := range r.slots {
		ob := j.outboxes[outboxKey{tenant, id, sl}]
		var out []cluster.JournaledFrame
		if ob != nil {
			for _, f := range ob.frames {
				d := f.Data
				if rep, ok := ob.replaced[f.Seq]; ok {
					d = rep
				}
				out = append(out, cluster.JournaledFrame{Seq: f.Seq, Data: slices.Clone(d)})
			}
		}
		js.Outboxes[sl] = out
	}
	return js, nil
}

// Orphaned implements cluster.Journal.
func (s *Store) Orphaned(ctx context.Context, tenant string, now time.Time) ([]string, error) {
	j, err := s.lockJournal(ctx)
	if err != nil {
		return nil, err
	}
	defer j.mu.Unlock()
	type orphan struct {
		id  string
		end int64
	}
	var out []orphan
	for k, r := range j.records {
		if k.tenant == tenant && r.leaseEnd <= now.UnixMilli() {
			out = append(out, orphan{k.id, r.leaseEnd})
		}
	}
	slices.SortFunc(out, func(a, b orphan) int { return cmp.Or(cmp.Compare(a.end, b.end), cmp.Compare(a.id, b.id)) })
	ids := make([]string, len(out))
	for i, o := range out {
		ids[i] = o.id
	}
	return ids, nil
}

// DropSession implements cluster.Journal.
func (s *Store) DropSession(ctx context.Context, node, tenant, id string) error {
	j, err := s.lockJournal(ctx)
	if err != nil {
		return err
	}
	defer j.mu.Unlock()
	k := journalKey{tenant, id}
	r := j.records[k]
	if r != nil {
		if node != "" && r.holder != "" && r.holder != node {
			return nil // another node's now
		}
		for _, sl := range r.slots {
			delete(j.outboxes, outboxKey{tenant, id, sl})
		}
		delete(j.records, k)
	}
	if j.tenants[id] == tenant {
		delete(j.tenants, id)
	}
	return nil
}

// unhold clears the holder of a journaled session that was parked and is taken back, so that
// the taker may journal it (TakeParked; take_parked.lua in the Redis store).
func (s *Store) unhold(tenant, id string) {
	j, _ := s.lockJournal(context.Background())
	defer j.mu.Unlock()
	if r := j.records[journalKey{tenant, id}]; r != nil {
		r.holder = ""
	}
}

// outbox returns the outbox under k, made if need be (j.mu held).
func (j *journal) outbox(k outboxKey) *journalOutbox {
	ob := j.outboxes[k]
	if ob == nil {
		ob = &journalOutbox{replaced: make(map[int64][]byte)}
		j.outboxes[k] = ob
	}
	return ob
}

// next is the seq after the outbox's newest frame, 0 when it is empty (or nil).
func (ob *journalOutbox) next() int64 {
	if ob == nil || len(ob.frames) == 0 {
		return 0
	}
	return ob.frames[len(ob.frames)-1].Seq + 1
}

// at returns the frame under seq, as first written.
func (ob *journalOutbox) at(seq int64) ([]byte, bool) {
	if ob == nil {
		return nil, false
	}
	i, ok := slices.BinarySearchFunc(ob.frames, seq, func(f cluster.JournaledFrame, seq int64) int { return cmp.Compare(f.Seq, seq) })
	if !ok {
		return nil, false
	}
	return ob.frames[i].Data, true
}

// add appends a frame and keeps the newest max (max <= 0: all).
func (ob *journalOutbox) add(seq int64, data []byte, max int) {
	ob.frames = append(ob.frames, cluster.JournaledFrame{Seq: seq, Data: slices.Clone(data)})
	if max > 0 && len(ob.frames) > max {
		drop := len(ob.frames) - max
		for _, f := range ob.frames[:drop] {
			delete(ob.replaced, f.Seq)
		}
		ob.frames = slices.Delete(ob.frames, 0, drop)
	}
}
