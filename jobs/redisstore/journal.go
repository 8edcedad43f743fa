package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/jobs"
)

var _ cluster.Store = (*Store)(nil)

// Durable implements cluster.Cluster: Redis outlives the nodes, so a node journals every frame
// before it is sent and another node takes its sessions over when it dies.
func (s *Store) Durable() bool { return true }

// journalTTL bounds how long a journal outlives the last write to it: a session whose nodes all
// died for good is found by the next node's sweep long before.
const journalTTL = 7 * 24 * time.Hour

// SaveSession implements cluster.Journal: the session's tenant is recorded for
// tenant-less lookups first (a takeover by resume token finds it even if this node dies right
// after the record is written), then lua/journal_save.lua writes the record.
func (s *Store) SaveSession(ctx context.Context, node, tenant, id string, record []byte, slots []string, ttl time.Duration) error {
	if err := s.rdb.Set(ctx, s.liveIndex(id), tenant, journalTTL).Err(); err != nil {
		return fmt.Errorf("redisstore: save session index: %w", err)
	}
	k := s.keysOf(tenant)
	cmd := append(evalCmd(journalSave, 2, 6), k.live(id), k.leases(),
		id, node, record, strings.Join(slots, ","), ttl.Milliseconds(), journalTTL.Milliseconds())
	v, err := s.batch.run(ctx, journalSave, cmd)
	if err != nil {
		return fmt.Errorf("redisstore: save session: %w", err)
	}
	if v == "lost" {
		return cluster.ErrLeaseLost
	}
	return nil
}

// AppendFrames implements cluster.Journal (lua/journal_frames.lua: XADD under the id
// SEQ-0, or HSET in the slot's hash of replacements, and HSET of the record's field a for the
// agent state, RPUSH of its settled calls, in one script behind the lease check; a frame already kept is skipped, so a
// retry of a write whose reply was lost is harmless).
func (s *Store) AppendFrames(ctx context.Context, node, tenant, id string, w cluster.JournalWrite) error {
	k := s.keysOf(tenant)
	cmd := evalCmd(journalFrames, 2+len(w.Frames), 6+len(w.AgentSettled)+3*len(w.Frames))
	cmd = append(cmd, k.live(id), k.settled(id))
	for _, f := range w.Frames {
		if f.Replace {
			cmd = append(cmd, k.replaced(id, f.Slot))
		} else {
			cmd = append(cmd, k.outbox(id, f.Slot))
		}
	}
	reset := ""
	if w.AgentSettledReset {
		reset = "r"
	}
	cmd = append(cmd, node, w.Max, journalTTL.Milliseconds(), w.AgentState, reset, len(w.AgentSettled))
	for _, b := range w.AgentSettled {
		cmd = append(cmd, b)
	}
	for _, f := range w.Frames {
		rep := ""
		if f.Replace {
			rep = "r"
		}
		cmd = append(cmd, f.Seq, f.Data, rep)
	}
	v, err := s.batch.run(ctx, journalFrames, cmd)
	if err != nil {
		return fmt.Errorf("redisstore: journal frames: %w", err)
	}
	switch v {
	case "lost":
		return cluster.ErrLeaseLost
	case "taken":
		return fmt.Errorf("redisstore: journal frames: the seqs do not follow the outbox's (another frame there, or a gap)")
	}
	return nil
}

// RenewLeases implements cluster.Journal (lua/journal_renew.lua, for a tenant's sessions in
// scripts of renewChunk sessions each, one after the other).
func (s *Store) RenewLeases(ctx context.Context, node, tenant string, ids []string, ttl time.Duration) ([]string, error) {
	var lost []string
	for len(ids) > 0 {
		n := min(len(ids), renewChunk)
		l, err := s.renewLeases(ctx, node, tenant, ids[:n], ttl)
		if err != nil {
			return nil, err
		}
		lost = append(lost, l...)
		ids = ids[n:]
	}
	return lost, nil
}

// renewChunk is how many sessions one renewal script renews. A script is atomic: one of a
// node's thousand sessions held Redis for 1–6 ms every third of the hold TTL, and every
// transition of every node waited behind it; scripts of 64 take a few tenths of a
// millisecond each, and other clients' commands run between them.
const renewChunk = 64

func (s *Store) renewLeases(ctx context.Context, node, tenant string, ids []string, ttl time.Duration) ([]string, error) {
	k := s.keysOf(tenant)
	ks := make([]string, 0, 2*len(ids)+1)
	ks = append(ks, k.leases())
	args := make([]any, 0, len(ids)+3)
	args = append(args, node, ttl.Milliseconds(), journalTTL.Milliseconds())
	for _, id := range ids {
		// The settled calls live as long as the record: a session whose agent settles nothing
		// for the journal's ttl must not lose them while its state stays.
		ks = append(ks, k.live(id), k.settled(id))
		args = append(args, id)
	}
	lost, err := journalRenew.Run(ctx, s.rdb, ks, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("redisstore: renew leases: %w", err)
	}
	return lost, nil
}

// TakeOver implements cluster.Journal: the lease is taken by lua/journal_take.lua, then the
// slots' outboxes are read.
func (s *Store) TakeOver(ctx context.Context, node, tenant, id string, ttl time.Duration) (*cluster.JournaledSession, error) {
	if tenant == "" {
		t, err := s.rdb.Get(ctx, s.liveIndex(id)).Result()
		if errors.Is(err, redis.Nil) {
			return nil, jobs.ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("redisstore: journaled session index: %w", err)
		}
		tenant = t
	}
	k := s.keysOf(tenant)
	v, err := journalTake.Run(ctx, s.rdb, []string{k.live(id), k.leases()}, id, node, ttl.Milliseconds()).Result()
	if errors.Is(err, redis.Nil) {
		return nil, jobs.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: take over a session: %w", err)
	}
	if v == "held" {
		return nil, cluster.ErrLeaseHeld
	}
	parts, ok := v.([]any)
	if !ok || len(parts) != 4 {
		return nil, fmt.Errorf("redisstore: take over a session: unexpected reply %v", v)
	}
	rec, _ := parts[0].(string)
	slotList, _ := parts[1].(string)
	endMS, _ := strconv.ParseInt(fmt.Sprint(parts[2]), 10, 64)
	js := &cluster.JournaledSession{Tenant: tenant, SessionID: id, Record: []byte(rec), LeaseEndMS: endMS,
		Outboxes: make(map[string][]cluster.JournaledFrame)}
	if a, _ := parts[3].(string); a != "" {
		js.AgentState = []byte(a)
	}
	var slots []string
	if slotList != "" {
		slots = strings.Split(slotList, ",")
	}
	streams := make([]*redis.XMessageSliceCmd, len(slots))
	reps := make([]*redis.MapStringStringCmd, len(slots))
	var settled *redis.StringSliceCmd
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		settled = p.LRange(ctx, k.settled(id), 0, -1)
		for i, sl := range slots {
			streams[i] = p.XRange(ctx, k.outbox(id, sl), "-", "+")
			reps[i] = p.HGetAll(ctx, k.replaced(id, sl))
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("redisstore: read a session's outboxes: %w", err)
	}
	for _, b := range settled.Val() {
		js.AgentSettled = append(js.AgentSettled, []byte(b))
	}
	for i, sl := range slots {
		rep := reps[i].Val()
		var out []cluster.JournaledFrame
		for _, m := range streams[i].Val() {
			seqStr, _, _ := strings.Cut(m.ID, "-")
			seq, err := strconv.ParseInt(seqStr, 10, 64)
			if err != nil {
				continue
			}
			data, _ := m.Values["d"].(string)
			if r, ok := rep[seqStr]; ok {
				data = r
			}
			out = append(out, cluster.JournaledFrame{Seq: seq, Data: []byte(data)})
		}
		js.Outboxes[sl] = out
	}
	return js, nil
}

// Orphaned implements cluster.Journal.
func (s *Store) Orphaned(ctx context.Context, tenant string, now time.Time) ([]string, error) {
	ids, err := s.rdb.ZRangeByScore(ctx, s.keysOf(tenant).leases(), &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(now.UnixMilli(), 10)}).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: orphaned sessions: %w", err)
	}
	return ids, nil
}

// DropSession implements cluster.Journal: the record, its lease, its outboxes and index.
func (s *Store) DropSession(ctx context.Context, node, tenant, id string) error {
	k := s.keysOf(tenant)
	v, err := s.rdb.HMGet(ctx, k.live(id), "s", "n").Result()
	if err != nil {
		return fmt.Errorf("redisstore: drop a session's journal: %w", err)
	}
	slotList, _ := v[0].(string)
	if holder, _ := v[1].(string); node != "" && holder != "" && holder != node {
		return nil // another node's now
	}
	del := []string{k.live(id), k.settled(id)}
	if slotList != "" {
		for _, sl := range strings.Split(slotList, ",") {
			del = append(del, k.outbox(id, sl), k.replaced(id, sl))
		}
	}
	if _, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, del...)
		p.ZRem(ctx, k.leases(), id)
		return nil
	}); err != nil {
		return fmt.Errorf("redisstore: drop a session's journal: %w", err)
	}
	if err := s.rdb.Del(ctx, s.liveIndex(id)).Err(); err != nil {
		return fmt.Errorf("redisstore: drop a session's journal index: %w", err)
	}
	return nil
}
