package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/backchannel-io/backchannel/broker/model"
)

var _ model.Model = (*Model)(nil)

// errClosed is returned by commands after Close.
var errClosed = errors.New("openai: the model is closed")

// Model is one session's connection to a Realtime server. It implements model.Model; its
// methods are safe for concurrent use and never block on the model's speech (Respond waits
// only for its response to be created).
type Model struct {
	opts   Options
	log    *slog.Logger
	events model.Events

	instructions string // the session instructions
	voice        string

	emitMu sync.Mutex // held while an event is delivered, so that none follows Close
	closed atomic.Bool
	ctx    context.Context // ends at Close: stops redialling
	cancel context.CancelFunc
	done   chan struct{} // closed when the connection's goroutine (run) has exited

	mu          sync.Mutex
	c           *conn       // the connection; nil while reconnecting, and once given up
	broken      error       // why the model gave up the connection, once it did
	stopCtx     func() bool // stops closing the model when the factory's context ends
	seq         uint64
	autoRespond bool
	speaking    bool            // the server's VAD reported speech that has not stopped yet
	tools       *[]functionTool // the declared tools (nil: none declared yet)
	contexts    []*contextEntry // the context items, in the order they were last set
	calls       pendingCalls    // the model's function calls waiting for their output
	deferred    []func()        // commands that wait for the connection to be restored
	turns       heardTurns
	resp        responder
	tracks      audioTracks
	quiet       quietEvents
	partials    map[string]string // transcripts so far: by response id, and by caller item id
}

// New returns a model.Factory that connects each session to the Realtime server of opts.
func New(opts Options) model.Factory {
	o := opts.withDefaults()
	return func(ctx context.Context, cfg model.Config, events model.Events) (model.Model, error) {
		m, err := Dial(ctx, o, cfg, events)
		if err != nil {
			return nil, err // not a typed nil
		}
		return m, nil
	}
}

// Dial connects one session's model and configures its Realtime session. The dial is bounded
// by opts.DialTimeout; a failed first dial is returned, not retried. The model lives until
// Close, or until ctx ends; a connection that drops meanwhile is redialled (see the package
// documentation).
func Dial(ctx context.Context, opts Options, cfg model.Config, events model.Events) (*Model, error) {
	o := opts.withDefaults()
	c, err := dial(ctx, o)
	if err != nil {
		return nil, err
	}
	m := &Model{opts: o, log: o.Logger, events: events, c: c, done: make(chan struct{}),
		autoRespond: true, partials: make(map[string]string)}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.resp.init()
	m.instructions = sessionInstructions(cfg.Instructions, o.Instructions)
	m.voice = cfg.Voice
	if m.voice == "" {
		m.voice = o.Voice
	}
	m.mu.Lock()
	err = m.sendLocked(m.sessionUpdate(true))
	m.mu.Unlock()
	if err != nil {
		m.cancel()
		c.close()
		return nil, err
	}
	go m.run(c)
	m.mu.Lock()
	m.stopCtx = context.AfterFunc(ctx, func() { _ = m.Close() })
	m.mu.Unlock()
	return m, nil
}

// readConn handles one connection's server events until it ends, and returns why it ended.
func (m *Model) readConn(c *conn) error {
	for {
		b, err := c.read()
		if err != nil {
			if cause := c.failure(); cause != nil {
				err = cause // the writer failed first, the queue stalled, or Close closed it
			}
			return err
		}
		if m.fastAudioDelta(b) {
			continue
		}
		var ev serverEvent
		if err := json.Unmarshal(b, &ev); err != nil {
			m.log.Warn("openai: undecodable server event", "err", err)
			continue
		}
		m.handle(&ev)
	}
}

// emit delivers one event unless the model is closed.
func (m *Model) emit(fn func(model.Events)) {
	m.emitMu.Lock()
	defer m.emitMu.Unlock()
	if m.closed.Load() {
		return
	}
	fn(m.events)
}

// sendLocked sends a client event on the connection. It fails while the model reconnects or
// once it gave up; a failure of the connection marks it failed (its reader then reports the
// drop). m.mu is held.
func (m *Model) sendLocked(v any) error {
	if m.broken != nil {
		return m.broken
	}
	if m.c == nil {
		return errReconnecting
	}
	if err := m.c.send(v); err != nil {
		if !errors.Is(err, errClosed) {
			m.log.Warn("openai: sending a client event", "err", err)
		}
		return err
	}
	return nil
}

// nextID returns a fresh id with prefix, unique within the model (across its connections).
func (m *Model) nextID(prefix string) string {
	m.seq++
	return fmt.Sprintf("%s%d", prefix, m.seq)
}

// usable reports whether commands may still be given: the model is neither closed nor gave
// up its connection (it may be reconnecting). m.mu is held.
func (m *Model) usable() bool { return m.broken == nil && !m.closed.Load() }

// connected reports whether client events can be sent now. m.mu is held.
func (m *Model) connected() bool { return m.usable() && m.c != nil }

// Close implements model.Model: it closes the connection (or stops reconnecting); no event
// follows. It must not be called from inside an Events method.
func (m *Model) Close() error {
	// An event being delivered finishes first; none follows.
	m.emitMu.Lock()
	already := m.closed.Swap(true)
	m.emitMu.Unlock()
	if already {
		return nil
	}
	m.cancel()
	m.mu.Lock()
	if m.stopCtx != nil {
		m.stopCtx()
	}
	m.resp.failAll(errClosed)
	m.deferred = nil
	c := m.c
	m.mu.Unlock()
	if c != nil {
		c.close()
	}
	<-m.done
	return nil
}
