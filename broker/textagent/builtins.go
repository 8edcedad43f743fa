package textagent

import (
	"encoding/json"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// cancelCall runs the built-in `cancel {tool_call_id}` (SPEC 13). It never goes to the
// background.
func (a *Agent) cancelCall(k *call, raw json.RawMessage) {
	c := k.conv
	args := map[string]json.RawMessage{}
	_ = json.Unmarshal(raw, &args)
	id := jsonString(args["tool_call_id"])
	t := c.calls[id]
	switch {
	case id == "" || string(args["tool_call_id"]) == `""`:
		a.answerNow(k, ErrorResult(MsgToolCallIDEmpty))
		return
	case t == nil:
		a.answerNow(k, withHeader(ErrorResult(MsgUnknownToolCallID), HeaderToolCallID, id))
		return
	case t.builtin: // a cancel naming itself is a running built-in too
		a.answerNow(k, ErrorResult(MsgToolCallCannotBeCanceled))
		return
	case t.cancelRequested:
		a.answerNow(k, ErrorResult(MsgToolCallAlreadyCanceled))
		return
	case t.finished && t.state == jobs.Cancelled && t.cancelReason == frames.CancelAgentRequest:
		// Cancelled at this conversation's request, which the state never took: a node applied
		// the cancel and died before its answer was journaled (SPEC 15). This is that cancel,
		// sent again; it gets the answer the first would have had.
		t.cancelRequested = true
		a.resettle(t)
		var out Content
		a.answerNow(k, *out.SetBody(BodyCancellationRequested))
		return
	case t.finished:
		a.answerNow(k, ErrorResult(MsgToolCallAlreadyDone))
		return
	}
	t.cancelRequested = true
	res, err := a.env.CancelCall(t.brokerID, frames.CancelAgentRequest)
	switch {
	case err != nil:
		t.cancelRequested = false
		a.answerNow(k, ErrorResult("Tool call cancellation failed; try again"))
		return
	case res == frames.CancelResultAlreadyDone:
		t.cancelRequested = false
		a.answerNow(k, ErrorResult(MsgToolCallAlreadyDone))
		return
	case res == frames.CancelResultAlreadyCanceled:
		a.answerNow(k, ErrorResult(MsgToolCallAlreadyCanceled))
		return
	}
	a.env.Notice("tool call cancellation request", map[string]any{"call_id": t.brokerID, "tool_call_id": t.id, "conversation_id": c.id})
	var out Content
	a.answerNow(k, *out.SetBody(BodyCancellationRequested))
}

// statusCall runs the built-in `status {state, title}` (SPEC 13): an accepted status re-arms
// the reminder and reaches a watching parent as activating input.
func (a *Agent) statusCall(k *call, raw json.RawMessage) {
	c := k.conv
	var args struct {
		State json.RawMessage `json:"state"`
		Title json.RawMessage `json:"title"`
	}
	_ = json.Unmarshal(raw, &args)
	c.timeouts, c.adviceGiven = 0, false
	state, title, err := ValidateStatus(jsonStringOnly(args.State), jsonStringOnly(args.Title))
	if err != nil {
		a.answerNow(k, ErrorResult(err.Error()))
		return
	}
	c.status = state
	c.reminderArmed = true
	var out Content
	a.answerNow(k, *out.SetBody(StatusSetBody(state, title)))
	if c.parent != nil && !c.cancelled {
		a.enqueue(c.parent, &prompt{text: WatchStatusPrompt(c.id, string(state), title), activating: true})
	}
}

// jsonStringOnly returns a JSON string's value and "" for anything else (a non-string state
// or title is invalid like an empty one).
func jsonStringOnly(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
