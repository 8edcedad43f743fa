package voicetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// TestFloorTimeout covers SPEC 8's floor_timeout through the broker
// (broker.Config.NarrationMaxWait): while the caller talks without a pause, no item finds a free
// floor. A completion counts each wait as a failed attempt — queued/1, skipped/1, queued/2,
// skipped/2 — and then the host gets tool_job_delivery_failed with attempts 2 and reason
// floor_timeout; a milestone is skipped once and not repeated; an interaction ask is skipped
// and queued again by SPEC 9, 3 attempts in all, and stays open. Nothing is spoken over the
// caller. A permission ask that found no floor is asked once the caller stops (the call must
// never wait unasked: its permission clock runs only from the end of a spoken ask, SPEC 12).
func TestFloorTimeout(t *testing.T) {
	const maxWait = 1200 * time.Millisecond
	for _, store := range brokertest.Stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			// Each subtest has a broker of its own: it moves the broker's clock.
			start := func(t *testing.T) *brokertest.Broker {
				return brokertest.Start(t, brokertest.Options{Store: store, Config: broker.Config{
					ResumeWindow:     20 * time.Second,
					NarrationMaxWait: maxWait,
					FloorGrace:       time.Second, // time to start talking right after a turn
					Models:           map[string]model.Factory{"scripted": scriptedModel},
					Clock:            brokertest.NewClock(),
				}})
			}
			t.Run("completion_milestone_ask", func(t *testing.T) {
				t.Parallel()
				floorTimeoutNarrations(t, newVoiceSession(t, start(t), true), maxWait)
			})
			t.Run("permission_ask", func(t *testing.T) {
				t.Parallel()
				floorTimeoutPermission(t, newVoiceSession(t, start(t), true), maxWait)
			})
		})
	}
}

func floorTimeoutNarrations(t *testing.T, vs *voiceSession, maxWait time.Duration) {
	done, news, ask := vs.startJob("archive"), vs.startJob("crawl"), vs.startJob("survey")
	vs.caller.quiet(300 * time.Millisecond)
	vs.talk() // and never pause
	from := vs.caller.mark()
	ia := unique("ia-survey")
	vs.result(done, "ok")
	vs.partial(news, "half way", true, nil)
	vs.partial(ask, "a question", false, map[string]any{"id": ia, "prompt": "Yes or no?"})
	vs.host.expect(narr(ask.callID, "interaction", "queued"))

	// The caller talks on while the clock passes the narration timeout, again and again.
	vs.advanceUntil(maxWait, func() bool { return len(vs.narrations(ask.callID, "interaction")) >= 6 })
	df := vs.host.expect(typ("tool_job_delivery_failed", "call_id", done.callID))
	if df.F.num("attempts") != 2 || df.F.str("reason") != "floor_timeout" || df.F.str("handle") != done.handle {
		t.Errorf("SPEC 8: want attempts 2, reason floor_timeout, handle %s: %s", done.handle, df.F)
	}
	vs.expectNarrations(done.callID, "completion", 0, "queued/1", "skipped/1", "queued/2", "skipped/2")
	for _, e := range vs.host.events() {
		if e.Idx > df.Idx && !e.isAudio() && e.F.Type == "tool_job_narration" && e.F.str("call_id") == done.callID {
			t.Errorf("narration after tool_job_delivery_failed: %s", e.F)
		}
	}
	vs.expectNarrations(ask.callID, "interaction", maxWait/2,
		"queued/1", "skipped/1", "queued/2", "skipped/2", "queued/3", "skipped/3")
	vs.expectNarrations(news.callID, "milestone", 0, "queued/1", "skipped/1")
	if n := vs.caller.audioFrames(from, -1); n != 0 {
		t.Errorf("SPEC 8: %d frames of agent audio while the caller talked", n)
	}
	vs.expectEntry("delivery_failed", "delivery_failed", func(e entry) bool {
		return e.callID() == done.callID && e.num("attempts") == 2 && e.str("reason") == "floor_timeout"
	})

	// The caller stops: nothing of it is said any more, and the ask is still open (SPEC 9).
	vs.stopTalking()
	vs.advance(time.Second + settle)
	if n := vs.caller.audioFrames(from, -1); n != 0 {
		t.Errorf("SPEC 8: %d frames of agent audio for items that were skipped or given up", n)
	}
	vs.expectNarrations(news.callID, "milestone", 0, "queued/1", "skipped/1")
	vs.host.send(map[string]any{"type": "tool_interaction_update", "id": "u1", "handle": ask.handle, "interaction_id": ia, "state": "resolved"})
	if ack := vs.host.expect(typ("tool_interaction_update_ack", "ref", "u1")); ack.F.str("result") != "applied" {
		t.Errorf("SPEC 9: an ask whose attempts found no floor is still open; update answered %s", ack.F)
	}
}

func floorTimeoutPermission(t *testing.T, vs *voiceSession, maxWait time.Duration) {
	args := `{"amount":21}`
	hostFrom := vs.host.mark()
	from := vs.say("call pay " + args)
	vs.talk() // within the grace: the ask waits for the floor
	vs.advance(maxWait + 800*time.Millisecond)
	if ts := vs.transcriptsFrom(from); len(ts) != 0 {
		t.Fatalf("SPEC 8: spoken while the caller talked: %s", ts[0].F)
	}
	vs.mic.silence()
	vs.hear(from, fmt.Sprintf(askPay, args))
	vs.say("yes")
	tc := vs.host.expectAfter(hostFrom, typ("tool_call", "name", "pay"))
	if compact(tc.F.M["arguments"]) != args {
		t.Errorf("dispatched %s, want the arguments %s", tc.F, args)
	}
}
