package voice

import (
	"time"

	"github.com/backchannel-io/backchannel/narration"
)

// FrameInterval is the pace of agent audio to the caller: one 20 ms frame per tick (SPEC 8).
const FrameInterval = 20 * time.Millisecond

// playingResponse returns the response in flight with id, or nil.
func (v *Voice) playingResponse(id string) *response {
	for _, r := range v.playing {
		if r.id == id {
			return r
		}
	}
	return nil
}

// responseFor returns the response with id, starting to track it if it is new; nil when it
// already ended.
func (v *Voice) responseFor(id string) *response {
	if r := v.playingResponse(id); r != nil {
		return r
	}
	if v.finished.has(id) {
		return nil
	}
	r := &response{id: id}
	v.playing = append(v.playing, r)
	v.floor.InFlight = true
	return r
}

// play plays the first response in flight: one 20 ms frame per tick (SPEC 8: agent audio is
// paced to the caller in real time, so a burst does not end a response early). A response is
// in flight until its last frame was sent.
func (v *Voice) play() {
	for len(v.playing) > 0 {
		r := v.playing[0]
		if len(r.frames) > 0 {
			v.startTicker()
			return
		}
		if !r.modelDone && !r.interrupted {
			v.stopTicker()
			return // waiting for more audio or the end
		}
		if r.interrupted && !r.modelDone {
			// Barged in: the model was told to cancel; the response ends now for the floor.
			r.modelDone = true
		}
		v.playing = v.playing[1:]
		v.finished.add(r.id)
		if r.interrupted && r.firstFrame.IsZero() {
			v.unheard.add(r.id)
		}
		v.finish(r)
	}
	v.stopTicker()
	if v.floor.InFlight {
		v.freedAt = v.env.Now()
	}
	v.floor.InFlight = false
	v.pump()
}

// startTicker starts the playout clock for a run of audio. The clock runs only while audio
// waits to be played, so a voice session with nothing to say costs no timer.
func (v *Voice) startTicker() {
	if v.tickStop != nil || v.done {
		return
	}
	v.tickRun++
	run := v.tickRun
	v.tickStop = v.env.Every(FrameInterval, func() {
		if v.tickStop != nil && v.tickRun == run { // not a tick of a stopped run
			v.tick()
		}
	})
	v.tick() // the first frame goes at once
}

// stopTicker stops the playout clock.
func (v *Voice) stopTicker() {
	if v.tickStop != nil {
		v.tickStop()
		v.tickStop = nil
	}
}

// tick sends the next frame of the playing response to the caller.
func (v *Voice) tick() {
	if len(v.playing) == 0 {
		v.stopTicker()
		return
	}
	r := v.playing[0]
	if len(r.frames) > 0 {
		f := r.frames[0]
		r.frames[0] = frame{}
		r.frames = r.frames[1:]
		due := f.at
		if v.playEnd.After(due) {
			due = v.playEnd
		}
		v.playEnd = due.Add(time.Duration(len(f.audio)) * time.Second / 8000)
		if v.env.SendAudio(f.audio, due) {
			r.playout.Add(f.audio)
			if r.firstFrame.IsZero() {
				r.firstFrame = v.env.Now()
			}
		}
	}
	if len(r.frames) == 0 {
		v.play()
	}
}

// finish decides what a response that left the floor did for its narration (SPEC 8).
func (v *Voice) finish(r *response) {
	it := r.item
	if it == nil {
		return
	}
	audible := r.playout.Delivered(false)
	ending := narration.Played
	switch {
	case r.interrupted:
		ending = narration.Interrupted
	case r.failed != nil:
		ending = narration.ModelFailed
	}
	if it.Kind == narration.PermissionAsk && v.perm != nil {
		v.perm.askEnded(r)
	}
	v.attemptEnded(it, ending, audible, r.id)
}
