// Package voicetest is the voice suite of the broker: narration and the floor, the failure
// contract, barge-in, interactions by voice, conversational cancel, injects and spoken
// permissions (SPEC 8, 9, 11, 12, 17, 19). It runs a real broker on loopback
// (internal/brokertest) and drives it only over the wire, as a host and a caller would: JSON
// frames over WebSocket, and the caller's µ-law audio as binary messages paced in real time.
//
// The scenarios form one table so that every voice model adapter can run them: Run takes the
// model factory, and asserts the exact sentences of SPEC 19 only for the scripted model. The
// caller speaks the scripted grammar (`call TOOL {json}`, `say TEXT`, `cancel REF`, `mute N`):
// an adapter under test is expected to be driven by a simulator that understands it too (the
// OpenAI adapter's Realtime simulator does).
//
// Timing is asserted by causality and order, never by tight wall-clock limits: "spoken only
// after the caller stopped + grace" is checked against when the caller's last loud frame was
// due (the broker cannot have heard it earlier), and "never over a reply" by the order of the
// frames on one connection.
//
// Each scenario's broker runs on a brokertest.Clock of its own: real time, so audio is played
// and heard at its pace, that the scenario moves forward (advance) where it would otherwise
// wait for a rule's time — the floor's grace, the 30 s re-ask, the narration timeout, a settle
// period in which nothing may happen. What the broker has handled is waited for with a barrier
// on the connections (settled), not with a sleep. With a model other than the scripted one, a
// barrier also gives the model half a second to answer (it is a peer over the network).
package voicetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/broker/model/scripted"
	"github.com/backchannel-io/backchannel/internal/brokertest"
	"github.com/backchannel-io/backchannel/internal/redistest"
)

// scenario is one row of the table.
type scenario struct {
	name string
	run  func(t *testing.T, vs *voiceSession)
}

// parallelism bounds how many scenarios run at once against one broker (they mostly wait on
// real-time speech, so all of them at once is cheap).
const parallelism = 64

// Run runs every voice scenario against a broker whose voice model is made by newModel (nil:
// the scripted model). Scripted reports whether the model is the scripted model, whose exact
// sentences (SPEC 19) are asserted only then.
func Run(t *testing.T, store string, newModel model.Factory, scripted bool) {
	t.Helper()
	cfg := broker.Config{ResumeWindow: 20 * time.Second}
	var models *modelTracker
	if newModel == nil {
		scripted = true
		models = &modelTracker{}
		cfg.Models = map[string]model.Factory{"scripted": models.factory(scriptedModel)}
		cfg.DefaultModel = "scripted"
	} else {
		cfg.Models = map[string]model.Factory{"scripted": scriptedModel, "openai": newModel}
		cfg.DefaultModel = "openai"
	}
	// Each scenario has a broker of its own, on a clock of its own that it moves (the floor's
	// grace, re-asks, narration timeouts); with Redis they share one server, each under its own
	// key prefix.
	opts := brokertest.Options{Store: store}
	if store == "redis" {
		opts.Redis = redistest.New(t)
	}

	// The scenarios run at once, each in its own session: subtests started from goroutines
	// without t.Parallel, so that -parallel (GOMAXPROCS by default) does not serialize them.
	sem := make(chan struct{}, parallelism)
	var wg sync.WaitGroup
	for _, sc := range scenarios {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			t.Run(sc.name, func(t *testing.T) {
				sc.run(t, newVoiceSession(t, startBroker(t, opts, cfg), scripted))
			})
		}()
	}
	wg.Wait()
	// Every scenario ended its session: the model of each was closed (SPEC 3.6, 10).
	if models != nil {
		if open := models.waitClosed(10 * time.Second); open != 0 {
			t.Errorf("%d of %d session models still open after their sessions ended", open, models.started())
		}
	}
}

// startBroker starts a broker for one scenario with opts and cfg, on a clock of its own.
func startBroker(t *testing.T, opts brokertest.Options, cfg broker.Config) *brokertest.Broker {
	cfg.Clock = brokertest.NewClock()
	opts.Config = cfg
	if opts.Redis != nil {
		opts.Prefix = redistest.Prefix(t)
	}
	return brokertest.Start(t, opts)
}

// modelTracker wraps a model factory to see which models were closed.
type modelTracker struct {
	mu   sync.Mutex
	all  int
	open int
}

// trackedModel is a model whose Close is counted.
type trackedModel struct {
	model.Model
	tr   *modelTracker
	once sync.Once
}

func (m *trackedModel) Close() error {
	m.once.Do(func() {
		m.tr.mu.Lock()
		m.tr.open--
		m.tr.mu.Unlock()
	})
	return m.Model.Close()
}

func (mt *modelTracker) factory(inner model.Factory) model.Factory {
	return wrapModels(inner, func(m model.Model) model.Model {
		mt.mu.Lock()
		mt.all++
		mt.open++
		mt.mu.Unlock()
		return &trackedModel{Model: m, tr: mt}
	})
}

// wrapModels is inner with every model it makes passed through wrap (which records what the
// broker does with it).
func wrapModels(inner model.Factory, wrap func(model.Model) model.Model) model.Factory {
	return func(ctx context.Context, cfg model.Config, events model.Events) (model.Model, error) {
		m, err := inner(ctx, cfg, events)
		if err != nil {
			return nil, err
		}
		return wrap(m), nil
	}
}

func (mt *modelTracker) started() int {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	return mt.all
}

// waitClosed waits up to d for every model to be closed and returns how many are still open.
func (mt *modelTracker) waitClosed(d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		mt.mu.Lock()
		open := mt.open
		mt.mu.Unlock()
		if open == 0 || time.Now().After(deadline) {
			return open
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// scriptedModel is the scripted model of SPEC 19.
var scriptedModel model.Factory = scripted.New
