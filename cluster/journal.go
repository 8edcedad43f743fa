package cluster

import (
	"context"
	"errors"
	"time"
)

// Journal is the cluster's journal of live sessions (durable when the cluster is: see
// Cluster.Durable). It keeps, all the time, what one node holds of a live session — the
// session's record (slots, declared tools, resume-token hashes: the broker's encoding) and each
// slot's outbox — under a lease that the node renews. When the node dies its leases run out,
// and another node takes the session over, exactly once, and rebuilds it from the journal
// (SPEC 15: killing a node loses no job; its sessions resume on another node).
type Journal interface {
	// SaveSession writes the session's record and the ids of its slots, and gives node the
	// session's lease for ttl (the caller holds the session: it created it, or took it over
	// or back). It returns ErrLeaseLost, writing nothing, when the journal names another node
	// as the session's holder (this node hung and the session was taken over).
	SaveSession(ctx context.Context, node, tenant, id string, record []byte, slots []string, ttl time.Duration) error
	// AppendFrames keeps, in one atomic write, w's frames in their slots' outboxes (each
	// keeps its newest w.Max frames; a replacement takes the place of the frame already under
	// its seq) and, when w.AgentState is set, the state of the session's text agent (the
	// broker's encoding: its conversations, result queues and waits) and the agent's calls
	// settled since (w.AgentSettled, appended to those kept). It returns ErrLeaseLost,
	// writing nothing, when node no longer holds the session's lease (another node took it
	// over, or the journal was dropped). Writing a frame the outbox already has under its seq,
	// with the same bytes, is no error (a retry of a write whose answer was lost); with other
	// bytes it is, and nothing is written; so is a frame that would leave a gap in its outbox.
	AppendFrames(ctx context.Context, node, tenant, id string, w JournalWrite) error
	// RenewLeases renews, for ttl, node's leases on the tenant's sessions ids and returns the
	// ids whose lease another node holds now, or nobody (they are no longer node's).
	RenewLeases(ctx context.Context, node, tenant string, ids []string, ttl time.Duration) (lost []string, err error)
	// TakeOver gives node the lease of session id for ttl, if nobody holds it, and returns the
	// journal; ErrLeaseHeld when another node's lease has not run out, jobs.ErrNotFound when the
	// journal holds no such session. Of concurrent callers at most one gets it. tenant is ""
	// when the caller does not know it (a resume token names no tenant).
	TakeOver(ctx context.Context, node, tenant, id string, ttl time.Duration) (*JournaledSession, error)
	// Orphaned lists the ids of the tenant's journaled sessions whose lease ran out at or
	// before now, oldest first.
	Orphaned(ctx context.Context, tenant string, now time.Time) ([]string, error)
	// DropSession deletes the session's journal (it ended, or it was parked) if node holds it,
	// or nobody does, or node is "": a node that parked a session another node has taken back
	// and journaled since deletes nothing.
	DropSession(ctx context.Context, node, tenant, id string) error
}

// JournaledSession is a session as its journal keeps it.
type JournaledSession struct {
	Tenant    string
	SessionID string
	Record    []byte
	// AgentState is the last text-agent state AppendFrames kept (nil when none).
	AgentState []byte
	// AgentSettled are the text agent's settled calls AppendFrames kept, in the order written.
	AgentSettled [][]byte
	// Outboxes are each slot's kept frames, oldest first.
	Outboxes map[string][]JournaledFrame
	// LeaseEndMS is when the lease of the node that held it last ran out (epoch ms).
	LeaseEndMS int64
}

// JournaledFrame is one frame of a journaled outbox.
type JournaledFrame struct {
	Seq  int64
	Data []byte
}

// ErrLeaseHeld is returned by TakeOver while another node's lease on the session runs.
var ErrLeaseHeld = errors.New("cluster: the session's lease is held by another node")

// JournalWrite is what one AppendFrames keeps: the frames an event of the session put in its
// outboxes, and the text agent's state after it.
type JournalWrite struct {
	Frames []JournalFrameWrite
	// AgentState is the text agent's state, nil when it did not change.
	AgentState []byte
	// AgentSettled are text-agent calls that settled since the last write (the broker's
	// encoding, one each): they are kept apart from AgentState, each written once, after those
	// written before — or, with AgentSettledReset, instead of them.
	AgentSettled      [][]byte
	AgentSettledReset bool
	// Max is how many frames each outbox keeps at least.
	Max int
}

// JournalFrameWrite is one frame of a JournalWrite.
type JournalFrameWrite struct {
	Slot string
	Seq  int64
	Data []byte
	// Replace: the frame takes the place of the one already under Seq.
	Replace bool
}

// ErrLeaseLost is returned by the journal's writes when the session's lease is no longer the
// writing node's.
var ErrLeaseLost = errors.New("cluster: the session's lease is another node's")
