package redisstore_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/backchannel-io/backchannel/internal/redistest"
	"github.com/backchannel-io/backchannel/jobs"
	"github.com/backchannel-io/backchannel/jobs/redisstore"
	"github.com/backchannel-io/backchannel/jobs/storetest"
)

// newStore returns a Redis store with a key prefix of its own on the shared test server.
func newStore(t testing.TB, client redis.UniversalClient) jobs.Store {
	return newStoreWithPrefix(t, client, redistest.Prefix(t))
}

func newStoreWithPrefix(t testing.TB, client redis.UniversalClient, prefix string) *redisstore.Store {
	s, err := redisstore.New(redisstore.Options{Client: client, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestConformance runs the store conformance suite against a real Redis.
func TestConformance(t *testing.T) {
	client := redistest.New(t)
	storetest.Run(t, func(t testing.TB, _ jobs.Clock) jobs.Store { return newStore(t, client) })
}

// TestMain checks that no test leaves a goroutine behind (the pipeline workers stop on Close).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
