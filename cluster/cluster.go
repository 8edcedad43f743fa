// Package cluster is what the broker nodes that share a store share besides the jobs (SPEC 15:
// scale-out): the directory of which node holds each live session and which nodes are alive,
// with their inboxes (Directory); the journal that keeps, all the time, what one node holds of
// a session under a lease, so another node takes it over when that node dies (Journal); the
// sessions a node that shut down parked for another to take back (Parking); and the job changes
// relayed to the node that holds their session (ChangeRelay).
//
// A single node is a cluster of one: every store implements the whole of Cluster (the memory
// store for the nodes of one process, jobs/memstore; Redis for nodes anywhere,
// jobs/redisstore), so the broker never asks whether it is clustered. What differs is told by
// Durable: whether the cluster outlives a node.
package cluster

import "github.com/backchannel-io/backchannel/jobs"

// Cluster is the directory, the journal, the parking and the change relay of the nodes that
// share one store.
type Cluster interface {
	Directory
	Journal
	Parking
	ChangeRelay
	// Durable reports whether the cluster outlives its nodes (Redis): then a node journals
	// every frame before any connection sees it, so that another node can take its sessions
	// over when it dies. A cluster that dies with its process (memory) is not: its journal
	// works, but a node has no one to hand its sessions to, and sends its frames at once.
	Durable() bool
}

// Store is a job store that is also its nodes' cluster: what a broker node runs on.
type Store interface {
	jobs.Store
	Cluster
}
