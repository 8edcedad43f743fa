package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// NewCall describes a call the agent made, for Engine.Call.
type NewCall struct {
	Tenant    string
	SessionID string
	// Slot is the host slot the call goes to.
	Slot string
	// CallID is minted (NewCallID) when empty.
	CallID    string
	Tool      Tool
	Arguments json.RawMessage
	// ConversationID, AgentCallID, Local and ParentCallID describe a text agent's call.
	ConversationID string
	AgentCallID    string
	Local          bool
	ParentCallID   string
	// TaskTTLMS marks the call of an MCP task and how long it may be read (Job.TaskTTLMS).
	TaskTTLMS int64
	// Frame, when set, is the job's tool_call, appended to its slot's outbox with the call's
	// transition (FrameOut) when the job is created pending (not awaiting permission) and has no
	// parent call.
	Frame *FrameOut
}

// ErrCallExists is returned by Call for a CallID that is already taken.
var ErrCallExists = errors.New("jobs: call id exists")

// Call creates the job of a call (SPEC 5): pending and dispatched now, with its ordinary timeout
// running, or awaiting_permission when the tool requires spoken permission (no clock runs until
// the ask has been spoken). A call whose parent call was already cancelled or has timed out is
// closed at once with parent_cancelled (SPEC 11).
func (e *Engine) Call(ctx context.Context, c NewCall) (*Job, error) {
	mint := c.CallID == ""
	for attempt := 0; ; attempt++ {
		if mint {
			c.CallID = NewCallID()
		}
		now := e.nowMS()
		j := &Job{
			Tenant: c.Tenant, SessionID: c.SessionID, CallID: c.CallID, Tool: c.Tool,
			Arguments: c.Arguments, Slot: c.Slot, ConversationID: c.ConversationID,
			AgentCallID: c.AgentCallID, Local: c.Local, ParentCallID: c.ParentCallID, TaskTTLMS: c.TaskTTLMS,
			State: Pending, CreatedMS: now, DispatchedMS: now, ActivityMS: now,
		}
		if c.Tool.RequiresPermission {
			j.State, j.DispatchedMS, j.ActivityMS = AwaitingPermission, 0, 0
		}
		none := &Job{Tenant: c.Tenant, SessionID: c.SessionID, CallID: c.CallID}
		t := e.write(none, j, now, entry(now, KindCall, j, map[string]any{"name": c.Tool.Name, "state": string(j.State)}))
		t.From = ""
		if f := c.Frame; f != nil && j.State == Pending && c.ParentCallID == "" {
			f.Data = f.Render(j)
			t.Frame = f
		}
		err := e.commit(ctx, t)
		if isConflict(err) {
			if mint && attempt < maxAttempts {
				continue
			}
			return nil, fmt.Errorf("%w: %s", ErrCallExists, c.CallID)
		}
		if err != nil {
			return nil, err
		}
		if t.Frame != nil {
			t.Frame.Applied = true
		}
		e.applied(ctx, &plan{t: t, change: Change{Event: EventCreated}})
		if t.ParentState == Cancelled || t.ParentState == TimedOut {
			// The parent ended before this job joined its children: its cascade cannot see
			// this job, so the job is closed here (SPEC 11).
			_, closed, err := e.closeChild(ctx, j, "")
			if err != nil {
				return nil, err
			}
			if closed != nil {
				j = closed
			}
		}
		return j.Clone(), nil
	}
}
