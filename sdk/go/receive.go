package backchannel

import (
	"encoding/json"
	"reflect"
	"sync"

	"github.com/backchannel-io/backchannel/frames"
)

// This file routes the frames the broker sends, in seq order, on the reader goroutine.

// receive handles one server frame: a duplicate by seq is dropped, an answer goes to its
// request, everything else to its handler and to OnEvent.
func (h *Host) receive(data []byte) {
	f, err := frames.Decode(data)
	if err != nil {
		// A frame of a newer protocol revision, say: it cannot be acted on, but its seq
		// counts as seen so that a resume does not ask for it again.
		var v struct {
			Seq int64 `json:"seq"`
		}
		_ = json.Unmarshal(data, &v)
		h.log.Warn("backchannel: ignoring a frame the SDK cannot decode", "seq", v.Seq, "err", err)
		h.mu.Lock()
		if v.Seq > h.lastSeq {
			h.lastSeq = v.Seq
		}
		h.mu.Unlock()
		return
	}
	rep := replyOf(f)
	if rep.Seq > 0 {
		h.mu.Lock()
		last := h.lastSeq
		h.mu.Unlock()
		if rep.Seq <= last {
			h.log.Debug("backchannel: dropping a frame seen before", "type", f.FrameType(), "seq", rep.Seq)
			return
		}
		if rep.Seq != last+1 && last > 0 {
			h.log.Warn("backchannel: seq gap", "after", last, "got", rep.Seq)
		}
	}
	h.route(f, rep.Ref)
	if rep.Seq > 0 {
		h.mu.Lock()
		h.lastSeq = rep.Seq
		h.mu.Unlock()
		h.state.touch()
	}
}

// replyType is the type every server frame embeds for its ref and seq.
var replyType = reflect.TypeFor[frames.Reply]()

// replyIndex caches embedded's lookups of replyType.
var replyIndex sync.Map

// replyOf returns the ref and seq of a server frame (a pointer, as frames.Decode returns). It
// runs for every frame received: it neither allocates nor searches the struct's fields again.
func replyOf(f frames.Frame) frames.Reply {
	if r, ok := embedded(f, replyType, &replyIndex); ok && r.CanAddr() {
		return *r.Addr().Interface().(*frames.Reply)
	}
	return frames.Reply{}
}

// embedded returns the field of type typ (frames.Request or frames.Reply) that the struct f
// points to embeds. cache holds, per struct type, the field's index ([]int; nil for none).
func embedded(f frames.Frame, typ reflect.Type, cache *sync.Map) (reflect.Value, bool) {
	v := reflect.ValueOf(f)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	v = v.Elem()
	idx, ok := cache.Load(v.Type())
	if !ok {
		var found []int
		if sf, ok := v.Type().FieldByName(typ.Name()); ok && sf.Anonymous && sf.Type == typ {
			found = sf.Index
		}
		idx, _ = cache.LoadOrStore(v.Type(), found)
	}
	index := idx.([]int)
	if index == nil {
		return reflect.Value{}, false
	}
	return v.FieldByIndex(index), true
}

func (h *Host) route(f frames.Frame, ref string) {
	if ref != "" && h.answer(ref, f) {
		return
	}
	switch f := f.(type) {
	case *frames.ToolCall:
		h.onToolCall(f)
	case *frames.ToolCancel:
		h.onToolCancel(f)
	case *frames.ToolInteractionAnswer:
		h.onInteractionAnswer(f)
	case *frames.ToolDeferredResume:
		h.onDeferredResume(f)
	case *frames.SessionEnded:
		h.events.push(Event{Kind: EventFrame, Frame: f})
		h.stop(&SessionEndedError{Reason: f.Reason})
		return
	case *frames.Error:
		h.log.Warn("backchannel: error frame from the broker", "code", f.Code, "message", f.Message, "ref", ref)
		if ref == "" && f.Code == frames.CodeLimitExceeded {
			h.failUnconfirmed(f)
		}
	}
	h.events.push(Event{Kind: EventFrame, Frame: f})
}

// onToolCall starts the handler of a call on its own goroutine.
func (h *Host) onToolCall(f *frames.ToolCall) {
	h.mu.Lock()
	if h.stopped || h.calls[f.CallID] != nil || h.jobs[f.CallID] != nil {
		h.mu.Unlock()
		return
	}
	handler := h.handlers[f.Name]
	c := newCall(h, f)
	h.calls[f.CallID] = c
	h.mu.Unlock()
	go h.runCall(c, handler)
}

// onToolCancel stops a call's handler and its job (SPEC 11).
func (h *Host) onToolCancel(f *frames.ToolCancel) {
	cause := &CancelledError{Reason: f.Reason}
	h.mu.Lock()
	c := h.calls[f.CallID]
	if c != nil {
		c.cancelled = true
	}
	j := h.jobs[f.CallID]
	if j != nil {
		j.reason = f.Reason
		h.forgetJobLocked(j)
	}
	h.mu.Unlock()
	if c != nil {
		c.cancel(cause)
	}
	if j != nil {
		j.cancel(cause) // before Cancelled closes, so that the context tells why
		close(j.cancelled)
		j.end(cause)
	}
}

// onInteractionAnswer hands an answer to its job (SPEC 9).
func (h *Host) onInteractionAnswer(f *frames.ToolInteractionAnswer) {
	h.mu.Lock()
	j := h.jobs[f.CallID]
	h.mu.Unlock()
	if j == nil {
		h.log.Warn("backchannel: interaction answer for a job this host does not know", "call_id", f.CallID, "handle", f.Handle)
		return
	}
	j.answers.push(InteractionAnswer{InteractionID: f.InteractionID, Option: f.Option, Text: f.Text})
}

// onDeferredResume re-attaches the slot's deferred jobs after a resume (SPEC 10): known jobs
// keep their *Job, unknown ones go to Options.OnResume, and known jobs the list leaves out
// have ended.
func (h *Host) onDeferredResume(f *frames.ToolDeferredResume) {
	var news []resumedJob
	var gone []*Job
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return
	}
	h.sawDeferredResume = true
	listed := make(map[string]bool, len(f.Jobs))
	for _, rj := range f.Jobs {
		listed[rj.CallID] = true
		if h.jobs[rj.CallID] != nil {
			continue
		}
		j := h.newJobLocked(rj.CallID, rj.Handle, rj.Name, rj.Arguments, rj.StatusLabel, rj.DeadlineMS)
		if c := h.calls[rj.CallID]; c != nil {
			// After a restart the replayed tool_call started the handler again: it takes the
			// job over by deferring it again (same handle, accepted again); if it does not,
			// the job goes to OnResume when it returns (runCall). One worker either way.
			c.resumed = &resumedJob{j, rj}
			continue
		}
		news = append(news, resumedJob{j, rj})
	}
	for id, j := range h.jobs {
		if !listed[id] {
			gone = append(gone, j)
		}
	}
	for _, j := range gone {
		h.forgetJobLocked(j)
	}
	h.mu.Unlock()
	for _, j := range gone {
		j.end(errJobEnded)
	}
	for _, n := range news {
		h.resumeJob(n)
	}
}

// resumeJob hands a job this host did not know to Options.OnResume.
func (h *Host) resumeJob(n resumedJob) {
	if h.opts.OnResume == nil {
		h.log.Warn("backchannel: a deferred job was resumed but Options.OnResume is not set; it will time out unless finished",
			"handle", n.job.Handle, "call_id", n.job.CallID)
		return
	}
	go h.opts.OnResume(n.job.Context(), n.job, n.info)
}
