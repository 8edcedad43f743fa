package openai

import (
	"encoding/json"

	"github.com/backchannel-io/backchannel/broker/model"
)

// ToolResult implements model.Model: a function_call_output item answering the call, then —
// with respond — a response in which the model speaks about it. An error goes to the model
// as the output {"error": MESSAGE}.
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
	item := functionCallOutputItem{Type: itemTypeFunctionCallOut, CallID: callID, Output: output}
	if m.sendLocked(itemCreate{Type: evItemCreate, EventID: m.nextID("bc_evt_"), Item: item}) != nil || !respond {
		return
	}
	m.enqueueLocked(&request{}, KindToolResult, nil)
}

// toolCall reports a function call of the model. Arguments that are not JSON reach the broker
// as a JSON string, so that its argument check answers the model with the error.
func (m *Model) toolCall(ev *serverEvent) {
	if m.isSilent(ev.ResponseID) {
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
