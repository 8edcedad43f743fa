package broker

import "sync"

// Timeline followers (SPEC 18 --max-timeline-followers): a node serves at most
// Limits.MaxTimelineFollowers ?follow=1 streams of one session at a time. A follow request for
// a session another live node holds is forwarded to that node (forward.go), so every follower
// of a held session is counted on its holder and the limit is exact; a session no node holds
// (parked, or its node gone) is followed from the store by whichever node got the request, and
// each node then counts its own.

// followerCounts counts the open ?follow=1 streams of this node by session; a session's entry
// is removed when its last stream ends, so nothing is kept for sessions nobody follows.
type followerCounts struct {
	mu sync.Mutex
	n  map[followKey]int
}

// followKey names one session's followers.
type followKey struct {
	tenant string
	id     string
}

// addFollower takes one of the session's follower places on n, if one is free; release gives
// it back (once).
func (n *Node) addFollower(tenant, id string) (release func(), ok bool) {
	f := &n.followers
	k := followKey{tenant: tenant, id: id}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[k] >= n.cfg.Limits.MaxTimelineFollowers {
		return nil, false
	}
	if f.n == nil {
		f.n = map[followKey]int{}
	}
	f.n[k]++
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.n[k]--; f.n[k] <= 0 {
				delete(f.n, k)
			}
		})
	}, true
}
