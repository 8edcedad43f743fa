package jobs

import (
	"context"
	"encoding/json"
)

// Result applies a host's tool_result (SPEC 5): a pending or deferred job becomes completed, or
// failed when isError is set (errText is its message; output may accompany it). A result that
// loses the race to a timeout or a cancel changes nothing: it is recorded on the timeline as
// late_result_dropped and answered with ErrCallFinished. ErrCallNotPending answers a job still
// awaiting permission, ErrUnknownCall one the session cannot see.
func (e *Engine) Result(ctx context.Context, a Addr, output json.RawMessage, errText string, isError bool) (*Job, error) {
	j, err := e.resolve(ctx, a)
	if err != nil {
		return nil, err
	}
	var done *Job
	var late bool
	err = e.run(ctx, j, func(j *Job, now int64) (*plan, error) {
		late = false
		detail := map[string]any{}
		if isError {
			detail["error"] = errText
		}
		if output != nil {
			detail["output"] = output
		}
		if j.State.Terminal() {
			late = true
			detail["state"] = string(j.State)
			t := e.note(j.Tenant, j.SessionID, j.CallID, now, entry(now, KindLateResultDropped, j, detail))
			return &plan{t: t, change: Change{Event: EventLateResultDropped, Job: j}}, nil
		}
		if j.State == AwaitingPermission {
			return nil, ErrCallNotPending
		}
		next := j.edit()
		next.State, next.Output, next.Error = Completed, output, ""
		event := EventCompleted
		if isError {
			next.State, next.Error, event = Failed, errText, EventFailed
		}
		detail["state"] = string(next.State)
		done = next
		return &plan{t: e.write(j, next, now, entry(now, KindResult, next, detail)), change: Change{Event: event}}, nil
	})
	if err != nil {
		return nil, err
	}
	if late {
		return nil, ErrCallFinished
	}
	return done.Clone(), nil
}
