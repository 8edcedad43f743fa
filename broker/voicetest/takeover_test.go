package voicetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// twoNodes starts two broker nodes with the scripted model on one private Redis and one
// brokertest.Clock (a session moving between them keeps its time); holdTTL, when given, is
// their Config.HoldTTL.
func twoNodes(t *testing.T, holdTTL ...time.Duration) (a, b *brokertest.Broker) {
	t.Helper()
	opts := brokertest.SharedRedis(t)
	opts.Config = broker.Config{ResumeWindow: 20 * time.Second, Models: map[string]model.Factory{"scripted": scriptedModel},
		Clock: brokertest.NewClock()}
	if len(holdTTL) > 0 {
		opts.Config.HoldTTL = holdTTL[0]
	}
	return brokertest.Start(t, opts), brokertest.Start(t, opts)
}

// TestVoiceSessionMovesToAnotherNode covers SPEC 15 and 18 for a voice session: node A shuts
// down (Redis store: close 1012) while a deferred job runs; the host and the caller resume on
// node B, which starts a model of its own. The job's result, sent on B, is voiced there as the
// completion (queued, speaking, delivered at attempt 1) — the new model never made the call, so
// it gets no function output and the caller hears the completion turn.
func TestVoiceSessionMovesToAnotherNode(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)

	vs := newVoiceSession(t, a, true)
	j := vs.startJob("upload")
	hostToken, hostSeen := vs.hostW.str("resume_token"), vs.host.lastSeqSeen()
	callerToken, callerSeen := vs.callerW.str("resume_token"), vs.caller.lastSeqSeen()
	a.Close(false)
	for _, c := range []*conn{vs.host, vs.caller} {
		if code := c.waitClosed(); code != broker.StatusServiceRestart {
			t.Fatalf("SPEC 18: %s closed with %d, want 1012", c.name, code)
		}
	}

	vs.resumeOn(b, hostToken, hostSeen, callerToken, callerSeen)
	dr := vs.host.expect(typ("tool_deferred_resume"))
	if jobs, _ := dr.F.M["jobs"].([]any); len(jobs) != 1 {
		t.Fatalf("SPEC 10: tool_deferred_resume on node B: %s, want the upload job", dr.F)
	}
	from := vs.caller.mark()
	vs.result(j, "uploaded")
	vs.expectNarrations(j.callID, "completion", 0, "queued/1", "speaking/1", "delivered/1")
	vs.hear(from, "upload is done: uploaded")
	vs.host.never(typ("tool_job_delivery_failed"), "a delivered completion")
}

// TestVoiceCallerOnAnotherNode covers SPEC 15's relay for a voice session: the session and its
// host are on node A, and the caller resumes on node B, which relays its frames to A and A's
// agent audio back — the hand-off and the completion are heard whole through node B, frame by
// frame as the scripted model speaks them.
func TestVoiceCallerOnAnotherNode(t *testing.T) {
	t.Parallel()
	vs := callerThroughAnotherNode(t)
	j := vs.startJob("upload") // the caller's turn through B, the hand-off heard through B
	from := vs.caller.mark()
	vs.result(j, "uploaded")
	vs.expectNarrations(j.callID, "completion", 0, "queued/1", "speaking/1", "delivered/1")
	vs.hear(from, "upload is done: uploaded")
}

// TestVoiceCallerAudioOnAnotherNode: the caller's *audio* crosses nodes too (SPEC 15, 17). The
// caller resumes on node B, which relays its binary µ-law frames to node A, where the session's
// VAD hears the caller talk: a milestone that arrives meanwhile is held until the caller has
// been quiet for the grace, then spoken and heard through B (milestoneHeldWhileCallerSpeaks).
func TestVoiceCallerAudioOnAnotherNode(t *testing.T) {
	t.Parallel()
	vs := callerThroughAnotherNode(t)
	milestoneHeldWhileCallerSpeaks(t, vs)
}

// TestVoiceSessionSurvivesNodeKill covers SPEC 15 for a voice session whose node is killed
// (nothing parked, connections cut) while a deferred job runs: once node A's lease has run out,
// node B takes the session over from the journal; the host and the caller resume there, B
// starts a model of its own that adopts the job, and the job's result, sent on B, is voiced as
// the completion.
func TestVoiceSessionSurvivesNodeKill(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, 900*time.Millisecond)
	vs := newVoiceSession(t, a, true)
	j := vs.startJob("upload")
	hostToken, hostSeen := vs.hostW.str("resume_token"), vs.host.lastSeqSeen()
	callerToken, callerSeen := vs.callerW.str("resume_token"), vs.caller.lastSeqSeen()
	a.Kill()

	// Node B's sweep takes the session over once A's lease has run out.
	waitTakenOver(t, b, vs.sid)
	vs.resumeOn(b, hostToken, hostSeen, callerToken, callerSeen)
	dr := vs.host.expect(typ("tool_deferred_resume"))
	if jobs, _ := dr.F.M["jobs"].([]any); len(jobs) != 1 {
		t.Fatalf("SPEC 10: tool_deferred_resume on node B: %s, want the upload job", dr.F)
	}
	from := vs.caller.mark()
	vs.result(j, "uploaded")
	vs.expectNarrations(j.callID, "completion", 0, "queued/1", "speaking/1", "delivered/1")
	vs.hear(from, "upload is done: uploaded")
}

// waitTakenOver waits until node n's timeline of session sid, read from the store, shows that it
// took the session over from a node that died (its sweep does once the lease has run out).
func waitTakenOver(t *testing.T, n *brokertest.Broker, sid string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		es, err := n.Node.Engine().Timeline(context.Background(), brokertest.TenantA, sid, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if text, _ := e.Detail["text"].(string); e.Kind == "notice" && strings.HasPrefix(text, "session taken over by this node") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("SPEC 15: node B did not take the killed node's voice session over within 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// resumeOn resumes the session's host and caller on node b with their tokens and last seqs.
func (vs *voiceSession) resumeOn(b *brokertest.Broker, hostToken string, hostSeen int64, callerToken string, callerSeen int64) {
	vs.t.Helper()
	vs.b = b
	vs.host = dial(vs.t, b.WSURL, "host on B")
	if w := vs.host.hello(map[string]any{"role": "host", "session_id": vs.sid, "resume_token": hostToken, "last_seq": hostSeen}); w.Type != "welcome" {
		vs.t.Fatalf("SPEC 10: the host's resume on node B answered %s", w)
	}
	vs.caller = dial(vs.t, b.WSURL, "caller on B")
	if w := vs.caller.hello(map[string]any{"role": "caller", "session_id": vs.sid, "resume_token": callerToken, "last_seq": callerSeen}); w.Type != "welcome" {
		vs.t.Fatalf("SPEC 10: the caller's resume on node B answered %s", w)
	}
}

// TestQueuedCompletionSurvivesNodeKill covers SPEC 15's "narrations that were in flight count
// as failed attempts" from the other side: a job's completion is queued on node A while the
// caller talks, and node A renews its lease after the job ended — so only the journal can tell
// the completion was never voiced — then A is killed. Node B takes the session over and voices
// the completion, as its first attempt (it was queued, never spoken), once the caller is back.
func TestQueuedCompletionSurvivesNodeKill(t *testing.T) {
	t.Parallel()
	const ttl = 900 * time.Millisecond
	a, b := twoNodes(t, ttl)
	vs := newVoiceSession(t, a, true)
	j := vs.startJob("upload")
	vs.talk() // the caller holds the floor
	vs.result(j, "uploaded")
	vs.host.expect(narr(j.callID, "completion", "queued"))
	time.Sleep(ttl) // A renews its lease (every ttl/3) after the job ended
	vs.host.absent(0, narr(j.callID, "completion", "speaking"), "SPEC 8: a completion spoken while the caller talks")
	hostToken, hostSeen := vs.hostW.str("resume_token"), vs.host.lastSeqSeen()
	callerToken, callerSeen := vs.callerW.str("resume_token"), vs.caller.lastSeqSeen()
	a.Kill()

	waitTakenOver(t, b, vs.sid)
	vs.resumeOn(b, hostToken, hostSeen, callerToken, callerSeen)
	from := vs.caller.mark()
	vs.expectNarrations(j.callID, "completion", 0, "queued/1", "speaking/1", "delivered/1")
	vs.hear(from, "upload is done: uploaded")
}

// callerThroughAnotherNode starts a voice session on node A whose caller then resumes through
// node B (relayed to A).
func callerThroughAnotherNode(t *testing.T) *voiceSession {
	t.Helper()
	a, b := twoNodes(t)
	a.WaitRelaying(t)
	b.WaitRelaying(t)
	vs := newVoiceSession(t, a, true)
	token, seen := vs.callerW.str("resume_token"), vs.caller.lastSeqSeen()
	vs.caller.close()
	vs.caller = dial(t, b.WSURL, "caller on B")
	if w := vs.caller.hello(map[string]any{"role": "caller", "session_id": vs.sid, "resume_token": token, "last_seq": seen}); w.Type != "welcome" {
		t.Fatalf("SPEC 10, 15: the caller's resume through node B answered %s", w)
	}
	return vs
}
