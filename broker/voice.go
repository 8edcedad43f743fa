package broker

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/broker/voice"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
	"github.com/backchannel-io/backchannel/permissions"
)

// A session with a caller has a voice side (package voice: the rules of SPEC 8, 9, 11, 12 and
// 17, with no I/O). This file connects the two: voiceEnv is the voice side's Env, backed by the
// session's clock, slots, caller connection, job engine and the node's verifier; modelEvents
// hands the model's events to it on the session's event loop.

// startVoice starts the session's model when its first caller attaches (SPEC 10).
func (s *Session) startVoice() *voice.Voice {
	factory := s.node.cfg.Models[s.modelKind()]
	if factory == nil {
		s.node.log.Error("broker: no model for the session", "session", s.id, "kind", s.modelKind())
		return nil
	}
	m, err := factory(s.node.ctx, model.Config{Kind: s.modelKind(), Instructions: s.modelCfg.Instructions, Voice: s.modelCfg.Voice}, &modelEvents{s: s})
	if err != nil {
		s.node.log.Error("broker: starting the model", "session", s.id, "err", err)
		s.record(jobs.KindNotice, map[string]any{"text": "model failed to start", "error": err.Error()})
		return nil
	}
	cfg := s.node.cfg
	v := voice.New(voiceEnv{s}, m, voice.Options{Grace: cfg.FloorGrace, MaxWait: cfg.NarrationMaxWait, ReaskAfter: cfg.ReaskAfter,
		Log: s.node.log.With("session", s.id)})
	v.DeclareTools(s.voiceTools())
	return v
}

// modelKind is the session's model kind (SPEC 3.1: absent means the server's --model).
func (s *Session) modelKind() string {
	if s.modelCfg.Kind != "" {
		return s.modelCfg.Kind
	}
	return s.node.cfg.DefaultModel
}

// adoptVoiceJobs has a taken-back session's voice side adopt the open jobs the model of the
// earlier node started and the completions it had not voiced yet (voice.Voice.Adopt).
func (s *Session) adoptVoiceJobs() {
	open, err := s.engine().OpenJobs(s.ctx(), s.tenant, s.id)
	if err != nil {
		s.node.log.Error("broker: listing the open jobs of a taken-back session", "session", s.id, "err", err)
	}
	s.voice.Adopt(open, s.parked)
	s.parked = nil
}

// voiceTools lists the session's host tools for the model, each name once.
func (s *Session) voiceTools() []model.Tool {
	seen := map[string]bool{}
	var tools []model.Tool
	for _, sl := range s.slots {
		for name, t := range sl.tools {
			if !seen[name] {
				seen[name] = true
				tools = append(tools, model.Tool{Name: name, Description: t.Decl.Description, Parameters: t.Decl.Parameters})
			}
		}
	}
	return tools
}

// injectVoice queues a host's inject (SPEC 8); a session with no voice side rejects it.
func (s *Session) injectVoice(sl *Slot, f *frames.Inject) {
	if s.voice == nil {
		e := frames.Errorf(frames.CodeInjectRejected, "this session has no voice agent to speak the inject")
		s.sendError(sl, f.ID, e)
		return
	}
	s.voice.Inject(sl.id, f)
}

// voiceEnv is a session as its voice side's Env.
type voiceEnv struct{ s *Session }

// Now implements voice.Env.
func (e voiceEnv) Now() time.Time { return e.s.now() }

// After implements voice.Env.
func (e voiceEnv) After(d time.Duration, fn func()) func() {
	t := e.s.after(d, fn)
	return func() { t.Stop() }
}

// Every implements voice.Env: a ticker of the node's clock whose ticks are events of the
// session. It runs only while audio waits to be played (voice.Voice stops it), so a voice
// session with nothing to say costs no goroutine and no timer.
//
// A ticker drops the ticks its goroutine was not there to receive (the machine busy for more
// than a period): each one missed would delay the rest of the response by a frame for good.
// The ticks say when they were due, so the ones dropped are posted with the next one (at most
// maxReplayedTicks at a time): the playout keeps its schedule after a hiccup.
func (e voiceEnv) Every(d time.Duration, fn func()) func() {
	t := e.s.node.cfg.Clock.NewTicker(d)
	end := make(chan struct{})
	s := e.s
	go func() {
		var last time.Time // the due time of the latest tick posted
		for {
			select {
			case <-end:
				return
			case at := <-t.C():
				n := 1
				if !last.IsZero() {
					n = min(max(int((at.Sub(last)+d/2)/d), 1), maxReplayedTicks)
				}
				last = at
				for range n {
					s.post(fn)
				}
			}
		}
	}()
	return func() {
		t.Stop()
		close(end)
	}
}

// maxReplayedTicks bounds the ticks one tick posts (its own and the dropped ones before it):
// 100 ms of audio, no more in one burst.
const maxReplayedTicks = 5

// SendToSlot implements voice.Env.
func (e voiceEnv) SendToSlot(slot string, f frames.Frame) { e.s.sendToSlot(slot, f) }

// ToCaller implements voice.Env.
func (e voiceEnv) ToCaller(f frames.Frame) { e.s.toCaller(f) }

// SendAudio implements voice.Env: behind the caller's frames still waiting for the journal
// (held.go), so that a transcript and its audio reach the caller in the order they were made.
func (e voiceEnv) SendAudio(frame []byte, due time.Time) bool {
	c := e.s.caller
	if c == nil || c.client == nil {
		return false
	}
	e.s.holdAudio(c, frame, due)
	return true
}

// CutAudio implements voice.Env: the audio waiting behind frames the journal does not have
// yet is dropped (held.go).
func (e voiceEnv) CutAudio() { e.s.dropHeldAudio() }

// writeAudio writes agent audio due at due to the caller's connection c. A transport that
// writes the audio itself in real time (the WebRTC peer) observes its delay when it writes it;
// for any other the frame is written now.
func (s *Session) writeAudio(c *Client, frame []byte, due time.Time) {
	if ds, ok := c.tr.(AudioDueSender); ok {
		ds.SendAudioDue(frame, due)
		return
	}
	c.tr.SendAudio(frame)
	s.node.metrics.audioWritten(s.now().Sub(due))
}

// Record implements voice.Env.
func (e voiceEnv) Record(callID, handle, kind string, detail map[string]any) {
	e.s.recordAbout(callID, handle, kind, detail)
}

// StartCall implements voice.Env: the checks of SPEC 4, then the job, dispatched unless it
// awaits spoken permission.
func (e voiceEnv) StartCall(modelCallID, name string, args json.RawMessage) (voice.StartedCall, string) {
	s := e.s
	sl, tool := s.route(name)
	if sl == nil {
		return voice.StartedCall{}, fmt.Sprintf("Tool %s is not available", name)
	}
	if msg := tool.checkArguments(args); msg != "" {
		return voice.StartedCall{}, msg
	}
	if s.openJobs >= s.node.cfg.Limits.MaxOpenJobs {
		return voice.StartedCall{}, fmt.Sprintf("Too many open tool calls in this session (limit %d)", s.node.cfg.Limits.MaxOpenJobs)
	}
	fo := s.callFrameOut(sl, tool)
	j, err := s.engine().Call(s.ctx(), jobs.NewCall{Tenant: s.tenant, SessionID: s.id, Slot: sl.id, Tool: tool.Job,
		Arguments: args, AgentCallID: modelCallID, Frame: fo})
	if err != nil {
		return voice.StartedCall{}, "the tool call could not be started; try again"
	}
	s.openJobs++
	if j.State != jobs.AwaitingPermission {
		s.dispatchOut(sl, tool, j, fo)
	}
	return voice.StartedCall{CallID: j.CallID, Slot: sl.id, State: j.State, Notify: tool.Job.NotifyOnComplete}, ""
}

// Dispatch implements voice.Env.
func (e voiceEnv) Dispatch(j *jobs.Job) {
	if sl := e.s.slots[j.Slot]; sl != nil && sl.tools[j.Tool.Name] != nil {
		e.s.dispatch(sl, sl.tools[j.Tool.Name], j)
	}
}

// CancelJob implements voice.Env. A handle never has the form of a broker call id (SPEC 6:
// handle_reserved), so the form of ref says which it is.
func (e voiceEnv) CancelJob(ref string) frames.CancelResult {
	s := e.s
	a := s.addr(ref)
	if !jobs.IsBrokerCallID(ref) {
		a = jobs.Addr{Tenant: s.tenant, SessionID: s.id, Handle: ref}
	}
	res, _, err := s.engine().Cancel(s.ctx(), a, frames.CancelCallerRequest)
	if err != nil {
		return frames.CancelResultUnknownCall
	}
	return res
}

// AnswerInteraction implements voice.Env.
func (e voiceEnv) AnswerInteraction(callID, interactionID, option, text string) (frames.InteractionUpdateResult, error) {
	return e.s.answerInteraction(callID, interactionID, option, text)
}

// PermissionAsked implements voice.Env: the window starts at the job engine's time.
func (e voiceEnv) PermissionAsked(callID string) error {
	s := e.s
	return s.engine().PermissionAsked(s.ctx(), s.addr(callID), s.engine().Now())
}

// Decide implements voice.Env.
func (e voiceEnv) Decide(callID string, d jobs.Decision) error {
	return e.s.engine().Permission(e.s.ctx(), e.s.addr(callID), d)
}

// Verify implements voice.Env.
func (e voiceEnv) Verify(a permissions.Action, reply string) (permissions.Judgement, error) {
	return e.s.node.cfg.Verifier.Verify(e.s.ctx(), a, reply)
}

// BargedIn implements voice.Env.
func (e voiceEnv) BargedIn(d time.Duration) { e.s.node.metrics.bargeIn.Observe(d.Seconds()) }

// NarrationStarted implements voice.Env.
func (e voiceEnv) NarrationStarted(d time.Duration) {
	e.s.node.metrics.narrationDelay.Observe(d.Seconds())
}

// modelEvents posts a model's events to its session's event loop, for its voice side.
type modelEvents struct{ s *Session }

func (e *modelEvents) on(fn func(v *voice.Voice)) {
	s := e.s
	s.post(func() {
		if s.voice != nil && !s.ended {
			fn(s.voice)
		}
	})
}

// SpeechStarted implements model.Events: the caller speaks since now, though the event runs
// later.
func (e *modelEvents) SpeechStarted() {
	at := e.s.now()
	e.on(func(v *voice.Voice) { v.SpeechStarted(at) })
}

// SpeechStopped implements model.Events.
func (e *modelEvents) SpeechStopped() { e.on((*voice.Voice).SpeechStopped) }

// CallerTranscript implements model.Events.
func (e *modelEvents) CallerTranscript(text string, final bool) {
	e.on(func(v *voice.Voice) { v.CallerTranscript(text, final) })
}

// ResponseStarted implements model.Events.
func (e *modelEvents) ResponseStarted(id string) {
	e.on(func(v *voice.Voice) { v.ResponseStarted(id) })
}

// Audio implements model.Events: its frames are due from now, though the event runs later.
func (e *modelEvents) Audio(id string, chunk []byte) {
	at := e.s.now()
	e.on(func(v *voice.Voice) { v.AudioAt(id, chunk, at) })
}

// Transcript implements model.Events.
func (e *modelEvents) Transcript(id, text string, final bool) {
	e.on(func(v *voice.Voice) { v.Transcript(id, text, final) })
}

// ResponseDone implements model.Events.
func (e *modelEvents) ResponseDone(id string, cancelled bool, err error) {
	e.on(func(v *voice.Voice) { v.ResponseDone(id, cancelled, err) })
}

// ToolCall implements model.Events.
func (e *modelEvents) ToolCall(callID, name string, args json.RawMessage) {
	e.on(func(v *voice.Voice) { v.ToolCall(callID, name, args) })
}

// Error implements model.Events: the model connection failed (the timeline shows it).
func (e *modelEvents) Error(err error) {
	s := e.s
	s.post(func() {
		s.record(jobs.KindNotice, map[string]any{"text": "model error", "error": err.Error()})
	})
}

// toCaller sends a frame to the caller's slot.
func (s *Session) toCaller(f frames.Frame) {
	if s.caller != nil {
		s.send(s.caller, f)
	}
}

// sendToSlot sends a frame to a slot of the session, if it still exists. A voice item knows the
// slot its frames go to (a job's slot never changes), so no store read is needed per frame.
func (s *Session) sendToSlot(id string, f frames.Frame) {
	if sl := s.slots[id]; sl != nil {
		s.send(sl, f)
	}
}
