package jobs

import (
	"context"
	"encoding/json"
)

// Progress records a tool_progress note (SPEC 7): silent telemetry that re-arms the ordinary
// timeout of a pending job. It answers ErrCallFinished for a finished job, ErrCallNotPending for
// one still awaiting permission and ErrUnknownCall for one the session cannot see.
func (e *Engine) Progress(ctx context.Context, a Addr, note string) error {
	j, err := e.resolve(ctx, a)
	if err != nil {
		return err
	}
	return e.run(ctx, j, func(j *Job, now int64) (*plan, error) {
		if err := activeCheck(j); err != nil {
			return nil, err
		}
		en := entry(now, KindProgress, j, map[string]any{"note": note})
		return &plan{t: e.rearm(j, now, nil, en), change: Change{Event: EventProgress, Job: j}}, nil
	})
}

// Partial is a tool_partial_result (SPEC 7, 9).
type Partial struct {
	Segment json.RawMessage
	Reply   bool
	Phase   string
	// Interaction, when set, opens a decision for the caller (its ID is minted when empty).
	Interaction *Interaction
}

// PartialOutcome tells what a partial result did to the job's interactions.
type PartialOutcome struct {
	// Interaction is the interaction it opened (with its stable id), or nil.
	Interaction *Interaction
	// Superseded is the id of the open interaction the new one closed, or "".
	Superseded string
}

// PartialResult records a tool_partial_result (SPEC 7): always added to context, it re-arms
// the ordinary timeout of a pending job. With an interaction (SPEC 9) it opens that decision —
// closing the job's previous open one as superseded — sets input_required and suspends the
// ordinary timeout while it is open. Errors as for Progress.
func (e *Engine) PartialResult(ctx context.Context, a Addr, p Partial) (PartialOutcome, error) {
	j, err := e.resolve(ctx, a)
	if err != nil {
		return PartialOutcome{}, err
	}
	var out PartialOutcome
	if p.Interaction != nil && p.Interaction.ID == "" {
		ia := *p.Interaction
		ia.ID = NewInteractionID()
		p.Interaction = &ia
	}
	err = e.run(ctx, j, func(j *Job, now int64) (*plan, error) {
		out = PartialOutcome{}
		if err := activeCheck(j); err != nil {
			return nil, err
		}
		detail := map[string]any{"segment": p.Segment, "reply": p.Reply}
		if p.Phase != "" {
			detail["phase"] = p.Phase
		}
		entries := []Entry{entry(now, KindPartial, j, detail)}
		var open func(next *Job)
		if p.Interaction != nil {
			ia := *p.Interaction
			ia.OpenedMS = now
			out.Interaction = &ia
			if old := j.Interaction; old != nil && old.ID != ia.ID {
				out.Superseded = old.ID
				entries = append(entries, entry(now, KindInteraction, j,
					map[string]any{"interaction_id": old.ID, "state": InteractionSuperseded}))
			}
			entries = append(entries, entry(now, KindInteraction, j, map[string]any{
				"interaction_id": ia.ID, "state": "opened", "prompt": ia.Prompt, "options": ia.Options}))
			open = func(next *Job) {
				if out.Superseded != "" {
					next.close(out.Superseded, InteractionSuperseded)
				}
				delete(next.Closed, ia.ID)
				next.Interaction = &ia
			}
		}
		c := Change{Event: EventPartial, Job: j, Interaction: out.Interaction, Superseded: out.Superseded}
		return &plan{t: e.rearm(j, now, open, entries...), change: c}, nil
	})
	return out, err
}

// activeCheck answers for a job that cannot take progress, partial results or results.
func activeCheck(j *Job) error {
	switch {
	case j.State.Terminal():
		return ErrCallFinished
	case j.State == AwaitingPermission:
		return ErrCallNotPending
	}
	return nil
}

// rearm builds the transition of a progress report: a pending job's ordinary timeout starts
// again from now (SPEC 5); change, if set, modifies the job too. A deferred job whose record does
// not change only has its version checked, so the report is recorded only while it is open.
func (e *Engine) rearm(j *Job, now int64, change func(next *Job), entries ...Entry) *Transition {
	if j.State != Pending && change == nil {
		return e.checked(j, now, entries...)
	}
	next := j.edit()
	if next.State == Pending {
		next.ActivityMS = now
	}
	if change != nil {
		change(next)
	}
	return e.write(j, next, now, entries...)
}
