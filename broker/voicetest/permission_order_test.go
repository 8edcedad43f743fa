package voicetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// slowAskModel is a model whose Respond for a permission ask takes a while, as a Realtime
// server's response.created does: it tells the test when such a request came.
type slowAskModel struct {
	model.Model
	delay   time.Duration
	entered chan struct{} // one send per slowed request
}

// Respond implements model.Model.
func (m *slowAskModel) Respond(req model.Request) (string, error) {
	if req.Kind == model.PermissionAsk {
		select {
		case m.entered <- struct{}{}:
		default:
		}
		time.Sleep(m.delay)
	}
	return m.Model.Respond(req)
}

// TestTurnBeforeAskIsNoReply covers SPEC 12's reply rule when the model is slow to start the
// ask: a caller turn that arrives after the ask was requested but before any of it was played
// (its event waited on the session's loop behind the request) is no reply to it. It reaches the
// model as a turn — here a second call of the tool, which waits its turn behind the first — and
// the first ask, cut before a frame of it was heard, is asked again; a "no" then declines the
// first call only, and the second is asked for next.
func TestTurnBeforeAskIsNoReply(t *testing.T) {
	for _, store := range brokertest.Stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			entered := make(chan struct{}, 1)
			slow := wrapModels(scriptedModel, func(m model.Model) model.Model {
				return &slowAskModel{Model: m, delay: 700 * time.Millisecond, entered: entered}
			})
			b := brokertest.Start(t, brokertest.Options{Store: store, Config: broker.Config{
				ResumeWindow: 20 * time.Second,
				Models:       map[string]model.Factory{"scripted": slow},
			}})
			vs := newVoiceSession(t, b, true)
			from := vs.say(`call pay {"amount":1}`)
			select {
			case <-entered:
			case <-time.After(waitTimeout):
				t.Fatal("the permission ask was never requested")
			}
			vs.say(`call pay {"amount":2}`) // arrives while the ask is being requested
			ask1 := fmt.Sprintf(askPay, `{"amount":1}`)
			vs.hear(from, ask1)
			for _, e := range vs.transcriptsFrom(from) {
				if text := e.F.str("text"); strings.Contains(text, "clear yes or no") || strings.Contains(text, `{"amount":2}`) {
					t.Fatalf("SPEC 12: the turn before the ask was heard was taken as its reply, or a second ask opened: %q", text)
				}
			}
			from = vs.say("no")
			vs.hear(from, "OK, I won't run pay.")
			vs.hear(from, fmt.Sprintf(askPay, `{"amount":2}`))
			vs.say("yes")
			tc := vs.host.expect(typ("tool_call", "name", "pay"))
			if compact(tc.F.M["arguments"]) != `{"amount":2}` {
				t.Errorf("dispatched %s, want the second call", tc.F)
			}
			vs.permissionEntry("decline", "no", ask1)
			for _, e := range vs.timeline() {
				if e.Kind == "permission" && e.str("transcript") == `call pay {"amount":2}` {
					t.Errorf("SPEC 12: the turn before the ask was judged: %s", e)
				}
			}
		})
	}
}
