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
	c      *conn

	instructions string // the session instructions
	voice        string

	emitMu   sync.Mutex // held while an event is delivered, so that none follows Close
	closed   atomic.Bool
	readDone chan struct{}

	mu          sync.Mutex
	broken      error       // why the connection is gone, once it is
	stopCtx     func() bool // stops closing the model when the factory's context ends
	seq         uint64
	autoRespond bool
	contexts    map[string]string // context item ID → the conversation item that holds it
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
// by opts.DialTimeout; the model lives until Close, or until ctx ends.
func Dial(ctx context.Context, opts Options, cfg model.Config, events model.Events) (*Model, error) {
	o := opts.withDefaults()
	c, err := dial(ctx, o)
	if err != nil {
		return nil, err
	}
	m := &Model{opts: o, log: o.Logger, events: events, c: c, readDone: make(chan struct{}),
		autoRespond: true, contexts: make(map[string]string), partials: make(map[string]string)}
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
		c.close()
		return nil, err
	}
	go m.readLoop()
	m.mu.Lock()
	m.stopCtx = context.AfterFunc(ctx, func() { _ = m.Close() })
	m.mu.Unlock()
	return m, nil
}

// readLoop handles server events until the connection ends; a connection that ends while
// the model is open is reported as an error.
func (m *Model) readLoop() {
	defer close(m.readDone)
	for {
		b, err := m.c.read()
		if err != nil {
			if cause := m.c.failure(); cause != nil {
				err = cause // the writer failed first, or the queue stalled
			}
			m.c.close()
			m.lost(err)
			return
		}
		var ev serverEvent
		if err := json.Unmarshal(b, &ev); err != nil {
			m.log.Warn("openai: undecodable server event", "err", err)
			continue
		}
		m.handle(&ev)
	}
}

// lost marks the connection gone: waiting requests fail, later commands do nothing, and an
// Error event reports it unless the model was closed.
func (m *Model) lost(err error) {
	m.mu.Lock()
	if m.broken == nil {
		m.broken = fmt.Errorf("openai: the connection to the Realtime server was lost: %w", err)
	}
	broken := m.broken
	m.resp.failAll(broken)
	m.mu.Unlock()
	m.emit(func(e model.Events) { e.Error(broken) })
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

// sendLocked sends a client event; a failure marks the connection broken (the reader reports
// it). m.mu is held.
func (m *Model) sendLocked(v any) error {
	if m.broken != nil {
		return m.broken
	}
	if err := m.c.send(v); err != nil {
		if !errors.Is(err, errClosed) {
			m.log.Warn("openai: sending a client event", "err", err)
		}
		return err
	}
	return nil
}

// nextID returns a fresh id with prefix, unique within the connection.
func (m *Model) nextID(prefix string) string {
	m.seq++
	return fmt.Sprintf("%s%d", prefix, m.seq)
}

// usable reports whether commands may still be sent. m.mu is held.
func (m *Model) usable() bool { return m.broken == nil && !m.closed.Load() }

// Close implements model.Model: it closes the connection; no event follows. It must not be
// called from inside an Events method.
func (m *Model) Close() error {
	// An event being delivered finishes first; none follows.
	m.emitMu.Lock()
	already := m.closed.Swap(true)
	m.emitMu.Unlock()
	if already {
		return nil
	}
	m.mu.Lock()
	if m.stopCtx != nil {
		m.stopCtx()
	}
	m.resp.failAll(errClosed)
	m.mu.Unlock()
	m.c.close()
	<-m.readDone
	return nil
}
