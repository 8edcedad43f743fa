package voice

import (
	"encoding/json"
	"log/slog"
	"time"

	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/internal/g711"
	"github.com/backchannel-io/backchannel/jobs"
	"github.com/backchannel-io/backchannel/narration"
)

// Voice is the voice side of one session: the model, the floor and the narration queue, the
// responses being played to the caller in real time, and the jobs the model's tool calls
// started. Its methods are called on the session's event loop.
type Voice struct {
	env   Env
	opts  Options
	m     model.Model
	queue narration.Queue
	floor narration.Floor
	vad   vad
	done  bool // ended or stopped: nothing more is said or done

	playing []*response // responses in flight, the first one playing
	// finished remembers the ids of the latest responses that ended, so a late event of one
	// (audio or a done after a barge-in ended it for the floor) does not start it again.
	finished recentIDs
	// unheard remembers the latest responses cut before any of their audio was played: their
	// late transcripts are words the caller never heard, and are not shown (SPEC 17).
	unheard recentIDs
	// freedAt is when the floor last freed by a response ending or the caller attaching (the
	// grace after the caller's speech is floor.FreeAt): for the narration start delay.
	freedAt  time.Time
	tickStop func() // the playout clock, while audio waits to be played
	tickRun  int    // numbers the playout clock's runs, so a tick of a stopped run is ignored
	// playEnd is when the agent audio sent so far ends by the pacing schedule: the frame after
	// it is due then, or at its arrival if that is later.
	playEnd time.Time
	wake    func() // stops the wake-up at the next time the floor may free or an item expire
	soon    func() // stops the coalescing wait after an item was queued

	calls       map[string]*call // by broker call id
	byModel     map[string]*call // by the model's call id
	asks        map[string]*ask  // open interactions of voice jobs, by interaction id
	asked       int              // counts asks that started speaking (recency)
	perm        *permission      // the permission ask being judged, if any
	permQueue   []*call          // jobs waiting for their permission ask
	autoRespond *bool            // what the model was last told (nil: not yet)
	injects     int              // numbers the context items of unspoken injects
}

// call is a call the voice model made of a host tool.
type call struct {
	modelID  string
	brokerID string
	slot     string // the slot serving the job (fixed for its life)
	name     string
	args     json.RawMessage
	label    string // the status_label once deferred, else the tool name
	deferred bool
	answered bool // the model got the call's function output
	state    jobs.State
	handle   string
	notify   bool
}

// response is one model response, played to the caller in real time.
type response struct {
	id          string
	item        *narration.Item // the narration it voices; nil for the model's own responses
	frames      []frame         // audio not yet played
	playout     narration.Playout
	modelDone   bool
	failed      error
	interrupted bool
	text        string
	firstFrame  time.Time // when its first frame was sent to the caller (zero: none yet)
}

// frame is 20 ms (or less) of a response's audio and when it arrived from the model.
type frame struct {
	audio []byte
	at    time.Time
}

// itemData is what an item needs to be voiced.
type itemData struct {
	req    model.Request
	handle string
	inject string // the inject frame's id, for an inject
	// slot is where frames about the item go: the slot serving its job (narration lifecycle,
	// delivery failed), or the slot that sent an inject.
	slot string
}

// New returns the voice side of a session whose model is m. Nothing is said until a caller
// attaches (CallerAttached).
func New(env Env, m model.Model, opts Options) *Voice {
	if opts.Grace <= 0 {
		opts.Grace = narration.DefaultGrace
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = DefaultMaxWait
	}
	if opts.ReaskAfter <= 0 {
		opts.ReaskAfter = DefaultReaskAfter
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	v := &Voice{env: env, opts: opts, m: m, calls: make(map[string]*call), byModel: make(map[string]*call),
		asks: make(map[string]*ask)}
	v.floor.Grace = opts.Grace
	return v
}

// DeclareTools tells the model the session's host tools plus cancel_job (SPEC 11).
func (v *Voice) DeclareTools(tools []model.Tool) {
	v.m.SetTools(append(append([]model.Tool(nil), tools...), model.CancelJobTool))
}

// CallerAttached and CallerDetached move the floor (SPEC 8: free only with a caller attached).
func (v *Voice) CallerAttached() {
	v.floor.CallerAttached = true
	v.freedAt = v.env.Now()
	v.pump()
}

// CallerDetached: what is playing can reach nobody now.
func (v *Voice) CallerDetached() {
	v.floor.CallerAttached = false
	v.floor.CallerSpeaking = false
	v.vad = vad{}
	for _, r := range v.playing {
		r.frames = nil
	}
}

// CallerText is a caller turn given as text (SPEC 17): speech started, transcript, speech
// stopped. at is when the frame arrived.
func (v *Voice) CallerText(text string, at time.Time) {
	v.SpeechStarted(at)
	v.SpeechStopped()
	v.finalTranscript(text)
}

// CallerAudio takes caller audio that arrived at at: the broker's VAD drives the floor and
// barge-in on each 20 ms of it; the model gets the audio too.
func (v *Voice) CallerAudio(chunk []byte, at time.Time) {
	all := chunk
	for len(chunk) > 0 {
		n := min(len(chunk), g711.SamplesPer20ms)
		switch v.vad.feed(chunk[:n]) {
		case +1:
			v.SpeechStarted(at)
		case -1:
			v.SpeechStopped()
		}
		chunk = chunk[n:]
	}
	v.m.CallerAudio(all)
}

// SpeechStarted: the caller speaks, since at (when the audio or frame arrived, or the model
// reported it). A response in flight is barged in on (SPEC 8).
func (v *Voice) SpeechStarted(at time.Time) {
	v.floor.CallerSpeaking = true
	if v.perm != nil {
		v.perm.speechStarted(at)
	}
	for _, r := range v.playing {
		if !r.interrupted {
			if !r.firstFrame.IsZero() { // its audio was being played: it stops now
				v.env.CutAudio()
				v.env.BargedIn(v.env.Now().Sub(at))
			}
			r.interrupted = true
			r.frames = nil
			v.m.Cancel(r.id)
		}
	}
	v.settle()
}

// SpeechStopped: the floor frees after the grace period.
func (v *Voice) SpeechStopped() {
	v.floor.CallerSpeaking = false
	v.floor.SpeechStopped = v.env.Now()
	v.pump()
}

// finalTranscript routes a final caller transcript: to the permission verifier while an ask
// waits for its reply (SPEC 12), else to the most recently asked open interaction when it
// answers it (SPEC 9), else to the model as a turn.
func (v *Voice) finalTranscript(text string) {
	if v.perm != nil && v.perm.judges(text) {
		return
	}
	if a := v.latestAsk(); a != nil {
		option, ok := jobs.MatchAnswer(text, a.options)
		if !ok {
			v.m.CallerTurn(text, a.options)
			return
		}
		v.answer(a, option, text)
		return
	}
	v.m.CallerTurn(text, nil)
}

// updateAutoRespond turns the model's own responses to caller turns off while a permission ask
// or an asked interaction waits for the caller's reply — the reply goes to the verifier or the
// host, never to the model as a turn (SPEC 9, 12) — and on again otherwise. A turn the voice
// side does not consume then reaches the model through CallerTurn.
func (v *Voice) updateAutoRespond() {
	want := v.perm == nil && v.latestAsk() == nil
	if v.autoRespond == nil || *v.autoRespond != want {
		v.autoRespond = &want
		v.m.SetAutoRespond(want)
	}
}
