package broker

import (
	"encoding/json"
	"time"

	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/internal/g711"
	"github.com/backchannel-io/backchannel/jobs"
	"github.com/backchannel-io/backchannel/narration"
)

// voice is the voice side of a session with a caller (SPEC 8, 9, 11, 12, 17): the model, the
// floor and the narration queue, the responses being played to the caller in real time, and
// the jobs the model's tool calls started. Everything runs on the session's event loop.
type voice struct {
	s     *Session
	m     model.Model
	queue narration.Queue
	floor narration.Floor
	vad   vad

	playing []*response // responses in flight, the first one playing
	// finished remembers the ids of the latest responses that ended, so a late event of one
	// (audio or a done after a barge-in ended it for the floor) does not start it again.
	finished recentIDs
	// unheard remembers the latest responses cut before any of their audio was played: their
	// late transcripts are words the caller never heard, and are not shown (SPEC 17).
	unheard recentIDs
	// freedAt is when the floor last freed by a response ending or the caller attaching (the
	// grace after the caller's speech is floor.FreeAt): for the narration start delay metric.
	freedAt time.Time
	ticker  Ticker
	tickEnd chan struct{}
	wake    Timer // the next time the floor may become free, or an item may expire
	soon    Timer // the coalescing wait after an item was queued

	calls       map[string]*voiceCall // by broker call id
	byModel     map[string]*voiceCall // by the model's call id
	asks        map[string]*ask       // open interactions of voice jobs, by interaction id
	asked       int                   // counts asks that started speaking (recency)
	perm        *permission           // the permission ask being judged, if any
	permQueue   []*voiceCall          // jobs waiting for their permission ask
	autoRespond *bool                 // what the model was last told (nil: not yet)
	maxWait     time.Duration
}

// voiceCall is a call the voice model made of a host tool.
type voiceCall struct {
	modelID  string
	brokerID string
	slot     string // the slot serving the job (fixed for its life)
	name     string
	args     json.RawMessage
	label    string // the status_label once deferred, else the tool name
	deferred bool
	answered bool // the model got the call's function output
	state    jobs.State
	handle   string
	notify   bool
}

// ask is an open interaction of a voice job (SPEC 9).
type ask struct {
	id        string
	callID    string
	prompt    string
	options   []string
	attempts  int       // attempts queued so far
	askedSeq  int       // when its narration last started speaking (0: never)
	delivered time.Time // when an attempt was last delivered
	item      *narration.Item
	reask     Timer
}

// response is one model response, played to the caller in real time.
type response struct {
	id          string
	item        *narration.Item // the narration it voices; nil for the model's own responses
	frames      [][]byte        // audio not yet played
	playout     narration.Playout
	modelDone   bool
	failed      error
	interrupted bool
	text        string
	firstFrame  time.Time // when its first frame was sent to the caller (zero: none yet)
}

// itemData is what an item needs to be voiced.
type itemData struct {
	req    model.Request
	handle string
	inject string // the inject frame's id, for an inject
	// slot is where frames about the item go: the slot serving its job (narration lifecycle,
	// delivery failed), or the slot that sent an inject.
	slot string
}

// startVoice starts the session's model when its first caller attaches (SPEC 10).
func (s *Session) startVoice() *voice {
	v := &voice{s: s, calls: make(map[string]*voiceCall), byModel: make(map[string]*voiceCall),
		asks: make(map[string]*ask), maxWait: s.node.cfg.NarrationMaxWait}
	v.floor.Grace = s.node.cfg.FloorGrace
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
	v.m = m
	v.declareTools()
	return v
}

// modelKind is the session's model kind (SPEC 3.1: absent means the server's --model).
func (s *Session) modelKind() string {
	if s.modelCfg.Kind != "" {
		return s.modelCfg.Kind
	}
	return s.node.cfg.DefaultModel
}

// declareTools tells the model the session's tools plus cancel_job.
func (v *voice) declareTools() {
	seen := map[string]bool{}
	var tools []model.Tool
	for _, sl := range v.s.slots {
		for name, t := range sl.tools {
			if !seen[name] {
				seen[name] = true
				tools = append(tools, model.Tool{Name: name, Description: t.Decl.Description, Parameters: t.Decl.Parameters})
			}
		}
	}
	v.m.SetTools(append(tools, model.CancelJobTool))
}

// callerAttached / callerDetached move the floor (SPEC 8: free only with a caller attached).
func (v *voice) callerAttached() {
	v.floor.CallerAttached = true
	v.freedAt = v.s.now()
	v.pump()
}

func (v *voice) callerDetached() {
	v.floor.CallerAttached = false
	v.floor.CallerSpeaking = false
	v.vad = vad{}
	// What is playing can reach nobody now.
	for _, r := range v.playing {
		r.frames = nil
	}
}

// callerText is a caller turn given as text (SPEC 17): speech started, transcript, speech
// stopped. at is when the frame arrived.
func (v *voice) callerText(text string, at time.Time) {
	v.speechStarted(at)
	v.speechStopped()
	v.finalTranscript(text)
}

// callerAudio takes 20 ms of caller audio that arrived at at: the broker's VAD drives the
// floor and barge-in; the model gets the audio too.
func (v *voice) callerAudio(chunk []byte, at time.Time) {
	for len(chunk) > 0 {
		n := min(len(chunk), g711.SamplesPer20ms)
		switch v.vad.feed(chunk[:n]) {
		case +1:
			v.speechStarted(at)
		case -1:
			v.speechStopped()
		}
		chunk = chunk[n:]
	}
}

// speechStarted: the caller speaks, since at (when the audio or frame arrived, or the model
// reported it). A response in flight is barged in on (SPEC 8).
func (v *voice) speechStarted(at time.Time) {
	v.floor.CallerSpeaking = true
	if v.perm != nil {
		v.perm.speechStarted(at)
	}
	for _, r := range v.playing {
		if !r.interrupted {
			r.interrupted = true
			r.frames = nil
			v.m.Cancel(r.id)
		}
	}
	v.settle()
}

// speechStopped: the floor frees after the grace period.
func (v *voice) speechStopped() {
	v.floor.CallerSpeaking = false
	v.floor.SpeechStopped = v.s.now()
	v.pump()
}

// finalTranscript routes a final caller transcript: to the permission verifier while an ask
// waits for its reply (SPEC 12), else to the most recently asked open interaction when it
// answers it (SPEC 9), else to the model as a turn.
func (v *voice) finalTranscript(text string) {
	if v.perm != nil && v.perm.judges(text) {
		return
	}
	if a := v.latestAsk(); a != nil {
		option, ok := jobs.MatchAnswer(text, a.options)
		if !ok {
			v.m.CallerTurn(text, a.options)
			return
		}
		v.answer(a, option, text)
		return
	}
	v.m.CallerTurn(text, nil)
}

// updateAutoRespond turns the model's own responses to caller turns off while a permission ask
// or an asked interaction waits for the caller's reply — the reply goes to the verifier or the
// host, never to the model as a turn (SPEC 9, 12) — and on again otherwise. A turn the broker
// does not consume then reaches the model through CallerTurn.
func (v *voice) updateAutoRespond() {
	want := v.perm == nil && v.latestAsk() == nil
	if v.autoRespond == nil || *v.autoRespond != want {
		v.autoRespond = &want
		v.m.SetAutoRespond(want)
	}
}

// latestAsk is the most recently asked open interaction.
func (v *voice) latestAsk() *ask {
	var best *ask
	for _, a := range v.asks {
		if a.askedSeq > 0 && (best == nil || a.askedSeq > best.askedSeq) {
			best = a
		}
	}
	return best
}

// queueItem queues a narration item (reporting queued) and tries to speak.
func (v *voice) queueItem(it *narration.Item) {
	it.Queued = v.s.now()
	if old := v.queue.Push(it); old != nil {
		v.lifecycle(old, "skipped", "")
	}
	v.lifecycle(it, "queued", "")
	v.pumpSoon()
}

// coalesce is how long a newly queued item waits before it is spoken on a free floor, so that
// events that arrived together — a caller's turn on one connection, a host's result on another
// — are all seen before the highest-priority item is chosen (DESIGN: floor free → request ≤ 10 ms).
const coalesce = 10 * time.Millisecond

// pumpSoon runs pump after the coalescing window.
func (v *voice) pumpSoon() {
	if v.soon != nil {
		return
	}
	v.soon = v.s.after(coalesce, func() {
		v.soon = nil
		v.pump()
	})
}

// pump starts the next queued item when the floor is free (SPEC 8).
func (v *voice) pump() {
	if v.s.ended || v.m == nil {
		return
	}
	v.expire()
	now := v.s.now()
	for v.queue.Len() > 0 && v.floor.Free(now) {
		it := v.queue.Pop()
		d := it.Payload.(*itemData)
		id, err := v.m.Respond(d.req)
		if err != nil {
			v.attemptEnded(it, narration.ModelFailed, false, "")
			continue
		}
		it.Spoken++
		v.observeStart(it, now)
		r := v.responseFor(id)
		if r == nil { // the model named a response that already ended
			v.attemptEnded(it, narration.ModelFailed, false, "")
			continue
		}
		r.item = it
		v.floor.InFlight = true
		if a := v.askOf(it); a != nil {
			v.asked++
			a.askedSeq = v.asked
			v.updateAutoRespond()
		}
		if p := v.perm; p != nil && p.callID == it.CallID && (d.req.Kind == model.PermissionAsk || d.req.Kind == model.Clarification) {
			p.asking(id)
		}
		v.lifecycle(it, "speaking", id)
		v.settle()
		return
	}
	v.settle()
}

// observeStart records how long after the floor was free (with it queued) its response was
// requested.
func (v *voice) observeStart(it *narration.Item, now time.Time) {
	ready := it.Queued
	for _, t := range []time.Time{v.floor.FreeAt(), v.freedAt} {
		if t.After(ready) {
			ready = t
		}
	}
	if d := now.Sub(ready); d >= 0 && !ready.After(now) {
		v.s.node.metrics.narrationDelay.Observe(d.Seconds())
	}
}

// settle arms the wake-up for the next moment the floor may free or an item may expire.
func (v *voice) settle() {
	if v.wake != nil {
		v.wake.Stop()
		v.wake = nil
	}
	if v.queue.Len() == 0 {
		return
	}
	now := v.s.now()
	next := v.queue.Oldest().Add(v.maxWait)
	if at := v.floor.FreeAt(); at.After(now) && at.Before(next) {
		next = at
	}
	v.wake = v.s.after(max(next.Sub(now), time.Millisecond), v.pump)
}

// expire ends the attempts of items that waited longer than the maximum (SPEC 8: floor_timeout).
func (v *voice) expire() {
	deadline := v.s.now().Add(-v.maxWait)
	for _, it := range v.queue.Remove(func(it *narration.Item) bool { return it.Queued.Before(deadline) }) {
		v.attemptEnded(it, narration.NoFloor, false, "")
	}
}

// playingResponse returns the response in flight with id, or nil.
func (v *voice) playingResponse(id string) *response {
	for _, r := range v.playing {
		if r.id == id {
			return r
		}
	}
	return nil
}

// responseFor returns the response with id, starting to track it if it is new; nil when it
// already ended.
func (v *voice) responseFor(id string) *response {
	if r := v.playingResponse(id); r != nil {
		return r
	}
	if v.finished.has(id) {
		return nil
	}
	r := &response{id: id}
	v.playing = append(v.playing, r)
	v.floor.InFlight = true
	return r
}

// lifecycle reports a narration state to the job's host (SPEC 8), for kinds that have one.
func (v *voice) lifecycle(it *narration.Item, state, responseID string) {
	if !it.Kind.Lifecycle() {
		return
	}
	d := it.Payload.(*itemData)
	if vc := v.calls[it.CallID]; vc != nil && d.handle == "" {
		d.handle = vc.handle // deferred since it was queued: every frame from now on has it
	}
	f := &frames.ToolJobNarration{CallID: it.CallID, Handle: d.handle, Kind: narrationKind(it.Kind),
		State: frames.NarrationState(state), Attempt: it.Attempt, ResponseID: responseID}
	if it.Kind == narration.InteractionAsk {
		f.InteractionID = it.Key
	}
	v.s.sendToSlot(d.slot, f)
	switch state {
	case "delivered", "failed", "interrupted", "skipped", "stopped":
		detail := map[string]any{"kind": string(f.Kind), "state": state, "attempt": it.Attempt, "response_id": responseID}
		if f.InteractionID != "" {
			detail["interaction_id"] = f.InteractionID
		}
		v.s.recordAbout(it.CallID, d.handle, jobs.KindNarration, detail)
	}
}

func narrationKind(k narration.Kind) frames.NarrationKind {
	switch k {
	case narration.InteractionAsk:
		return frames.NarrationInteraction
	case narration.Completion:
		return frames.NarrationCompletion
	}
	return frames.NarrationMilestone
}

// ---------------------------------------------------------------------------------------------
// model events

// modelEvents posts a model's events to its session's event loop.
type modelEvents struct{ s *Session }

func (e *modelEvents) on(fn func(v *voice)) {
	s := e.s
	s.post(func() {
		if s.voice != nil && !s.ended {
			fn(s.voice)
		}
	})
}

// SpeechStarted implements model.Events.
func (e *modelEvents) SpeechStarted() {
	at := e.s.now()
	e.on(func(v *voice) { v.speechStarted(at) })
}

// SpeechStopped implements model.Events.
func (e *modelEvents) SpeechStopped() { e.on(func(v *voice) { v.speechStopped() }) }

// CallerTranscript implements model.Events: a final transcript is a caller turn.
func (e *modelEvents) CallerTranscript(text string, final bool) {
	e.on(func(v *voice) {
		if final {
			v.s.toCaller(&frames.Transcript{Role: frames.RoleCaller, Text: text, Final: true})
			v.finalTranscript(text)
		}
	})
}

// ResponseStarted implements model.Events.
func (e *modelEvents) ResponseStarted(id string) { e.on(func(v *voice) { v.responseFor(id) }) }

// recentIDs is a bounded set of the latest ids added to it.
type recentIDs struct {
	order []string
	set   map[string]struct{}
}

// recentIDsKept is how many ended response ids a voice session remembers.
const recentIDsKept = 64

func (r *recentIDs) has(id string) bool { _, ok := r.set[id]; return ok }

func (r *recentIDs) add(id string) {
	if r.set == nil {
		r.set = make(map[string]struct{}, recentIDsKept)
	}
	if r.has(id) {
		return
	}
	if len(r.order) == recentIDsKept {
		delete(r.set, r.order[0])
		r.order = r.order[1:]
	}
	r.order = append(r.order, id)
	r.set[id] = struct{}{}
}

// Audio implements model.Events: the audio is cut into 20 ms frames and played in real time.
func (e *modelEvents) Audio(id string, chunk []byte) {
	e.on(func(v *voice) {
		r := v.responseFor(id)
		if r == nil || r.interrupted || !v.floor.CallerAttached {
			return
		}
		for len(chunk) > 0 {
			n := min(len(chunk), g711.SamplesPer20ms)
			r.frames = append(r.frames, chunk[:n])
			chunk = chunk[n:]
		}
		v.play()
	})
}

// Transcript implements model.Events: the caller sees the agent's words (SPEC 17) — not those
// of a response the caller barged in on before any of it was played.
func (e *modelEvents) Transcript(id, text string, final bool) {
	e.on(func(v *voice) {
		r := v.responseFor(id)
		if (r == nil && v.unheard.has(id)) || (r != nil && r.interrupted && r.firstFrame.IsZero()) {
			return
		}
		if final && r != nil {
			r.text = text
			r.playout.Text = text != ""
		}
		v.s.toCaller(&frames.Transcript{Role: frames.RoleAgent, Text: text, ResponseID: id, Final: final})
	})
}

// ResponseDone implements model.Events.
func (e *modelEvents) ResponseDone(id string, cancelled bool, err error) {
	e.on(func(v *voice) {
		r := v.responseFor(id)
		if r == nil {
			return
		}
		r.modelDone = true
		r.failed = err
		if cancelled {
			r.interrupted = true
		}
		v.play()
	})
}

// ToolCall implements model.Events.
func (e *modelEvents) ToolCall(callID, name string, args json.RawMessage) {
	e.on(func(v *voice) { v.toolCall(callID, name, args) })
}

// Error implements model.Events.
func (e *modelEvents) Error(err error) {
	s := e.s
	s.post(func() {
		s.record(jobs.KindNotice, map[string]any{"text": "model error", "error": err.Error()})
	})
}

// ---------------------------------------------------------------------------------------------
// playing responses in real time

// play plays the first response in flight: one 20 ms frame per tick (SPEC 8: agent audio is
// paced to the caller in real time, so a burst does not end a response early). A response is
// in flight until its last frame was sent.
func (v *voice) play() {
	for len(v.playing) > 0 {
		r := v.playing[0]
		if len(r.frames) > 0 {
			v.startTicker()
			return
		}
		if !r.modelDone && !r.interrupted {
			v.stopTicker()
			return // waiting for more audio or the end
		}
		if r.interrupted && !r.modelDone {
			// Barged in: the model was told to cancel; the response ends now for the floor.
			r.modelDone = true
		}
		v.playing = v.playing[1:]
		v.finished.add(r.id)
		if r.interrupted && r.firstFrame.IsZero() {
			v.unheard.add(r.id)
		}
		v.finish(r)
	}
	v.stopTicker()
	if v.floor.InFlight {
		v.freedAt = v.s.now()
	}
	v.floor.InFlight = false
	v.pump()
}

// startTicker starts the playout clock for a run of audio. The clock runs only while audio
// waits to be played, so a voice session with nothing to say costs no goroutine and no timer;
// its one event function is made per run, not per frame.
func (v *voice) startTicker() {
	if v.ticker != nil {
		return
	}
	t := v.s.node.cfg.Clock.NewTicker(20 * time.Millisecond)
	end := make(chan struct{})
	v.ticker, v.tickEnd = t, end
	s := v.s
	tick := func() {
		if s.voice == v && v.ticker == t { // not a tick of a stopped run
			v.tick()
		}
	}
	go func() {
		for {
			select {
			case <-end:
				return
			case <-t.C():
				s.post(tick)
			}
		}
	}()
	v.tick() // the first frame goes at once
}

// stopTicker stops the playout clock and its goroutine.
func (v *voice) stopTicker() {
	if v.ticker != nil {
		v.ticker.Stop()
		close(v.tickEnd)
		v.ticker, v.tickEnd = nil, nil
	}
}

// tick sends the next frame of the playing response to the caller.
func (v *voice) tick() {
	if len(v.playing) == 0 {
		v.stopTicker()
		return
	}
	r := v.playing[0]
	if len(r.frames) > 0 {
		f := r.frames[0]
		r.frames = r.frames[1:]
		if v.s.caller != nil && v.s.caller.client != nil {
			v.s.caller.client.tr.SendAudio(f)
			r.playout.Add(f)
			if r.firstFrame.IsZero() {
				r.firstFrame = v.s.now()
			}
		}
	}
	if len(r.frames) == 0 {
		v.play()
	}
}

// finish decides what a response that left the floor did for its narration (SPEC 8).
func (v *voice) finish(r *response) {
	it := r.item
	if it == nil {
		return
	}
	audible := r.playout.Delivered(false)
	ending := narration.Played
	switch {
	case r.interrupted:
		ending = narration.Interrupted
	case r.failed != nil:
		ending = narration.ModelFailed
	}
	if it.Kind == narration.PermissionAsk && v.perm != nil {
		v.perm.askEnded(r, audible)
	}
	v.attemptEnded(it, ending, audible, r.id)
}

// attemptEnded reports an attempt's end and retries or gives up by the failure contract.
func (v *voice) attemptEnded(it *narration.Item, e narration.Ending, audible bool, responseID string) {
	o := narration.Decide(it, e, audible)
	v.lifecycle(it, o.State, responseID)
	switch it.Kind {
	case narration.Completion:
		switch {
		case o.Retry:
			v.retry(it)
		case o.Failed:
			// After the second failed attempt: attempts is 2, whether or not they spoke.
			v.deliveryFailed(it, o.Reason, it.Attempt)
		}
	case narration.PermissionAsk:
		if p := v.perm; p != nil && p.callID == it.CallID && p.phase == permQueued && responseID == "" {
			p.notAsked(it, e)
		}
	case narration.InteractionAsk:
		a := v.askOf(it)
		if a == nil {
			return
		}
		a.item = nil
		if o.Counted {
			a.delivered = v.s.now()
			v.armReask(a)
		} else if o.Retry {
			v.queueAsk(a)
		}
	}
}

// retry queues the next attempt of an item.
func (v *voice) retry(it *narration.Item) {
	next := *it
	next.Attempt++
	v.queueItem(&next)
}

// deliveryFailed is the terminal frame of a completion that could not be voiced (SPEC 8):
// attempts is 2 after the second failed attempt, and at session end the number of attempts
// that reached speaking.
func (v *voice) deliveryFailed(it *narration.Item, reason narration.Reason, attempts int) {
	d := it.Payload.(*itemData)
	v.s.sendToSlot(d.slot, &frames.ToolJobDeliveryFailed{CallID: it.CallID, Handle: d.handle,
		Attempts: attempts, Reason: frames.DeliveryFailureReason(reason)})
	v.s.recordAbout(it.CallID, d.handle, jobs.KindDeliveryFailed, map[string]any{"attempts": attempts, "reason": string(reason)})
}

// ending runs when the session ends (SPEC 8): a completion still queued (or being spoken)
// gets tool_job_delivery_failed session_ended, an unspoken inject gets inject_rejected
// (retryable false) — both before session.ended.
func (v *voice) ending() {
	var pending []*narration.Item
	for _, r := range v.playing {
		if r.item != nil {
			pending = append(pending, r.item)
		}
	}
	v.playing = nil
	pending = append(pending, v.queue.Remove(func(*narration.Item) bool { return true })...)
	for _, it := range pending {
		switch it.Kind {
		case narration.Completion:
			v.deliveryFailed(it, narration.SessionEnded, it.Spoken)
		case narration.Inject:
			d := it.Payload.(*itemData)
			e := frames.Errorf(frames.CodeInjectRejected, "the session ended before the inject was spoken")
			e.Ref = d.inject
			v.s.sendToSlot(d.slot, e)
			v.s.record(jobs.KindInjectRejected, map[string]any{"text": d.req.Text, "retryable": false})
		}
	}
	v.stop()
}

// stop stops everything the voice side runs — playout, timers, the model — and sends nothing
// (a node shutting down with a shared store: SPEC 18).
func (v *voice) stop() {
	v.stopTicker()
	v.playing = nil
	if v.wake != nil {
		v.wake.Stop()
	}
	if v.soon != nil {
		v.soon.Stop()
	}
	for _, a := range v.asks {
		if a.reask != nil {
			a.reask.Stop()
		}
	}
	if v.m != nil {
		_ = v.m.Close()
	}
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
