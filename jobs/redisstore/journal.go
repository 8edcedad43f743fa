package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backchannel-io/backchannel/jobs"
)

var _ jobs.SessionJournal = (*Store)(nil)

// journalTTL bounds how long a journal outlives the last write to it: a session whose nodes all
// died for good is found by the next node's sweep long before.
const journalTTL = 7 * 24 * time.Hour

// ttlEvery: an outbox's TTL is set with its first frame and renewed every ttlEvery frames.
const ttlEvery = 256

// SaveSession implements jobs.SessionJournal (lua/journal_save.lua), then records the session's
// tenant for tenant-less lookups.
func (s *Store) SaveSession(ctx context.Context, node, tenant, id string, record []byte, slots []string, ttl time.Duration) error {
	k := s.keysOf(tenant)
	args := []any{id, node, record, strings.Join(slots, ","), ttl.Milliseconds(), journalTTL.Milliseconds()}
	if _, err := s.batch.run(ctx, journalSave, []string{k.live(id), k.leases()}, args); err != nil {
		return fmt.Errorf("redisstore: save session: %w", err)
	}
	if err := s.rdb.Set(ctx, s.liveIndex(id), tenant, journalTTL).Err(); err != nil {
		return fmt.Errorf("redisstore: save session index: %w", err)
	}
	return nil
}

// AppendFrame implements jobs.SessionJournal: XADD under the id SEQ-0 (or, replacing, HSET in
// the slot's hash of replacements), plain commands pipelined with the other callers' requests.
func (s *Store) AppendFrame(ctx context.Context, tenant, id, slot string, seq int64, data []byte, replace bool, max int) error {
	k := s.keysOf(tenant)
	var cmds []redis.Cmder
	if replace {
		key := k.replaced(id, slot)
		cmds = []redis.Cmder{redis.NewIntCmd(ctx, "HSET", key, seq, data), redis.NewBoolCmd(ctx, "PEXPIRE", key, journalTTL.Milliseconds())}
	} else {
		key := k.outbox(id, slot)
		cmds = []redis.Cmder{redis.NewStringCmd(ctx, "XADD", key, "MAXLEN", "~", max, strconv.FormatInt(seq, 10)+"-0", "d", data)}
		if seq%ttlEvery == 1 { // the first frame, then now and then: the TTL is a backstop
			cmds = append(cmds, redis.NewBoolCmd(ctx, "PEXPIRE", key, journalTTL.Milliseconds()))
		}
	}
	if err := s.batch.do(ctx, cmds...); err != nil {
		return fmt.Errorf("redisstore: journal a frame: %w", err)
	}
	return nil
}

// SaveAgentState implements jobs.SessionJournal: HSET of the session's record field a, with
// the record's TTL (a write that comes after the session's drop leaves a key that expires).
func (s *Store) SaveAgentState(ctx context.Context, tenant, id string, state []byte) error {
	key := s.keysOf(tenant).live(id)
	if err := s.batch.do(ctx, redis.NewIntCmd(ctx, "HSET", key, "a", state), redis.NewBoolCmd(ctx, "PEXPIRE", key, journalTTL.Milliseconds())); err != nil {
		return fmt.Errorf("redisstore: journal a text agent's state: %w", err)
	}
	return nil
}

// RenewLeases implements jobs.SessionJournal (lua/journal_renew.lua, one script per tenant).
func (s *Store) RenewLeases(ctx context.Context, node, tenant string, ids []string, ttl time.Duration) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	k := s.keysOf(tenant)
	ks := make([]string, 0, len(ids)+1)
	ks = append(ks, k.leases())
	args := make([]any, 0, len(ids)+3)
	args = append(args, node, ttl.Milliseconds(), journalTTL.Milliseconds())
	for _, id := range ids {
		ks = append(ks, k.live(id))
		args = append(args, id)
	}
	lost, err := journalRenew.Run(ctx, s.rdb, ks, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("redisstore: renew leases: %w", err)
	}
	return lost, nil
}

// TakeOver implements jobs.SessionJournal: the lease is taken by lua/journal_take.lua, then the
// slots' outboxes are read.
func (s *Store) TakeOver(ctx context.Context, node, tenant, id string, ttl time.Duration) (*jobs.JournaledSession, error) {
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
		return nil, jobs.ErrLeaseHeld
	}
	parts, ok := v.([]any)
	if !ok || len(parts) != 4 {
		return nil, fmt.Errorf("redisstore: take over a session: unexpected reply %v", v)
	}
	rec, _ := parts[0].(string)
	slotList, _ := parts[1].(string)
	endMS, _ := strconv.ParseInt(fmt.Sprint(parts[2]), 10, 64)
	js := &jobs.JournaledSession{Tenant: tenant, SessionID: id, Record: []byte(rec), LeaseEndMS: endMS,
		Outboxes: make(map[string][]jobs.JournaledFrame)}
	if a, _ := parts[3].(string); a != "" {
		js.AgentState = []byte(a)
	}
	if slotList == "" {
		return js, nil
	}
	slots := strings.Split(slotList, ",")
	streams := make([]*redis.XMessageSliceCmd, len(slots))
	reps := make([]*redis.MapStringStringCmd, len(slots))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sl := range slots {
			streams[i] = p.XRange(ctx, k.outbox(id, sl), "-", "+")
			reps[i] = p.HGetAll(ctx, k.replaced(id, sl))
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("redisstore: read a session's outboxes: %w", err)
	}
	for i, sl := range slots {
		rep := reps[i].Val()
		var out []jobs.JournaledFrame
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
			out = append(out, jobs.JournaledFrame{Seq: seq, Data: []byte(data)})
		}
		js.Outboxes[sl] = out
	}
	return js, nil
}

// Orphaned implements jobs.SessionJournal.
func (s *Store) Orphaned(ctx context.Context, tenant string, now time.Time) ([]string, error) {
	ids, err := s.rdb.ZRangeByScore(ctx, s.keysOf(tenant).leases(), &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(now.UnixMilli(), 10)}).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: orphaned sessions: %w", err)
	}
	return ids, nil
}

// DropSession implements jobs.SessionJournal: the record, its lease, its outboxes and index.
func (s *Store) DropSession(ctx context.Context, tenant, id string) error {
	k := s.keysOf(tenant)
	slotList, err := s.rdb.HGet(ctx, k.live(id), "s").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("redisstore: drop a session's journal: %w", err)
	}
	del := []string{k.live(id)}
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
