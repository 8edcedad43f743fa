package jobs

// Entry is one record of a session's append-only timeline (SPEC 16).
type Entry struct {
	AtMS   int64          `json:"at_ms"`
	Kind   string         `json:"kind"`
	CallID string         `json:"call_id,omitempty"`
	Handle string         `json:"handle,omitempty"`
	Detail map[string]any `json:"detail"`
}

// The kinds of timeline entries (SPEC 16).
const (
	KindCall                = "call"
	KindDeferred            = "deferred"
	KindDeferRejected       = "defer_rejected"
	KindProgress            = "progress"
	KindPartial             = "partial"
	KindNarration           = "narration"
	KindInteraction         = "interaction"
	KindPermission          = "permission"
	KindResult              = "result"
	KindCancel              = "cancel"
	KindNotice              = "notice"
	KindToolDeadlineTimeout = "tool_deadline_timeout"
	KindLateResultDropped   = "late_result_dropped"
	KindDuplicateCancel     = "duplicate_cancel"
	KindDeliveryFailed      = "delivery_failed"
	KindInjectRejected      = "inject_rejected"
	KindDisconnect          = "disconnect"
	KindResume              = "resume"
	KindSessionEnd          = "session_end"
)

// entry builds a timeline entry about job j.
func entry(now int64, kind string, j *Job, detail map[string]any) Entry {
	if detail == nil {
		detail = map[string]any{}
	}
	return Entry{AtMS: now, Kind: kind, CallID: j.CallID, Handle: j.Handle, Detail: detail}
}
