package openai

import (
	"encoding/json"
	"fmt"

	"github.com/backchannel-io/backchannel/broker/model"
)

// pendingCall is a function call of the model that waits for its output.
type pendingCall struct {
	callID string
	name   string
	args   string
	// inConversation: the current connection's conversation holds the call (it was made
	// there, or re-created there after a reconnect), so a function_call_output can answer it.
	inConversation bool
}

// pendingCalls are the model's calls waiting for their output, oldest first. Guarded by
// Model.mu.
type pendingCalls struct {
	list []*pendingCall
	// restoring maps the event id of a function_call item re-created on a new connection to
	// its call id: an error answering it means the conversation does not hold the call.
	restoring map[string]string
}

// maxPendingCalls bounds the calls remembered; the oldest is forgotten first (its output then
// goes out as a function_call_output, which only the connection it was made on knows).
const maxPendingCalls = 128

// add remembers a call the model made on the current connection.
func (p *pendingCalls) add(callID, name, args string) {
	if callID == "" || p.find(callID) != nil {
		return
	}
	if args == "" {
		args = "{}"
	}
	if len(p.list) >= maxPendingCalls {
		p.list = p.list[1:]
	}
	p.list = append(p.list, &pendingCall{callID: callID, name: name, args: args, inConversation: true})
}

// find returns a pending call.
func (p *pendingCalls) find(callID string) *pendingCall {
	for _, c := range p.list {
		if c.callID == callID {
			return c
		}
	}
	return nil
}

// take removes a pending call and returns it (nil when it is not pending).
func (p *pendingCalls) take(callID string) *pendingCall {
	for i, c := range p.list {
		if c.callID == callID {
			p.list = append(p.list[:i:i], p.list[i+1:]...)
			return c
		}
	}
	return nil
}

// leftConversation marks every call as unknown to the conversation (the connection dropped).
func (p *pendingCalls) leftConversation() {
	for _, c := range p.list {
		c.inConversation = false
	}
	p.restoring = nil
}

// notRestored handles an error answering a re-created function_call item: the conversation
// does not hold the call. It reports whether eventID was such an item.
func (p *pendingCalls) notRestored(eventID string) (string, bool) {
	callID, ok := p.restoring[eventID]
	if !ok || eventID == "" {
		return "", false
	}
	delete(p.restoring, eventID)
	if c := p.find(callID); c != nil {
		c.inConversation = false
	}
	return callID, true
}

// ToolResult implements model.Model: a function_call_output item answering the call, then —
// with respond — a response in which the model speaks about it. An error goes to the model
// as the output {"error": MESSAGE}. A call made on an earlier connection is answered the same
// way (the restore re-created it on the new one); should the new conversation not hold it,
// the output goes in as a system message naming the call instead. While the adapter
// reconnects, the result waits for the new connection.
func (m *Model) ToolResult(callID, output string, isError, respond bool) {
	if isError {
		b, _ := json.Marshal(map[string]string{"error": output})
		output = string(b)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.usable() {
		return
	}
	if m.c == nil {
		m.deferLocked("tool result", func() { m.toolResultLocked(callID, output, respond) })
		return
	}
	m.toolResultLocked(callID, output, respond)
}

// toolResultLocked answers a call on the current connection. m.mu is held.
func (m *Model) toolResultLocked(callID, output string, respond bool) {
	var item any = functionCallOutputItem{Type: itemTypeFunctionCallOut, CallID: callID, Output: output}
	if pc := m.calls.take(callID); pc != nil && !pc.inConversation {
		item = messageItem{ID: m.nextID("bc_ctx_"), Type: itemTypeMessage, Role: roleSystem,
			Content: []contentPart{{Type: contentTypeInputText, Text: orphanOutput(pc, output)}}}
	}
	if m.sendLocked(itemCreate{Type: evItemCreate, EventID: m.nextID("bc_evt_"), Item: item}) != nil || !respond {
		return
	}
	m.enqueueLocked(&request{}, KindToolResult, nil)
}

// orphanOutput is the system message that carries the output of a call the conversation does
// not hold.
func orphanOutput(pc *pendingCall, output string) string {
	return fmt.Sprintf("The output of your earlier call of the tool %s (call_id %s, arguments %s), made before the connection was re-established: %s",
		pc.name, pc.callID, pc.args, output)
}

// toolCall reports a function call of the model, and remembers it until its output is given.
// Arguments that are not JSON reach the broker as a JSON string, so that its argument check
// answers the model with the error.
func (m *Model) toolCall(ev *serverEvent) {
	m.mu.Lock()
	silent := m.resp.silent[ev.ResponseID]
	if !silent {
		m.calls.add(ev.CallID, ev.Name, ev.Arguments)
	}
	m.mu.Unlock()
	if silent {
		return
	}
	args := json.RawMessage(ev.Arguments)
	switch {
	case len(ev.Arguments) == 0:
		args = json.RawMessage(`{}`)
	case !json.Valid(args):
		b, _ := json.Marshal(ev.Arguments)
		args = b
	}
	m.emit(func(e model.Events) { e.ToolCall(ev.CallID, ev.Name, args) })
}
