package jobs

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/backchannel-io/backchannel/frames"
)

// Tool is what the job engine needs to know of a tool declaration (SPEC 4): its clocks and
// flags, copied into each job when it is called so a later re-declaration never changes a
// running job.
type Tool struct {
	Name               string        `json:"name"`
	Timeout            time.Duration `json:"timeout"` // ordinary timeout; 0 means DefaultTimeout
	Deferred           bool          `json:"deferred,omitempty"`
	DeferredTimeout    time.Duration `json:"deferred_timeout"` // 0 means DefaultDeferredTimeout
	RequiresPermission bool          `json:"requires_permission,omitempty"`
	NotifyOnComplete   bool          `json:"notify_on_complete,omitempty"`
	ExpectedDuration   string        `json:"expected_duration,omitempty"`
}

// Defaults and caps of the clocks of SPEC 4, 5 and 12.
const (
	DefaultTimeout           = 10 * time.Second
	MaxTimeout               = 120 * time.Second
	DefaultDeferredTimeout   = 2 * time.Hour
	MaxDeferredTimeout       = 24 * time.Hour
	MaxCallLife              = 10 * time.Minute // no renewal of the ordinary timeout goes past this
	DefaultPermissionTimeout = 120 * time.Second
	DefaultRetention         = 7 * 24 * time.Hour
)

func (t Tool) timeout() time.Duration {
	if t.Timeout <= 0 {
		return DefaultTimeout
	}
	return t.Timeout
}

func (t Tool) deferredTimeout() time.Duration {
	if t.DeferredTimeout <= 0 {
		return DefaultDeferredTimeout
	}
	return t.DeferredTimeout
}

// Interaction is a decision a job asks of the caller (SPEC 9).
type Interaction struct {
	ID       string   `json:"id"`
	Prompt   string   `json:"prompt"`
	Options  []string `json:"options,omitempty"`
	OpenedMS int64    `json:"opened_ms"`
}

// How an interaction was closed (SPEC 9), as recorded on the job and the timeline.
const (
	InteractionAnswered   = "answered"
	InteractionResolved   = string(frames.InteractionResolved)
	InteractionCancelled  = string(frames.InteractionCancelled)
	InteractionSuperseded = string(frames.InteractionSuperseded)
	InteractionEnded      = "ended" // the call ended while it was open
)

// Job is the broker's durable record of one call (SPEC 5).
type Job struct {
	Tenant    string `json:"tenant"`
	SessionID string `json:"session_id"`
	CallID    string `json:"call_id"`
	Tool      Tool   `json:"tool"`
	// Arguments are written once, when the job is created, and stored apart from the record.
	Arguments json.RawMessage `json:"-"`
	// Slot is the host slot the call was dispatched to (section 10); it serves the job to the end.
	Slot string `json:"slot,omitempty"`
	// ConversationID, AgentCallID and Local describe a text agent's call (section 13).
	ConversationID string `json:"conversation_id,omitempty"`
	AgentCallID    string `json:"agent_call_id,omitempty"`
	Local          bool   `json:"local,omitempty"`
	// ParentCallID is the call that stands for the sub-agent whose conversation made this call:
	// when it is cancelled or times out, this job is closed with parent_cancelled (section 11).
	ParentCallID string `json:"parent_call_id,omitempty"`
	// TaskTTLMS is, for the call of an MCP task (SPEC 14), how long after CreatedMS the task
	// may be read; 0 for every other call.
	TaskTTLMS int64 `json:"task_ttl_ms,omitempty"`

	State       State  `json:"state"`
	Handle      string `json:"handle,omitempty"`
	StatusLabel string `json:"status_label,omitempty"`

	CreatedMS    int64           `json:"created_ms"`
	DispatchedMS int64           `json:"dispatched_ms,omitempty"`  // when it became pending
	ActivityMS   int64           `json:"activity_ms,omitempty"`    // last re-arm of the ordinary timeout
	DeferredMS   int64           `json:"deferred_ms,omitempty"`    // when its defer was accepted
	DeferredDLMS int64           `json:"deferred_dl_ms,omitempty"` // the deferred clock's deadline
	AskEndedMS   int64           `json:"ask_ended_ms,omitempty"`   // when the permission ask was spoken
	DeadlineMS   int64           `json:"deadline_ms,omitempty"`    // the next deadline of whichever clock runs; 0 when none
	FinishedMS   int64           `json:"finished_ms,omitempty"`    // when it reached its terminal state
	Output       json.RawMessage `json:"output,omitempty"`         // completed (or failed with output)
	Error        string          `json:"error,omitempty"`          // failed
	CancelReason string          `json:"cancel_reason,omitempty"`

	// Interaction is the open interaction, nil when none: the job's input_required flag.
	Interaction *Interaction `json:"interaction,omitempty"`
	// Closed maps every interaction id the job closed to how it was closed.
	Closed map[string]string `json:"closed,omitempty"`

	// Version counts the job's transitions; the store compares it on every write.
	Version int64 `json:"version"`
}

// InputRequired reports whether an interaction is open (SPEC 5: a flag on pending or deferred jobs).
func (j *Job) InputRequired() bool { return j.Interaction != nil }

// Clone returns a deep copy of j, so that a copy handed out can never change the original.
func (j *Job) Clone() *Job {
	if j == nil {
		return nil
	}
	c := *j
	c.Arguments = slices.Clone(j.Arguments)
	c.Output = slices.Clone(j.Output)
	if j.Interaction != nil {
		ia := *j.Interaction
		ia.Options = slices.Clone(ia.Options)
		c.Interaction = &ia
	}
	c.Closed = maps.Clone(j.Closed)
	return &c
}

// edit returns a copy of j to build its next version from. The arguments, the output and the
// open interaction are shared with j: no transition modifies them in place (it replaces them),
// so copying them on every transition would only cost allocations. The Closed map, which a
// transition writes to, is copied.
func (j *Job) edit() *Job {
	c := *j
	c.Closed = maps.Clone(j.Closed)
	return &c
}

// Ref names the job the way a client does: its broker call id or, once deferred, its handle.
func (j *Job) Ref() string {
	if j.Handle != "" {
		return j.Handle
	}
	return j.CallID
}

// deadline computes the job's next deadline from its clocks (SPEC 5, 7, 12): for a pending job
// min(last activity + timeout, dispatch + 10 min), or dispatch + 10 min while an interaction is
// open (none for a local call, which the agent runs itself); for a deferred job its fixed
// deferred deadline; for a job awaiting permission the end
// of the spoken ask + permissionTimeout (none before the ask was spoken); none when terminal.
func (j *Job) deadline(permissionTimeout time.Duration) int64 {
	switch j.State {
	case Pending:
		if j.Local {
			return 0 // a local call is run by the agent itself: it ends by its result or a cancel
		}
		limit := j.DispatchedMS + MaxCallLife.Milliseconds()
		if j.Interaction != nil {
			return limit
		}
		return min(j.ActivityMS+j.Tool.timeout().Milliseconds(), limit)
	case Deferred:
		return j.DeferredDLMS
	case AwaitingPermission:
		if j.AskEndedMS == 0 {
			return 0
		}
		return j.AskEndedMS + permissionTimeout.Milliseconds()
	}
	return 0
}
