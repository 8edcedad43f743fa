package sim

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/backchannel-io/backchannel/internal/g711"
)

// Response is the record of one response of the session.
type Response struct {
	ID              string
	Metadata        map[string]string
	Instructions    string
	ServerInitiated bool   // started by the server (VAD, ClashNextResponse), not by response.create
	Text            string // what it said so far (the transcript)
	Muted           bool   // it said nothing (`mute N`)
	Tool            string // the function it called, if any
	Arguments       string
	CallID          string
	Status          string // in_progress, completed, cancelled, failed
	Reason          string // why it was cancelled (client_cancelled, turn_detected) or failed (an error code)
	ToolChoice      string // the tool_choice of response.create, if any
	AudioMS         int64
}

// Responses returns the records of the session's responses, oldest first.
func (s *Session) Responses() []Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Response, len(s.responses))
	for i, r := range s.responses {
		out[i] = *r
	}
	return out
}

// responseParams are the parameters of response.create the simulator reads.
type responseParams struct {
	Instructions *string           `json:"instructions"`
	Metadata     map[string]string `json:"metadata"`
	Conversation string            `json:"conversation"`
	ToolChoice   json.RawMessage   `json:"tool_choice"`
}

// response is a response in progress.
type response struct {
	id       string
	rec      *Response
	meta     map[string]string
	plan     plan
	item     *Item
	finished bool
	stop     chan struct{}
}

// end marks the response finished and stops its goroutine.
func (r *response) end() {
	if !r.finished {
		r.finished = true
		close(r.stop)
	}
}

// wait pauses for d; false when the response ended meanwhile.
func (r *response) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.stop:
		return false
	case <-t.C:
		return true
	}
}

// responseCreateLocked applies response.create: one response at a time in the default
// conversation. s.mu is held.
func (s *Session) responseCreateLocked(eventID string, b []byte) {
	var ev struct {
		Response *responseParams `json:"response"`
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		s.errorLocked(eventID, "invalid_request_error", "invalid_value", "Malformed response parameters: "+err.Error(), "response")
		return
	}
	var p responseParams
	if ev.Response != nil {
		p = *ev.Response
	}
	if len(p.Metadata) > 16 {
		s.errorLocked(eventID, "invalid_request_error", "invalid_value", "metadata has more than 16 pairs.", "response.metadata")
		return
	}
	for k, v := range p.Metadata {
		if len(k) > 64 || len(v) > 512 {
			s.errorLocked(eventID, "invalid_request_error", "invalid_value", "metadata keys are at most 64 characters and values at most 512.", "response.metadata")
			return
		}
	}
	if p.Conversation != "" && p.Conversation != "auto" {
		s.errorLocked(eventID, "invalid_request_error", "invalid_value", "The simulator supports responses in the default conversation only.", "response.conversation")
		return
	}
	if s.clash {
		s.clash = false
		if s.active == nil {
			s.startResponseLocked(responseParams{}, true)
		}
	}
	if s.active != nil {
		s.errorLocked(eventID, "invalid_request_error", "conversation_already_has_active_response",
			fmt.Sprintf("Conversation already has an active response in progress: %s. Wait until the response is finished before creating a new one.", s.active.id), "")
		return
	}
	s.startResponseLocked(p, false)
}

// responseCancelLocked applies response.cancel. s.mu is held.
func (s *Session) responseCancelLocked(eventID string, b []byte) {
	var ev struct {
		ResponseID string `json:"response_id"`
	}
	_ = json.Unmarshal(b, &ev)
	r := s.active
	if r == nil || (ev.ResponseID != "" && ev.ResponseID != r.id) {
		s.errorLocked(eventID, "invalid_request_error", "response_cancel_not_active", "Cancellation failed: no active response found", "")
		return
	}
	s.cancelLocked(r, "client_cancelled")
}

// startResponseLocked starts a response: response.created now, its output from a goroutine.
// s.mu is held.
func (s *Session) startResponseLocked(p responseParams, server bool) *response {
	r := &response{id: "resp_" + randomID(), stop: make(chan struct{}), meta: p.Metadata}
	r.rec = &Response{ID: r.id, ServerInitiated: server, Status: "in_progress", Metadata: map[string]string{}}
	for k, v := range p.Metadata {
		r.rec.Metadata[k] = v
	}
	if p.Instructions != nil {
		r.rec.Instructions = *p.Instructions
	}
	if p.ToolChoice != nil {
		var choice string
		if json.Unmarshal(p.ToolChoice, &choice) == nil {
			r.rec.ToolChoice = choice
		} else {
			r.rec.ToolChoice = string(p.ToolChoice)
		}
	}
	if s.gone {
		r.end()
		return r
	}
	r.plan = s.planLocked(p)
	if s.failNext != "" {
		r.plan = plan{fail: s.failNext}
		s.failNext = ""
	}
	r.rec.Muted = r.plan.silent
	s.responses = append(s.responses, r.rec)
	s.active = r
	s.sendLocked(map[string]any{"type": "response.created", "response": s.responseObjectLocked(r, "in_progress", nil)})
	s.wg.Add(1)
	go s.play(r)
	return r
}

// responseObjectLocked is the response as events describe it (RealtimeResponse).
func (s *Session) responseObjectLocked(r *response, status string, details map[string]any) map[string]any {
	output := []any{}
	if r.item != nil && status != "in_progress" {
		output = append(output, r.item.object())
	}
	o := map[string]any{"id": r.id, "object": "realtime.response", "status": status, "output": output,
		"conversation_id": "conv_" + s.ID[len("sess_"):], "output_modalities": []string{"audio"}, "max_output_tokens": "inf",
		"audio":    map[string]any{"output": map[string]any{"format": formatObject(s.cfg.OutputFormat), "voice": s.cfg.Voice}},
		"metadata": nil}
	if r.meta != nil {
		o["metadata"] = r.meta
	}
	if details != nil {
		o["status_details"] = details
	}
	return o
}

// play produces the response's output.
func (s *Session) play(r *response) {
	defer s.wg.Done()
	switch {
	case r.plan.call != nil:
		s.playCall(r)
	case r.plan.silent, r.plan.fail != "":
		if r.wait(s.srv.opts.ChunkDelay) {
			s.mu.Lock()
			if !r.finished {
				if r.plan.fail != "" {
					s.finishLocked(r, "failed", r.plan.fail)
				} else {
					s.finishLocked(r, "completed", "")
				}
			}
			s.mu.Unlock()
		}
	default:
		s.playSpeech(r)
	}
}

// pieces splits speech into words, each with the space after it, so that the pieces join to
// the text.
var pieces = regexp.MustCompile(`\s*\S+\s*`)

// playSpeech says the plan's text: audio and transcript deltas, a word at a time.
func (s *Session) playSpeech(r *response) {
	o := s.srv.opts
	text := r.plan.text
	s.mu.Lock()
	if r.finished {
		s.mu.Unlock()
		return
	}
	it := &Item{ID: "item_" + randomID(), Type: "message", Role: "assistant", Status: "in_progress", Audio: true}
	r.item = it
	prev := s.previousIDLocked()
	s.items = append(s.items, it)
	s.sendLocked(map[string]any{"type": "response.output_item.added", "response_id": r.id, "output_index": 0, "item": it.object()})
	s.sendLocked(map[string]any{"type": "conversation.item.added", "previous_item_id": prev, "item": it.object()})
	s.sendLocked(map[string]any{"type": "response.content_part.added", "response_id": r.id, "item_id": it.ID, "output_index": 0, "content_index": 0,
		"part": map[string]any{"type": "audio", "transcript": ""}})
	s.mu.Unlock()

	words := pieces.FindAllString(text, -1)
	total := max(len(words)*o.WordMS, MinSpeechMS)
	if len(words) == 0 {
		words = []string{text}
	}
	for i, w := range words {
		ms := o.WordMS
		if i == len(words)-1 {
			ms = total - o.WordMS*(len(words)-1)
		}
		if !r.wait(o.ChunkDelay) {
			return
		}
		s.mu.Lock()
		if r.finished {
			s.mu.Unlock()
			return
		}
		audio := base64.StdEncoding.EncodeToString(g711.Tone(440, ms, 0.3))
		s.sendLocked(map[string]any{"type": "response.output_audio.delta", "response_id": r.id, "item_id": it.ID, "output_index": 0, "content_index": 0, "delta": audio})
		if w != "" {
			s.sendLocked(map[string]any{"type": "response.output_audio_transcript.delta", "response_id": r.id, "item_id": it.ID, "output_index": 0, "content_index": 0, "delta": w})
		}
		it.AudioMS += int64(ms)
		it.Text += w
		r.rec.AudioMS, r.rec.Text = it.AudioMS, it.Text
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.finished {
		return
	}
	it.Status, it.Text = "completed", text
	r.rec.Text = text
	s.sendLocked(map[string]any{"type": "response.output_audio.done", "response_id": r.id, "item_id": it.ID, "output_index": 0, "content_index": 0})
	s.sendLocked(map[string]any{"type": "response.output_audio_transcript.done", "response_id": r.id, "item_id": it.ID, "output_index": 0, "content_index": 0, "transcript": text})
	s.sendLocked(map[string]any{"type": "response.content_part.done", "response_id": r.id, "item_id": it.ID, "output_index": 0, "content_index": 0,
		"part": map[string]any{"type": "audio", "transcript": text}})
	s.sendLocked(map[string]any{"type": "response.output_item.done", "response_id": r.id, "output_index": 0, "item": it.object()})
	s.sendLocked(map[string]any{"type": "conversation.item.done", "item": it.object()})
	s.finishLocked(r, "completed", "")
}

// playCall makes the plan's function call, all at once: a call is short, and is not left
// open to be cut by the caller's next words.
func (s *Session) playCall(r *response) {
	c := r.plan.call
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.finished {
		return
	}
	it := &Item{ID: "item_" + randomID(), Type: "function_call", Status: "in_progress", CallID: "call_" + randomID(), Name: c.name}
	r.item = it
	prev := s.previousIDLocked()
	s.items = append(s.items, it)
	s.sendLocked(map[string]any{"type": "response.output_item.added", "response_id": r.id, "output_index": 0, "item": it.object()})
	s.sendLocked(map[string]any{"type": "conversation.item.added", "previous_item_id": prev, "item": it.object()})
	it.Arguments, it.Status = c.args, "completed"
	r.rec.Tool, r.rec.Arguments, r.rec.CallID = c.name, c.args, it.CallID
	s.sendLocked(map[string]any{"type": "response.function_call_arguments.delta", "response_id": r.id, "item_id": it.ID, "output_index": 0, "call_id": it.CallID, "delta": c.args})
	s.sendLocked(map[string]any{"type": "response.function_call_arguments.done", "response_id": r.id, "item_id": it.ID, "output_index": 0, "call_id": it.CallID,
		"name": c.name, "arguments": c.args})
	s.sendLocked(map[string]any{"type": "response.output_item.done", "response_id": r.id, "output_index": 0, "item": it.object()})
	s.sendLocked(map[string]any{"type": "conversation.item.done", "item": it.object()})
	s.finishLocked(r, "completed", "")
}

// cancelLocked cancels a response in progress: its item ends incomplete. s.mu is held.
func (s *Session) cancelLocked(r *response, reason string) {
	if r.finished {
		return
	}
	if it := r.item; it != nil && it.Status == "in_progress" {
		it.Status = "incomplete"
		s.sendLocked(map[string]any{"type": "response.output_item.done", "response_id": r.id, "output_index": 0, "item": it.object()})
		s.sendLocked(map[string]any{"type": "conversation.item.done", "item": it.object()})
	}
	s.finishLocked(r, "cancelled", reason)
}

// finishLocked ends a response with response.done. s.mu is held.
func (s *Session) finishLocked(r *response, status, reason string) {
	r.end()
	if s.active == r {
		s.active = nil
	}
	r.rec.Status, r.rec.Reason = status, reason
	var details map[string]any
	switch status {
	case "cancelled":
		details = map[string]any{"type": "cancelled", "reason": reason}
	case "failed":
		details = map[string]any{"type": "failed", "error": map[string]any{"type": "server_error", "code": reason}}
	}
	s.sendLocked(map[string]any{"type": "response.done", "response": s.responseObjectLocked(r, status, details)})
}
