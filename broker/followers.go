package broker

import "sync"

// Timeline followers (SPEC 18 --max-timeline-followers): a node serves at most
// Limits.MaxTimelineFollowers ?follow=1 streams of one session at a time. A follow request for
// a session another live node holds is forwarded to that node (forward.go), so every follower
// of a held session is counted on its holder and the limit is exact; a session no node holds
// (parked, or its node gone) is followed from the store by whichever node got the request, and
// each node then counts its own.

// followKey names one session's followers on one node.
type followKey struct {
	node   *Node
	tenant string
	id     string
}

// followers counts the open ?follow=1 streams; a session's entry is removed when its last
// stream ends, so nothing is kept for sessions nobody follows.
var followers = struct {
	mu sync.Mutex
	n  map[followKey]int
}{n: map[followKey]int{}}

// addFollower takes one of the session's follower places on n, if one is free; release gives
// it back (once).
func (n *Node) addFollower(tenant, id string) (release func(), ok bool) {
	k := followKey{node: n, tenant: tenant, id: id}
	followers.mu.Lock()
	defer followers.mu.Unlock()
	if followers.n[k] >= n.cfg.Limits.MaxTimelineFollowers {
		return nil, false
	}
	followers.n[k]++
	var once sync.Once
	return func() {
		once.Do(func() {
			followers.mu.Lock()
			defer followers.mu.Unlock()
			if followers.n[k]--; followers.n[k] <= 0 {
				delete(followers.n, k)
			}
		})
	}, true
}
