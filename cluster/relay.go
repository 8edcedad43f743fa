package cluster

import (
	"context"

	"github.com/backchannel-io/backchannel/jobs"
)

// ChangeRelay carries job changes between the nodes of a cluster: a job change made on a
// node that does not hold the job's session — a deadline fired by that node's sweep, say —
// reaches the node that does (SPEC 15: other nodes relay a session's events through Redis
// pub/sub). Delivery is at most once and only to nodes subscribed at the time.
type ChangeRelay interface {
	// PublishChange sends c to every subscribed node.
	PublishChange(ctx context.Context, c jobs.Change) error
	// SubscribeChanges calls fn with every change published from now on, one at a time, until
	// ctx ends; it returns once the subscription is in place (or failed). It calls lost, in the
	// same order, when changes may have been missed (as NodeInbox does).
	SubscribeChanges(ctx context.Context, fn func(jobs.Change), lost func()) error
}
