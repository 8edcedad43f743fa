// Package redisstore is the production jobs.Store on Redis (github.com/redis/go-redis/v9).
//
// Every transition is one Lua script (lua/apply.lua) and so one round trip: the version check,
// the handle claim (SET NX) or burn, the job record, its deadline in the tenant's sorted set,
// the session and parent indexes, and the timeline entries are applied together or not at all.
// A connection lost mid-request leaves either the whole transition or nothing; the engine's
// retry of the same transition is recognised by its id. Scripts of concurrent callers are
// pipelined (batch.go). Due deadlines are claimed with lua/claim.lua, which hands each to
// exactly one caller for a lease.
//
// Layout, all keys of a tenant under the hash tag {t:TENANT} (SPEC 15):
//
//	PREFIX{t:T}:job:CALL_ID       hash: v (version), d (record JSON), a (arguments), dl (deadline ms), t (id of the last transition)
//	PREFIX{t:T}:handle:HANDLE     string: "L:CALL_ID" while its job is open, "B:CALL_ID" once burned
//	PREFIX{t:T}:deadlines         sorted set: call id (or "^CALL_ID", a cascade marker) by due ms
//	PREFIX{t:T}:open:SESSION_ID   set: call ids of the session's open jobs
//	PREFIX{t:T}:children:CALL_ID  set: call ids whose parent call is CALL_ID (kept while the parent is)
//	PREFIX{t:T}:timeline:SESSION  list: timeline entries (JSON), oldest first
//	PREFIX{t:T}:tlsize:SESSION    string: the sum of the sizes of the entries offered to the timeline (its cap; expires with it)
//	PREFIX{t:T}:parked:SESSION    string: a parked session (cluster.ParkedSession JSON; parked.go)
//	PREFIX{t:T}:parked            sorted set: parked session ids by the end of their resume window
//	PREFIXparked:SESSION          string: the tenant of a parked session (a resume token names none)
//	PREFIX{t:T}:live:SESSION      hash: a live session's journal record, slot ids, lease holder, text-agent state (journal.go)
//	PREFIX{t:T}:live              sorted set: journaled session ids by the end of their lease
//	PREFIX{t:T}:out:SESSION:SLOT  stream: a slot's outbox, entry ids SEQ-0
//	PREFIX{t:T}:rep:SESSION:SLOT  hash: seq -> the frame that took the place of that outbox entry
//	PREFIXlive:SESSION            string: the tenant of a journaled session
//	PREFIXholder:SESSION          string: the node holding a live session, with a TTL (directory.go)
//	PREFIXalive:NODE              string: "u" and the node's HTTP URL, while the node renews it (directory.go)
//	PREFIXnode:NODE               sharded pub/sub channel: the node's inbox (directory.go)
//	PREFIXended:SESSION           string: what the nodes remember of an ended session, with a TTL
//	PREFIXchanges                 sharded pub/sub channel: relayed job changes (relay.go)
//
// Terminal jobs, burned handles and timelines expire after the retention period.
package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backchannel-io/backchannel/jobs"
)

// Options configure a Store.
type Options struct {
	// Client is the Redis connection (a *redis.Client, *redis.ClusterClient or ring); required.
	// The Store does not close it.
	Client redis.UniversalClient
	// Prefix starts every key (default "bc:"); it must not contain '{' or '}'.
	Prefix string
	// Pipelines is how many pipelines may be in flight at once (default 4).
	Pipelines int
	// MaxBatch is the most scripts one pipeline carries (default 256).
	MaxBatch int
}

// Store is the Redis jobs.Store.
type Store struct {
	rdb    redis.UniversalClient
	prefix string
	batch  *batcher
	notice atomic.Pointer[notice] // noticeOf
}

// New returns a Store over opts.Client. Close stops its pipeline workers.
func New(opts Options) (*Store, error) {
	if opts.Client == nil {
		return nil, errors.New("redisstore: Options.Client is required")
	}
	if opts.Prefix == "" {
		opts.Prefix = "bc:"
	}
	if strings.ContainsAny(opts.Prefix, "{}") {
		return nil, fmt.Errorf("redisstore: prefix %q must not contain braces (they would break the {t:TENANT} hash tag)", opts.Prefix)
	}
	if opts.Pipelines <= 0 {
		opts.Pipelines = 4
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 256
	}
	return &Store{rdb: opts.Client, prefix: opts.Prefix, batch: newBatcher(opts.Client, opts.Pipelines, opts.MaxBatch)}, nil
}

// Close stops the pipeline workers and waits for them to send the pipelines in hand; requests
// still queued, and requests after it, fail with redis.ErrClosed. A second Close does nothing.
func (s *Store) Close() error {
	s.batch.close()
	return nil
}

// ValidTenant reports whether a tenant name is usable in a key: non-empty and without braces.
func ValidTenant(t string) bool { return t != "" && !strings.ContainsAny(t, "{}") }

// Apply implements jobs.Store.
func (s *Store) Apply(ctx context.Context, tr *jobs.Transition) error {
	if !ValidTenant(tr.Tenant) {
		return fmt.Errorf("redisstore: invalid tenant %q", tr.Tenant)
	}
	k := s.keysOf(tr.Tenant)
	jobKey := k.job(tr.CallID)
	handleKey, childrenKey, parentKey := jobKey, jobKey, jobKey
	expect := int64(-1)
	if tr.Check || tr.Job != nil {
		expect = tr.Expect
	}
	var blob, args []byte
	write, version, dl, idx := "0", int64(0), int64(0), ""
	cascadeAt := int64(0)
	if j := tr.Job; j != nil {
		if j.Version != tr.Expect+1 {
			return fmt.Errorf("redisstore: job %s written at version %d, want %d", tr.CallID, j.Version, tr.Expect+1)
		}
		b, err := json.Marshal(j)
		if err != nil {
			return fmt.Errorf("redisstore: encode job: %w", err)
		}
		write, blob, version = "1", b, j.Version
		if jobs.IsOpen(j.State) && j.DeadlineMS > 0 {
			dl = j.DeadlineMS
		}
		if tr.Created() {
			idx = "add"
			args = []byte("null")
			if len(j.Arguments) > 0 {
				args = j.Arguments
			}
		} else if tr.Terminated() {
			idx = "rem"
			if tr.Cascade {
				cascadeAt = tr.NowMS + tr.LeaseMS
			}
		}
		if j.ParentCallID != "" {
			childrenKey, parentKey = k.children(j.ParentCallID), k.job(j.ParentCallID)
		}
	}
	mode, hval, httl := "", "", int64(0)
	if h := tr.Handle; h != nil {
		handleKey = k.handle(h.Handle)
		mode, hval = "burn", "B:"+h.CallID
		if h.Claim {
			mode, hval = "claim", "L:"+h.CallID
		}
		httl = max(h.TTL.Milliseconds(), 1)
	}
	// Byte slices go to Redis as they are (no copy into a string).
	outboxKey, fseq, fdata, fmax := jobKey, "", []byte(nil), 0
	if f := tr.Frame; f != nil && len(f.Data) > 0 {
		outboxKey, fseq, fdata, fmax = k.outbox(tr.SessionID, f.Slot), strconv.FormatInt(f.Seq, 10), f.Data, max(f.Max, 1)
	}
	// The timeline cap (jobs.Transition.TimelineMax) is applied by the script, which alone
	// knows the timeline's size: it gets the entries whole, then cut ("" when nothing is cut), and
	// what it needs to write the notice when the transition takes the timeline past the cap.
	capArg, noticeArg := any("0"), any("")
	if tr.TimelineMax > 0 && len(tr.Entries) > 0 {
		n := s.noticeOf(tr.TimelineMax)
		capArg, noticeArg = n.max, n.tail
	}
	cmd := evalCmd(applyScript, 10, 20+2*len(tr.Entries))
	cmd = append(cmd, jobKey, k.deadlines(), handleKey, k.open(tr.SessionID), childrenKey, k.children(tr.CallID),
		k.timeline(tr.SessionID), parentKey, outboxKey, k.tlsize(tr.SessionID))
	cmd = append(cmd, tr.ID, expect, write, blob, args, version, dl, idx, tr.CallID, mode, hval, httl,
		max(tr.Retention.Milliseconds(), 1), cascadeAt, tr.ClearCascade, fseq, fdata, fmax, capArg, noticeArg)
	first := len(cmd)
	for _, e := range tr.Entries {
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("redisstore: encode timeline entry: %w", err)
		}
		cmd = append(cmd, b)
	}
	for i := range tr.Entries {
		cut := []byte(nil)
		if tr.TimelineMax > 0 {
			c, ok, err := jobs.CutEntry(cmd[first+i].([]byte))
			if err != nil {
				return fmt.Errorf("redisstore: %w", err)
			}
			if ok {
				cut = c
			}
		}
		cmd = append(cmd, cut)
	}
	val, err := s.batch.run(ctx, applyScript, cmd)
	if err != nil {
		return fmt.Errorf("redisstore: apply: %w", err)
	}
	reply, _ := val.([]any)
	if len(reply) == 0 {
		return fmt.Errorf("redisstore: apply: unexpected reply %v", val)
	}
	switch reply[0] {
	case "ok", "dup":
		if len(reply) != 3 {
			return fmt.Errorf("redisstore: apply: unexpected reply %v", val)
		}
		tr.Children = nil
		if ids, _ := reply[1].([]any); len(ids) > 0 {
			tr.Children = make([]string, len(ids))
			for i, id := range ids {
				tr.Children[i] = fmt.Sprint(id)
			}
		}
		ps, _ := reply[2].(string)
		tr.ParentState = jobs.State(ps)
		return nil
	case "conflict":
		v, _ := strconv.ParseInt(fmt.Sprint(reply[1]), 10, 64)
		return &jobs.ConflictError{CallID: tr.CallID, Version: v}
	case "handle":
		rec, _ := parseHandle(fmt.Sprint(reply[1]))
		return &jobs.HandleTakenError{Handle: tr.Handle.Handle, Record: rec}
	}
	return fmt.Errorf("redisstore: apply: unexpected reply %v", val)
}

// noticeOf returns the script arguments of a cap: the cap, and the JSON of
// jobs.TimelineNotice(AT, maxBytes) after its `{"at_ms":AT`, from which the script writes the
// notice with the time of the entry that passed the cap. Those of the last cap asked for are
// kept, boxed (a node has one cap): a transition allocates nothing for them.
func (s *Store) noticeOf(maxBytes int64) *notice {
	if n := s.notice.Load(); n != nil && n.bytes == maxBytes {
		return n
	}
	head := len(`{"at_ms":0`)
	n := &notice{bytes: maxBytes, max: maxBytes, tail: jobs.AppendTimelineNotice(nil, 0, maxBytes)[head:]}
	s.notice.Store(n)
	return n
}

// notice holds the script arguments of a timeline cap.
type notice struct {
	bytes int64
	max   any // bytes
	tail  any // []byte
}

func parseHandle(v string) (jobs.HandleRecord, bool) {
	kind, id, ok := strings.Cut(v, ":")
	if !ok {
		return jobs.HandleRecord{}, false
	}
	return jobs.HandleRecord{CallID: id, Burned: kind == "B"}, true
}

// Job implements jobs.Store.
func (s *Store) Job(ctx context.Context, tenant, callID string) (*jobs.Job, error) {
	vals, err := s.rdb.HMGet(ctx, s.keysOf(tenant).job(callID), "d", "a").Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: load job: %w", err)
	}
	d, ok := vals[0].(string)
	if !ok {
		return nil, jobs.ErrNotFound
	}
	a, _ := vals[1].(string)
	return decodeJob(d, a)
}

func decodeJob(d, a string) (*jobs.Job, error) {
	j := new(jobs.Job)
	if err := json.Unmarshal([]byte(d), j); err != nil {
		return nil, fmt.Errorf("redisstore: decode job: %w", err)
	}
	if a != "" && a != "null" {
		j.Arguments = json.RawMessage(a)
	}
	return j, nil
}

// Handle implements jobs.Store.
func (s *Store) Handle(ctx context.Context, tenant, h string) (jobs.HandleRecord, error) {
	v, err := s.rdb.Get(ctx, s.keysOf(tenant).handle(h)).Result()
	if errors.Is(err, redis.Nil) {
		return jobs.HandleRecord{}, jobs.ErrNotFound
	}
	if err != nil {
		return jobs.HandleRecord{}, fmt.Errorf("redisstore: load handle: %w", err)
	}
	rec, ok := parseHandle(v)
	if !ok {
		return jobs.HandleRecord{}, fmt.Errorf("redisstore: handle %q holds %q", h, v)
	}
	return rec, nil
}

// ClaimDue implements jobs.Store.
func (s *Store) ClaimDue(ctx context.Context, tenant string, now time.Time, lease time.Duration, limit int) ([]jobs.Due, error) {
	k := s.keysOf(tenant)
	nowMS := now.UnixMilli()
	val, err := claimScript.Run(ctx, s.rdb, []string{k.deadlines()}, nowMS, nowMS+lease.Milliseconds(), limit, k.jobPrefix()).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: claim: %w", err)
	}
	flat, _ := val.([]any)
	out := make([]jobs.Due, 0, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		a, _ := flat[i].(string)
		b, _ := flat[i+1].(string)
		if a == "^" {
			out = append(out, jobs.Due{Cascade: b})
			continue
		}
		j, err := decodeJob(a, b)
		if err != nil {
			return nil, err
		}
		out = append(out, jobs.Due{Job: j})
	}
	return out, nil
}

// DoneCascade implements jobs.Store.
func (s *Store) DoneCascade(ctx context.Context, tenant, callID string) error {
	k := s.keysOf(tenant)
	if err := s.rdb.ZRem(ctx, k.deadlines(), "^"+callID).Err(); err != nil {
		return fmt.Errorf("redisstore: clear cascade marker: %w", err)
	}
	return nil
}

// OpenJobs implements jobs.Store.
func (s *Store) OpenJobs(ctx context.Context, tenant, sessionID string) ([]string, error) {
	return s.members(ctx, s.keysOf(tenant).open(sessionID))
}

// Children implements jobs.Store.
func (s *Store) Children(ctx context.Context, tenant, callID string) ([]string, error) {
	return s.members(ctx, s.keysOf(tenant).children(callID))
}

func (s *Store) members(ctx context.Context, key string) ([]string, error) {
	ids, err := s.rdb.SMembers(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: list %s: %w", key, err)
	}
	slices.Sort(ids)
	return ids, nil
}

// Timeline implements jobs.Store.
func (s *Store) Timeline(ctx context.Context, tenant, sessionID string, from int) ([]jobs.Entry, error) {
	raw, err := s.rdb.LRange(ctx, s.keysOf(tenant).timeline(sessionID), int64(max(from, 0)), -1).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: timeline: %w", err)
	}
	out := make([]jobs.Entry, len(raw))
	for i, b := range raw {
		if err := json.Unmarshal([]byte(b), &out[i]); err != nil {
			return nil, fmt.Errorf("redisstore: decode timeline entry: %w", err)
		}
	}
	return out, nil
}

// Ping implements jobs.Store.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redisstore: ping: %w", err)
	}
	return nil
}
