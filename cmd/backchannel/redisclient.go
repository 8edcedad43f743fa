package main

import (
	"fmt"
	"net/url"

	"github.com/redis/go-redis/v9"
)

// redisClient connects to the Redis of --redis-url: one server for redis://HOST:PORT/DB (or
// rediss://), a Redis Cluster when the URL also names further nodes with addr query parameters,
// redis://HOST:PORT?addr=HOST2:PORT2&addr=HOST3:PORT3 (go-redis's cluster URL; the client finds
// every other node from any of them). All of a tenant's keys share one hash tag, so the store
// works on a cluster unchanged (SPEC 15).
func redisClient(raw string) (redis.UniversalClient, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if u.Query().Has("addr") {
		if p := u.Path; p != "" && p != "/" && p != "/0" {
			return nil, fmt.Errorf("a Redis Cluster has only database 0, not %s", p[1:])
		}
		opts, err := redis.ParseClusterURL(raw)
		if err != nil {
			return nil, fmt.Errorf("as a cluster URL: %w", err)
		}
		return redis.NewClusterClient(opts), nil
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		return nil, err
	}
	return redis.NewClient(opts), nil
}
