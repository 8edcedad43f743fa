package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// StartCluster starts n private redis-servers in cluster mode and joins them into one Redis
// Cluster without replicas: the hash slots split evenly between them, every node meeting the
// first. It returns once every node reports cluster_state:ok and knows all n; the servers stop
// when the test ends.
func StartCluster(t testing.TB, n int) []*Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal(InstallHint)
	}
	nodes := make([]*Server, n)
	for i := range nodes {
		s := &Server{Dir: t.TempDir(), t: t}
		if err := s.startOnFreePort(true); err != nil {
			t.Fatalf("redistest: cluster node %d: %v", i, err)
		}
		t.Cleanup(s.Kill)
		nodes[i] = s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clients := make([]*redis.Client, n)
	for i, s := range nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: s.Addr})
		defer clients[i].Close()
		lo, hi := i*clusterSlots/n, (i+1)*clusterSlots/n-1
		if err := clients[i].ClusterAddSlotsRange(ctx, lo, hi).Err(); err != nil {
			t.Fatalf("redistest: cluster node %s: CLUSTER ADDSLOTSRANGE %d %d: %v", s.Addr, lo, hi, err)
		}
		if i > 0 {
			first := nodes[0]
			host, port, _ := strings.Cut(first.Addr, ":")
			if err := clients[i].Do(ctx, "CLUSTER", "MEET", host, port, first.busPort).Err(); err != nil {
				t.Fatalf("redistest: cluster node %s: CLUSTER MEET: %v", s.Addr, err)
			}
		}
	}
	want := fmt.Sprintf("cluster_known_nodes:%d", n)
	for i, c := range clients {
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, want) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("redistest: cluster node %s never reported cluster_state:ok with %d nodes: %v\n%s", nodes[i].Addr, n, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nodes
}

// NewCluster returns a cluster client of a private three-node Redis Cluster started for the
// test (StartCluster); the client is closed when the test ends.
func NewCluster(t testing.TB) *redis.ClusterClient {
	t.Helper()
	nodes := StartCluster(t, 3)
	addrs := make([]string, len(nodes))
	for i, s := range nodes {
		addrs[i] = s.Addr
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
