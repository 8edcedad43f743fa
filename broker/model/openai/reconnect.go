package openai

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/backchannel-io/backchannel/broker/model"
)

// A dropped connection — a read error, the server closing it, a failed or stalled write — is
// redialled with exponential backoff and jitter, bounded by Options.ReconnectTimeout, and the
// new Realtime session is given what the broker set on the old one: the session
// configuration, the pending function calls and the context items. See the package
// documentation for what the broker sees.

// ErrConnectionLost is wrapped by every error about a dropped connection: the Error event
// reporting the drop, the ResponseDone error of each response the drop cut off, and — when
// the connection could not be re-established — the final Error event and the errors of later
// commands.
var ErrConnectionLost = errors.New("the connection to the Realtime server was lost")

// errReconnecting is the failure of a client event sent while the model reconnects.
var errReconnecting = errors.New("openai: reconnecting to the Realtime server")

// LostResponsePrefix starts the response ids the adapter makes up for requested responses
// that a drop cut off before the server created them: Respond returns such an id, and the
// response is reported started and failed at once.
const LostResponsePrefix = "bc_lost_"

// stableAfter is how long a re-established connection must hold for its next drop to start
// afresh (an immediate redial, a new time bound); a connection that drops sooner goes on with
// the backoff of the drop before, so that a server that accepts and drops at once is not
// redialled in a tight loop, and is given up within the bound.
const stableAfter = 10 * time.Second

// maxDeferred bounds the commands that wait for the connection to be restored (caller turns
// and tool results given while reconnecting); later ones are dropped.
const maxDeferred = 256

// Reconnected is the value of the Error event that reports a re-established connection. It is
// no failure: the model works again, on a new Realtime session with the configuration, the
// pending function calls and the context items of the old one (the broker records it on the
// timeline like any model error; its message starts with "openai: reconnected").
type Reconnected struct {
	Attempts     int           // dials it took
	Downtime     time.Duration // from the drop to the new connection
	Calls        int           // pending function calls re-created
	ContextItems int           // context items re-created
}

func (r *Reconnected) Error() string {
	return fmt.Sprintf("openai: reconnected to the Realtime server after %v (%d %s); restored the session configuration, %d context %s and %d pending tool %s",
		r.Downtime.Round(time.Millisecond), r.Attempts, plural(r.Attempts, "dial", "dials"),
		r.ContextItems, plural(r.ContextItems, "item", "items"), r.Calls, plural(r.Calls, "call", "calls"))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// episode is a stretch of drops and redials, from a drop after a stable connection until a
// connection holds again (or the model gives up).
type episode struct {
	start    time.Time
	deadline time.Time
	bo       *backoff.ExponentialBackOff
	drops    int
	dropped  time.Time // the latest drop
	attempts int       // dials since the latest drop
	total    int       // dials in the episode
	last     error     // the latest failed dial
}

func (m *Model) newEpisode() *episode {
	now := time.Now()
	return &episode{start: now, deadline: now.Add(m.opts.ReconnectTimeout),
		bo: backoff.NewExponentialBackOff(
			backoff.WithInitialInterval(m.opts.ReconnectInterval),
			backoff.WithMaxInterval(MaxReconnectInterval),
			backoff.WithMultiplier(2),
			backoff.WithRandomizationFactor(0.5),
			backoff.WithMaxElapsedTime(m.opts.ReconnectTimeout),
		)}
}

// run serves the model's connections: it reads one until it drops, then redials, until the
// model is closed or gives up.
func (m *Model) run(c *conn) {
	defer close(m.done)
	var ep *episode
	for {
		up := time.Now()
		cause := m.readConn(c)
		c.close() // its writer stops with it, whether it dropped or Close closed it
		if m.closed.Load() {
			return
		}
		if ep != nil && time.Since(up) >= stableAfter {
			ep = nil
		}
		if ep == nil {
			ep = m.newEpisode()
		}
		ep.drops++
		ep.dropped, ep.attempts = time.Now(), 0
		if !m.dropped(cause) {
			return // reconnecting is off
		}
		next, rc, err := m.redial(ep)
		if err != nil {
			m.giveUp(err, ep)
			return
		}
		m.log.Info("openai: reconnected to the Realtime server", "attempts", rc.Attempts, "downtime", rc.Downtime,
			"context_items", rc.ContextItems, "calls", rc.Calls)
		m.emit(func(e model.Events) { e.Error(rc) })
		c = next
	}
}

// dropped handles a dropped connection: the Error event reports the drop, caller speech in
// progress is reported stopped, and every response the drop cut off is reported failed. It
// returns false when reconnecting is off: the model then gave up.
func (m *Model) dropped(cause error) bool {
	retry := m.opts.ReconnectTimeout > 0
	var err error
	if retry {
		err = fmt.Errorf("openai: %w: %w; reconnecting", ErrConnectionLost, cause)
	} else {
		err = fmt.Errorf("openai: %w: %w", ErrConnectionLost, cause)
	}
	m.mu.Lock()
	m.c = nil
	r := &m.resp
	var cut, lost []string
	for _, id := range slices.Sorted(maps.Keys(r.active)) {
		if !r.silent[id] {
			cut = append(cut, id)
		}
	}
	r.active, r.silent = make(map[string]bool), make(map[string]bool)
	if r.retry != nil {
		r.retry.Stop()
		r.retry = nil
	}
	waiting := r.queue
	if r.creating != nil {
		waiting = append([]*request{r.creating}, waiting...)
		r.creating = nil
	}
	r.queue = nil
	for _, q := range waiting {
		switch {
		case q.abandoned:
		case q.ready != nil:
			// A Respond waits for it: it gets an id of the adapter's own, failed at once.
			id := m.nextID(LostResponsePrefix)
			q.finish(id, nil)
			lost = append(lost, id)
		default:
			m.log.Debug("openai: a response the adapter requested on its own was cut off by the drop", "kind", q.params.Metadata[MetaKind])
		}
	}
	speaking := m.speaking
	m.speaking = false
	// Nothing of the old conversation is addressable any more.
	m.tracks, m.quiet, m.turns = audioTracks{}, quietEvents{}, heardTurns{}
	clear(m.partials)
	m.calls.leftConversation()
	for _, e := range m.contexts {
		e.itemID = ""
	}
	if !retry {
		m.broken = err
		m.deferred = nil
	}
	m.mu.Unlock()
	m.log.Warn("openai: the connection to the Realtime server was lost", "err", cause, "reconnecting", retry,
		"responses_cut", len(cut)+len(lost))
	m.emit(func(e model.Events) { e.Error(err) })
	if speaking {
		// The new session's VAD starts afresh: the speech it never heard end ends here.
		m.emit(func(e model.Events) { e.SpeechStopped() })
	}
	for _, id := range lost {
		m.emit(func(e model.Events) { e.ResponseStarted(id) })
	}
	for _, id := range append(cut, lost...) {
		rerr := fmt.Errorf("openai: response %s failed: %w (%v)", id, ErrConnectionLost, cause)
		m.emit(func(e model.Events) { e.ResponseDone(id, false, rerr) })
	}
	return retry
}

// redial dials until a connection is made and restored, backing off between attempts, within
// the episode's deadline. The first dial after a drop is immediate, unless the connection
// before dropped soon after it was made.
func (m *Model) redial(ep *episode) (*conn, *Reconnected, error) {
	ctx, cancel := context.WithDeadline(m.ctx, ep.deadline)
	defer cancel()
	wait := time.Duration(0)
	if ep.drops > 1 {
		wait = ep.bo.NextBackOff()
	}
	for {
		if wait == backoff.Stop {
			return nil, nil, context.DeadlineExceeded
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, nil, ctx.Err()
			case <-t.C:
			}
		}
		ep.attempts++
		ep.total++
		c, err := dial(ctx, m.opts)
		if err == nil {
			rc, ok := m.install(c, ep)
			if !ok {
				c.close()
				return nil, nil, errClosed
			}
			return c, rc, nil
		}
		ep.last = err
		if permanent(err) || ctx.Err() != nil {
			return nil, nil, err
		}
		m.log.Warn("openai: redialling the Realtime server failed", "attempt", ep.attempts, "err", err)
		wait = ep.bo.NextBackOff()
	}
}

// install makes c the model's connection and restores the session on it; false when the
// model was closed meanwhile.
func (m *Model) install(c *conn, ep *episode) (*Reconnected, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed.Load() {
		return nil, false
	}
	m.c = c
	rc := &Reconnected{Attempts: ep.attempts, Downtime: time.Since(ep.dropped)}
	rc.Calls, rc.ContextItems = m.restoreLocked()
	return rc, true
}

// restoreLocked gives a new Realtime session what the broker set on the old one, in order:
// one session.update with the whole configuration (formats, VAD with the current
// auto-respond, transcription, instructions, voice and the current tools), a function_call
// item for every call of the model still waiting for its output, the context items in the
// order they were set; then the commands that waited for the connection run, and the
// requested responses that waited are sent. m.mu is held.
func (m *Model) restoreLocked() (calls, contexts int) {
	_ = m.sendLocked(m.sessionUpdate(true))
	m.calls.restoring = make(map[string]string)
	for _, pc := range m.calls.list {
		eventID := m.nextID("bc_evt_")
		item := functionCallItem{Type: itemTypeFunctionCall, CallID: pc.callID, Name: pc.name, Arguments: pc.args}
		if m.sendLocked(itemCreate{Type: evItemCreate, EventID: eventID, Item: item}) == nil {
			pc.inConversation = true
			m.calls.restoring[eventID] = pc.callID
			calls++
		}
	}
	for _, e := range m.contexts {
		m.createContextLocked(e)
		contexts++
	}
	deferred := m.deferred
	m.deferred = nil
	for _, fn := range deferred {
		fn()
	}
	m.pumpLocked()
	return calls, contexts
}

// giveUp ends reconnecting for good: the model reports Error and stays closed — waiting
// requests fail and later commands do nothing.
func (m *Model) giveUp(err error, ep *episode) {
	if m.closed.Load() {
		return
	}
	last := ep.last
	if last == nil {
		last = err
	}
	gerr := fmt.Errorf("openai: %w and could not be re-established (%d %s in %v): %w", ErrConnectionLost,
		ep.total, plural(ep.total, "dial", "dials"), time.Since(ep.start).Round(time.Millisecond), last)
	m.mu.Lock()
	m.broken = gerr
	m.resp.failAll(gerr)
	m.deferred = nil
	m.mu.Unlock()
	m.log.Error("openai: gave up reconnecting to the Realtime server", "err", gerr)
	m.emit(func(e model.Events) { e.Error(gerr) })
}

// deferLocked keeps a command until the connection is restored. m.mu is held.
func (m *Model) deferLocked(what string, fn func()) {
	if len(m.deferred) >= maxDeferred {
		m.log.Warn("openai: too many commands wait for the connection; dropping one", "command", what)
		return
	}
	m.deferred = append(m.deferred, fn)
}
