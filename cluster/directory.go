package cluster

import (
	"context"
	"errors"
	"time"
)

// Directory is the cluster's directory of nodes and sessions. It knows which node
// holds each live session and which nodes are alive, and carries messages to a node's inbox:
// a node that gets a connection for a session another node holds relays that connection's
// frames to it and back (SPEC 15).
type Directory interface {
	// HoldSessions records, for ttl, that node holds the sessions (called again to renew).
	HoldSessions(ctx context.Context, node string, sessions []HeldSession, ttl time.Duration) error
	// ReleaseSession forgets that node holds the session id; it does nothing if another node
	// holds it.
	ReleaseSession(ctx context.Context, node, id string) error
	// SessionHolder returns the node that holds session id and the session's tenant, or ""
	// when no node does.
	SessionHolder(ctx context.Context, id string) (node, tenant string, err error)
	// NodeAlive records, for ttl, that node is alive and where other nodes reach its HTTP
	// server (url, "" when they cannot); called again to renew.
	NodeAlive(ctx context.Context, node, url string, ttl time.Duration) error
	// NodesAlive reports which of nodes are alive.
	NodesAlive(ctx context.Context, nodes []string) (map[string]bool, error)
	// NodeURL returns where an alive node's HTTP server is reached, or "" (not alive, or not
	// reachable).
	NodeURL(ctx context.Context, node string) (string, error)
	// SendToNode delivers msg to node's inbox (at most once, in the order one caller sent
	// them). It returns ErrNotListening when no inbox of node took it (the node is gone, or its
	// inbox is being opened again): the message is lost.
	SendToNode(ctx context.Context, node string, msg []byte) error
	// RecordEnded keeps, for ttl, what every node must know of a session that ended (rec, the
	// broker's encoding): a later hello naming it is answered session_ended or
	// resume_expired on any node.
	RecordEnded(ctx context.Context, id string, rec []byte, ttl time.Duration) error
	// Ended returns what RecordEnded kept of session id, or jobs.ErrNotFound.
	Ended(ctx context.Context, id string) ([]byte, error)
	// NodeInbox calls fn with every message sent to node from now on, one at a time, until ctx
	// ends; it returns once the inbox listens (or failed). It calls lost, in the same order,
	// when messages may have been missed (the inbox's connection to the store dropped, or it
	// fell behind): once when that happens, and again when it listens again.
	NodeInbox(ctx context.Context, node string, fn func([]byte), lost func()) error
}

// HeldSession is a session a node holds: its id and its tenant.
type HeldSession struct {
	ID     string
	Tenant string
}

// ErrNotListening is returned by SendToNode when no inbox of the node took the message.
var ErrNotListening = errors.New("cluster: the node's inbox does not listen")
