package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/jobs"
)

var _ cluster.Parking = (*Store)(nil)

// ParkSession implements cluster.Parking: the session's JSON and its place in the tenant's
// sorted set of parked sessions (one MULTI on the tenant's slot), then the index naming its
// tenant.
func (s *Store) ParkSession(ctx context.Context, p cluster.ParkedSession, retention time.Duration) error {
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("redisstore: encode parked session: %w", err)
	}
	ttl := time.Until(time.UnixMilli(p.ExpiresMS)) + retention
	if ttl < time.Second {
		ttl = time.Second
	}
	k := s.keysOf(p.Tenant)
	if _, err := s.rdb.TxPipelined(ctx, func(pl redis.Pipeliner) error {
		pl.Set(ctx, k.parked(p.SessionID), b, ttl)
		pl.ZAdd(ctx, k.parkedDue(), redis.Z{Score: float64(p.ExpiresMS), Member: p.SessionID})
		return nil
	}); err != nil {
		return fmt.Errorf("redisstore: park session: %w", err)
	}
	if err := s.rdb.Set(ctx, s.parkedIndex(p.SessionID), p.Tenant, ttl).Err(); err != nil {
		return fmt.Errorf("redisstore: park session index: %w", err)
	}
	return nil
}

// TakeParked implements cluster.Parking (lua/take_parked.lua).
func (s *Store) TakeParked(ctx context.Context, tenant, sessionID string) (*cluster.ParkedSession, error) {
	if tenant == "" {
		t, err := s.rdb.Get(ctx, s.parkedIndex(sessionID)).Result()
		if errors.Is(err, redis.Nil) {
			return nil, jobs.ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("redisstore: parked session index: %w", err)
		}
		tenant = t
	}
	k := s.keysOf(tenant)
	raw, err := takeParkedScript.Run(ctx, s.rdb, []string{k.parked(sessionID), k.parkedDue(), k.live(sessionID)}, sessionID).Text()
	if errors.Is(err, redis.Nil) {
		return nil, jobs.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: take parked session: %w", err)
	}
	_ = s.rdb.Del(ctx, s.parkedIndex(sessionID)).Err() // it expires anyway
	var p cluster.ParkedSession
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return nil, fmt.Errorf("redisstore: decode parked session: %w", err)
	}
	return &p, nil
}

// DueParked implements cluster.Parking.
func (s *Store) DueParked(ctx context.Context, tenant string, now time.Time) ([]string, error) {
	ids, err := s.rdb.ZRangeByScore(ctx, s.keysOf(tenant).parkedDue(), &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(now.UnixMilli(), 10)}).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: due parked sessions: %w", err)
	}
	return ids, nil
}
