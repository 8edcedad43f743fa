package voice

import (
	"encoding/json"
	"log/slog"
	"time"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
	"github.com/backchannel-io/backchannel/permissions"
)

// Env is what the voice side needs from its session. Every method is called from the session's
// own event loop, and so are the functions After and Every schedule.
type Env interface {
	// Now is the time of the session's clock.
	Now() time.Time
	// After runs fn on the session's event loop after d; stop cancels it.
	After(d time.Duration, fn func()) (stop func())
	// Every runs fn on the session's event loop every d until stopped (the playout clock).
	Every(d time.Duration, fn func()) (stop func())

	// SendToSlot sends a frame to a slot of the session, if it still exists.
	SendToSlot(slot string, f frames.Frame)
	// ToCaller sends a frame to the caller's slot.
	ToCaller(f frames.Frame)
	// SendAudio plays one 20 ms frame of agent audio to the caller; false when no caller
	// connection is there to hear it. due is when the pacing had it due: its arrival from the
	// model, or the end of the audio played before it if that is later (for the outbound delay).
	SendAudio(frame []byte, due time.Time) bool
	// CutAudio drops the agent audio SendAudio took that has not reached the caller's
	// transport yet (barge-in: what was not played is not played late).
	CutAudio()
	// Record appends a timeline entry: about a job (callID set), or the session's (callID "").
	Record(callID, handle, kind string, detail map[string]any)

	// StartCall starts the job of a voice model's tool call (the checks of SPEC 4 first): it
	// creates the job and dispatches it to its host, unless the job awaits spoken permission.
	// A non-empty errText answers the call at once with that error.
	StartCall(modelCallID, name string, args json.RawMessage) (c StartedCall, errText string)
	// Dispatch sends an approved job to its host (SPEC 12).
	Dispatch(j *jobs.Job)
	// CancelJob cancels a job the caller asked to stop (cancel_job: SPEC 11); ref is a handle
	// or a broker call id.
	CancelJob(ref string) frames.CancelResult
	// AnswerInteraction closes an interaction of a job with the caller's answer (SPEC 9).
	AnswerInteraction(callID, interactionID, option, text string) (frames.InteractionUpdateResult, error)
	// PermissionAsked starts a job's permission window now (SPEC 12: from the end of the ask).
	PermissionAsked(callID string) error
	// Decide records the verdict on a job awaiting permission (SPEC 12).
	Decide(callID string, d jobs.Decision) error
	// Verify judges the caller's reply to a permission ask (SPEC 12).
	Verify(action permissions.Action, reply string) (permissions.Judgement, error)

	// NarrationStarted observes how long after the floor was free (with the item queued) a
	// narration's response was requested.
	NarrationStarted(delay time.Duration)
	// BargedIn observes how long after the caller's speech started (the arrival of the audio
	// that started it) the audio of a response being played was stopped.
	BargedIn(reaction time.Duration)
}

// StartedCall is the job a voice tool call started.
type StartedCall struct {
	CallID string // the broker call id
	Slot   string // the slot serving the job (fixed for its life)
	State  jobs.State
	// Notify is the tool's notify_on_complete: a deferred job's end is voiced (SPEC 8).
	Notify bool
}

// Options configure a Voice.
type Options struct {
	// Grace is the floor grace after the caller's speech (SPEC 8 floor_grace_ms).
	Grace time.Duration
	// MaxWait is how long a queued narration waits for the floor (SPEC 8: floor_timeout).
	MaxWait time.Duration
	// ReaskAfter is when a delivered, unanswered ask is asked again (SPEC 9: 30 s).
	ReaskAfter time.Duration
	// Log receives what the voice side cannot tell anyone else (a store refusing a verdict).
	Log *slog.Logger
}

// The defaults of Options (SPEC 8, 9).
const (
	DefaultMaxWait    = 60 * time.Second
	DefaultReaskAfter = 30 * time.Second
)
