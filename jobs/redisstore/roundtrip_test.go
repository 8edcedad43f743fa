package redisstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// TestRoundTripsPerTransition checks the Redis cost of every kind of transition the engine
// makes (SPEC 15: one round trip each), one at a time so that nothing shares a pipeline: the
// transitions of permission asks, interactions, cancels, late results, local calls, child
// calls, rejected defers, and deadlines fired by Tick (one claim per tick, then one round trip
// per job it closes), and the cascade of a cancelled parent (one per child, nothing more).
func TestRoundTripsPerTransition(t *testing.T) {
	client, rc := countedClient(t)
	store := newStore(t, client)
	clock := jobs.NewFakeClock(time.Now())
	engine := jobs.NewEngine(store, jobs.Options{Clock: clock, Tenants: []string{"acme"}})
	ctx := context.Background()
	const tenant = "acme"
	n := 0
	sess := func() string { n++; return fmt.Sprintf("rt-%d", n) }
	addr := func(j *jobs.Job) jobs.Addr {
		return jobs.Addr{Tenant: tenant, SessionID: j.SessionID, CallID: j.CallID}
	}
	call := func(s string, tool jobs.Tool, parent string, local bool) *jobs.Job {
		t.Helper()
		j, err := engine.Call(ctx, jobs.NewCall{Tenant: tenant, SessionID: s, Tool: tool, ParentCallID: parent, Local: local,
			Arguments: json.RawMessage(`{"a":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	// cost runs op and checks that it sent exactly cmds commands, in as many round trips when
	// it runs them one after another (sequential) or at most as many (Tick fires in parallel).
	cost := func(name string, cmds int64, sequential bool, op func() error) {
		t.Helper()
		c0, r0 := rc.commands.Load(), rc.roundTrips.Load()
		if err := op(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c, r := rc.commands.Load()-c0, rc.roundTrips.Load()-r0
		if c != cmds || r > c || (sequential && r != c) {
			t.Errorf("%s: %d commands in %d round trips, want %d", name, c, r, cmds)
		}
	}
	instant := jobs.Tool{Name: "lookup", Timeout: 10 * time.Second}
	background := jobs.Tool{Name: "render", Deferred: true, DeferredTimeout: time.Hour}
	permit := jobs.Tool{Name: "buy", RequiresPermission: true, Deferred: true}
	// Warm up the script cache of the server (the first EVALSHA of a script loads it).
	warm := call(sess(), instant, "", false)
	_, _, _ = engine.Cancel(ctx, addr(warm), frames.CancelHostRequest)
	_, _ = engine.Tick(ctx, clock.Now())

	s := sess()
	var j *jobs.Job
	cost("call", 1, true, func() error { j = call(s, instant, "", false); return nil })
	cost("progress", 1, true, func() error { return engine.Progress(ctx, addr(j), "half") })
	var ia jobs.PartialOutcome
	cost("partial opening an interaction", 1, true, func() (err error) {
		ia, err = engine.PartialResult(ctx, addr(j), jobs.Partial{Segment: json.RawMessage(`1`),
			Interaction: &jobs.Interaction{Prompt: "Red or blue?", Options: []string{"red", "blue"}}})
		return err
	})
	cost("interaction answer", 1, true, func() error {
		_, err := engine.AnswerInteraction(ctx, addr(j), ia.Interaction.ID, jobs.Answer{Option: "red", Text: "red"})
		return err
	})
	cost("update of a closed interaction", 0, true, func() error {
		_, err := engine.UpdateInteraction(ctx, addr(j), ia.Interaction.ID, frames.InteractionResolved)
		return err
	})
	cost("result", 1, true, func() error { _, err := engine.Result(ctx, addr(j), json.RawMessage(`"ok"`), "", false); return err })
	// A finished job has left the engine's memory: a request for it reads it once, then
	// records that it lost (no transition).
	cost("late result", 2, true, func() error {
		_, err := engine.Result(ctx, addr(j), json.RawMessage(`"late"`), "", false)
		if err == jobs.ErrCallFinished {
			return nil
		}
		return fmt.Errorf("late result answered %v", err)
	})
	cost("duplicate cancel", 2, true, func() error { _, _, err := engine.Cancel(ctx, addr(j), frames.CancelHostRequest); return err })

	d := call(s, background, "", false)
	cost("defer", 1, true, func() error { _, err := engine.Defer(ctx, addr(d), "rt-h-"+d.CallID, "Rendering"); return err })
	cost("partial of a deferred job opening an interaction", 1, true, func() error {
		_, err := engine.PartialResult(ctx, addr(d), jobs.Partial{Segment: json.RawMessage(`2`), Interaction: &jobs.Interaction{ID: "q", Prompt: "?"}})
		return err
	})
	cost("progress of a deferred job", 1, true, func() error { return engine.Progress(ctx, addr(d), "still") })
	cost("interaction update", 1, true, func() error {
		_, err := engine.UpdateInteraction(ctx, addr(d), "q", frames.InteractionResolved)
		return err
	})
	cost("cancel", 1, true, func() error { _, _, err := engine.Cancel(ctx, addr(d), frames.CancelHostRequest); return err })
	nd := call(s, instant, "", false)
	cost("rejected defer", 1, true, func() error {
		ack, err := engine.Defer(ctx, addr(nd), "nd", "")
		if err == nil && ack.Reason != frames.AckNotDeferrable {
			err = fmt.Errorf("ack %+v", ack)
		}
		return err
	})

	var p *jobs.Job
	cost("call awaiting permission", 1, true, func() error { p = call(s, permit, "", false); return nil })
	cost("permission asked", 1, true, func() error { return engine.PermissionAsked(ctx, addr(p), clock.Now()) })
	cost("permission held", 1, true, func() error { return engine.Permission(ctx, addr(p), jobs.Decision{Verdict: jobs.Hold}) })
	cost("permission approved", 1, true, func() error { return engine.Permission(ctx, addr(p), jobs.Decision{Verdict: jobs.Approve}) })
	q := call(s, permit, "", false)
	cost("permission declined", 1, true, func() error { return engine.Permission(ctx, addr(q), jobs.Decision{Verdict: jobs.Decline}) })

	var l *jobs.Job
	cost("local call", 1, true, func() error { l = call(s, instant, "", true); return nil })
	cost("local result", 1, true, func() error { _, err := engine.Result(ctx, addr(l), nil, "boom", true); return err })

	// A parent with two children: creating a child costs one round trip, and cancelling the
	// parent one for itself and one per child.
	parent := call(s, background, "", false)
	var kids []*jobs.Job
	for range 2 {
		cost("child call", 1, true, func() error { kids = append(kids, call(s, instant, parent.CallID, false)); return nil })
	}
	cost("cancel of a parent with two open children", 3, true, func() error {
		_, _, err := engine.Cancel(ctx, addr(parent), frames.CancelAgentRequest)
		return err
	})
	for _, k := range kids {
		if got, _ := store.Job(ctx, tenant, k.CallID); got.State != jobs.Cancelled {
			t.Fatalf("child %s: %s", k.CallID, got.State)
		}
	}
	// A child of a cancelled parent: created, then closed at once.
	cost("child of a cancelled parent", 2, true, func() error {
		k := call(s, instant, parent.CallID, false)
		if k.State != jobs.Cancelled || k.CancelReason != string(frames.CancelParentCancelled) {
			return fmt.Errorf("child of a cancelled parent: %s/%s", k.State, k.CancelReason)
		}
		return nil
	})

	// Deadlines: a tick claims once, then closes each due job with one round trip, a timed-out
	// parent's child included.
	clock.Set(clock.Now().Add(time.Hour))
	if _, err := engine.Tick(ctx, clock.Now()); err != nil { // the jobs above that are still open
		t.Fatal(err)
	}
	tp := call(sess(), jobs.Tool{Name: "agent", Timeout: 5 * time.Second}, "", false)
	call(tp.SessionID, jobs.Tool{Name: "sub", Timeout: time.Minute}, tp.CallID, false)
	for range 2 {
		call(tp.SessionID, instant, "", false)
	}
	clock.Set(clock.Now().Add(10 * time.Second))
	cost("tick closing three jobs and a child", 1+3+1, false, func() error {
		fired, err := engine.Tick(ctx, clock.Now())
		if err == nil && fired != 3 {
			err = fmt.Errorf("fired %d, want 3", fired)
		}
		return err
	})
	cost("idle tick", 1, true, func() error { _, err := engine.Tick(ctx, clock.Now()); return err })
}
