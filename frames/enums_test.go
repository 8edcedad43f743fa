package frames

import (
	"slices"
	"testing"
)

// enumType is what every enum group offers.
type enumType interface {
	Valid() bool
	Enum() []any
}

func TestEnums(t *testing.T) {
	groups := []struct {
		zero enumType
		want []string
		of   func(string) enumType
	}{
		{Role(""), []string{"host", "caller", "agent"}, func(s string) enumType { return Role(s) }},
		{JobState(""), []string{"awaiting_permission", "pending", "deferred", "completed", "failed", "cancelled", "timed_out", "declined"}, func(s string) enumType { return JobState(s) }},
		{CancelReason(""), []string{"timeout", "discard", "caller_request", "agent_request", "host_request", "parent_cancelled"}, func(s string) enumType { return CancelReason(s) }},
		{CancelResult(""), []string{"cancelled", "already_done", "already_canceled", "unknown_call"}, func(s string) enumType { return CancelResult(s) }},
		{DeferAckReason(""), []string{"invalid_handle", "unknown_call", "call_not_pending", "not_deferrable", "handle_reserved", "handle_in_use", "handle_burned"}, func(s string) enumType { return DeferAckReason(s) }},
		{NarrationKind(""), []string{"milestone", "interaction", "completion"}, func(s string) enumType { return NarrationKind(s) }},
		{NarrationState(""), []string{"queued", "speaking", "delivered", "interrupted", "skipped", "stopped", "failed"}, func(s string) enumType { return NarrationState(s) }},
		{DeliveryFailureReason(""), []string{"no_audible_speech", "model_error", "session_ended", "floor_timeout"}, func(s string) enumType { return DeliveryFailureReason(s) }},
		{InteractionState(""), []string{"resolved", "cancelled", "superseded"}, func(s string) enumType { return InteractionState(s) }},
		{InteractionUpdateResult(""), []string{"applied", "already_closed", "unknown_interaction"}, func(s string) enumType { return InteractionUpdateResult(s) }},
		{EndReason(""), []string{"ended", "hung_up", "resume_expired"}, func(s string) enumType { return EndReason(s) }},
		{ToolResultKind(""), []string{"result", "background_placeholder", "error"}, func(s string) enumType { return ToolResultKind(s) }},
		{ExpectedDuration(""), []string{"instant", "seconds", "minutes", "hours"}, func(s string) enumType { return ExpectedDuration(s) }},
		{Code(""), []string{"bad_frame", "unknown_frame", "unauthorized", "forbidden", "not_found", "limit_exceeded", "unknown_call", "call_not_pending", "call_finished", "inject_rejected", "session_ended", "resume_expired", "resume_invalid", "internal"}, func(s string) enumType { return Code(s) }},
	}
	for _, g := range groups {
		var got []string
		for _, v := range g.zero.Enum() {
			got = append(got, v.(string))
		}
		if !slices.Equal(got, g.want) {
			t.Errorf("%T.Enum() = %v, want %v", g.zero, got, g.want)
		}
		for _, s := range g.want {
			if !g.of(s).Valid() {
				t.Errorf("%T(%q) not valid", g.zero, s)
			}
		}
		if g.zero.Valid() || g.of("bogus").Valid() {
			t.Errorf("%T accepts a value outside its group", g.zero)
		}
	}
	for _, s := range jobStates {
		want := s != StateAwaitingPermission && s != StatePending && s != StateDeferred
		if s.Terminal() != want {
			t.Errorf("%s.Terminal() = %v", s, s.Terminal())
		}
	}
}
