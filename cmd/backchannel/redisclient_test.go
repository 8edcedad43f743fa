package main

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestRedisClientKinds: --redis-url names one server, or a cluster with addr parameters.
func TestRedisClientKinds(t *testing.T) {
	one, err := redisClient("redis://127.0.0.1:6390/2")
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	if c, ok := one.(*redis.Client); !ok || c.Options().Addr != "127.0.0.1:6390" || c.Options().DB != 2 {
		t.Errorf("redis://127.0.0.1:6390/2: %T, want one server's client on it, DB 2", one)
	}
	cluster, err := redisClient("redis://127.0.0.1:7000?addr=127.0.0.1:7001&addr=127.0.0.1:7002")
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	if c, ok := cluster.(*redis.ClusterClient); !ok || len(c.Options().Addrs) != 3 {
		t.Errorf("a URL with addr parameters: %T, want a cluster client of 3 addresses", cluster)
	}
	for _, bad := range []string{"http://127.0.0.1:6379", "redis://127.0.0.1:7000/3?addr=127.0.0.1:7001", "redis://%zz"} {
		if c, err := redisClient(bad); err == nil {
			_ = c.Close()
			t.Errorf("%q was accepted", bad)
		}
	}
}
