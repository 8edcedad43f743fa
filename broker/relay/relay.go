package relay

import (
	"context"
	"crypto/rand"
	"log/slog"
	"sync"
)

// Transport is one client connection as the node sees it. It has the method set of
// broker.Transport, so a broker transport is a relay transport and back.
type Transport interface {
	// Send queues one encoded text frame without blocking.
	Send(frame []byte)
	// SendAudio queues one binary message of agent audio.
	SendAudio(chunk []byte)
	// Close sends what is queued, then closes the connection with the WebSocket status code.
	Close(code int, reason string)
	// Abort drops the connection at once.
	Abort()
}

// Conn is, on the holder, the node's side of a connection relayed to it (a broker.Client): it
// takes the connection's messages as a local connection's.
type Conn interface {
	// Receive takes one text message.
	Receive(data []byte)
	// ReceiveAudio takes one binary message.
	ReceiveAudio(data []byte)
	// Oversized reports a message the edge's transport refused to read whole.
	Oversized(size int, ref string)
	// Dropped reports that the connection is gone.
	Dropped()
	// WelcomeConfirmed reports that the edge got the welcome and writes it to its client.
	WelcomeConfirmed()
}

// Node is what the relay needs of its node.
type Node interface {
	// Hello attaches a connection relayed from another node, whose hello is data: the node
	// answers it as a local connection's (and never relays it on). It returns nil after
	// refusing the hello.
	Hello(tr Transport, data []byte) Conn
}

// Directory is the part of the cluster's directory the relay sends through
// (cluster.Directory).
type Directory interface {
	// SendToNode delivers msg to node's inbox; cluster.ErrNotListening when none took it.
	SendToNode(ctx context.Context, node string, msg []byte) error
	// NodesAlive reports which of nodes are alive.
	NodesAlive(ctx context.Context, nodes []string) (map[string]bool, error)
}

// Config configures a Relay.
type Config struct {
	// Addr is the node's address: where other nodes send to it.
	Addr string
	// Directory carries the messages between the nodes' inboxes.
	Directory Directory
	// Node attaches the connections relayed to this node.
	Node Node
	// SendQueueBytes bounds what waits to be sent to one relayed connection's edge; past it the
	// connection is dropped as a slow consumer's.
	SendQueueBytes int
	// Log receives the relay's logs; default slog.Default().
	Log *slog.Logger
}

// Relay is one node's side of the connections relayed between nodes: the edges of its clients'
// connections to sessions other nodes hold, and the connections other nodes relay to the
// sessions it holds.
type Relay struct {
	ctx            context.Context
	addr           string
	dir            Directory
	node           Node
	sendQueueBytes int
	log            *slog.Logger

	mu      sync.Mutex
	remotes map[string]*remote // held here, their edge elsewhere; by edge/conn
	// endedRemotes are remotes that ended within endedLinkKeep (check.go); by edge/conn.
	endedRemotes map[string]*remote
	edges        map[string]*Edge // edge here, their session held elsewhere; by conn
	out          sync.WaitGroup   // the writers of frames to relayed connections' nodes
}

// New returns the relay of a node; it works until ctx ends (the node halts or shuts down).
func New(ctx context.Context, cfg Config) *Relay {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Relay{ctx: ctx, addr: cfg.Addr, dir: cfg.Directory, node: cfg.Node, sendQueueBytes: cfg.SendQueueBytes,
		log: cfg.Log, remotes: make(map[string]*remote), endedRemotes: make(map[string]*remote), edges: make(map[string]*Edge)}
}

// Wait waits for the writers of messages to other nodes to finish.
func (n *Relay) Wait() { n.out.Wait() }

// hello attaches a connection relayed to this node.
func (n *Relay) hello(rc *remote, data []byte) Conn { return n.node.Hello(rc, data) }

// IsRemote reports whether tr is, on the holder, a connection relayed from another node.
func IsRemote(tr Transport) bool { _, ok := tr.(*remote); return ok }

// randomID is the random part of a connection's id at its edge: 16 letters and digits.
func randomID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
