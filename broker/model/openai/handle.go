package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"

	"github.com/backchannel-io/backchannel/broker/model"
)

// handle maps one server event to model.Events (on the reader goroutine, in order).
func (m *Model) handle(ev *serverEvent) {
	switch ev.Type {
	case evSessionCreated, evSessionUpdated:
		m.log.Debug("openai: " + ev.Type)
	case evSpeechStarted:
		m.mu.Lock()
		m.speaking = true
		m.mu.Unlock()
		m.emit(func(e model.Events) { e.SpeechStarted() })
	case evSpeechStopped:
		m.mu.Lock()
		m.speaking = false
		m.mu.Unlock()
		m.emit(func(e model.Events) { e.SpeechStopped() })
	case evCommitted:
		m.mu.Lock()
		m.turns.committed(ev.ItemID, m.autoRespond)
		m.mu.Unlock()
	case evTranscriptionDelta:
		m.mu.Lock()
		text := m.partials[ev.ItemID] + ev.Delta
		m.partials[ev.ItemID] = text
		m.mu.Unlock()
		m.emit(func(e model.Events) { e.CallerTranscript(text, false) })
	case evTranscriptionCompleted:
		m.mu.Lock()
		delete(m.partials, ev.ItemID)
		m.turns.transcribed(ev.ItemID, ev.Transcript, time.Now())
		m.mu.Unlock()
		if normalize(ev.Transcript) != "" {
			m.emit(func(e model.Events) { e.CallerTranscript(ev.Transcript, true) })
		}
	case evTranscriptionFailed:
		m.mu.Lock()
		delete(m.partials, ev.ItemID)
		m.turns.forget(ev.ItemID)
		m.mu.Unlock()
		msg := ""
		if ev.Error != nil {
			msg = describe(ev.Error)
		}
		m.log.Warn("openai: the caller's speech could not be transcribed", "item_id", ev.ItemID, "err", msg)
	case evResponseCreated:
		if ev.Response != nil {
			m.responseCreated(ev.Response)
		}
	case evResponseDone:
		if ev.Response != nil {
			m.responseDone(ev.Response)
		}
	case evAudioDelta:
		m.audioDelta(ev)
	case evAudioTranscriptDelta:
		m.mu.Lock()
		silent := m.resp.silent[ev.ResponseID]
		text := m.partials[ev.ResponseID] + ev.Delta
		m.partials[ev.ResponseID] = text
		m.mu.Unlock()
		if !silent {
			m.emit(func(e model.Events) { e.Transcript(ev.ResponseID, text, false) })
		}
	case evAudioTranscriptDone:
		m.mu.Lock()
		silent := m.resp.silent[ev.ResponseID]
		delete(m.partials, ev.ResponseID)
		m.mu.Unlock()
		if !silent {
			m.emit(func(e model.Events) { e.Transcript(ev.ResponseID, ev.Transcript, true) })
		}
	case evFunctionCallArgsDone:
		m.toolCall(ev)
	case evError:
		m.serverError(ev)
	}
}

// audioDelta decodes the audio of a response.output_audio.delta decoded as a serverEvent.
func (m *Model) audioDelta(ev *serverEvent) {
	chunk, err := base64.StdEncoding.DecodeString(ev.Delta)
	if err != nil {
		m.log.Warn("openai: undecodable audio delta", "response_id", ev.ResponseID, "err", err)
		return
	}
	m.audio(ev.ResponseID, ev.ItemID, ev.ContentIndex, chunk)
}

// audio passes agent audio on and accounts it for truncation. The chunk is the broker's: it
// is not reused.
func (m *Model) audio(responseID, itemID string, contentIndex int, chunk []byte) {
	m.mu.Lock()
	silent := m.resp.silent[responseID]
	m.tracks.add(responseID, itemID, contentIndex, len(chunk), time.Now())
	m.mu.Unlock()
	if !silent && len(chunk) > 0 {
		m.emit(func(e model.Events) { e.Audio(responseID, chunk) })
	}
}

// serverError handles an error event: a failed response.create goes to its request, errors
// of quiet events are logged, everything else is reported.
func (m *Model) serverError(ev *serverEvent) {
	e := ev.Error
	if e == nil {
		e = &serverError{Message: "an error event without details"}
	}
	handled, report := m.createFailed(e)
	if handled {
		if report != nil {
			m.emit(func(ev model.Events) { ev.Error(report) })
		}
		return
	}
	m.mu.Lock()
	callID, restoring := m.calls.notRestored(e.EventID)
	why, quiet := m.quiet.take(e.EventID)
	m.mu.Unlock()
	if restoring {
		m.log.Warn("openai: a pending function call could not be re-created on the new connection; its output will go in as a system message",
			"call_id", callID, "err", describe(e))
		return
	}
	if quiet {
		m.log.Debug("openai: expected error", "of", why, "err", describe(e))
		return
	}
	err := errors.New("openai: " + describe(e))
	m.emit(func(ev model.Events) { ev.Error(err) })
}

// fastAudioDelta handles b if it is a response.output_audio.delta; false leaves b to the
// general decoder (which also reports a malformed delta).
func (m *Model) fastAudioDelta(b []byte) bool {
	ev, ok := decodeAudioDelta(b)
	if ok {
		m.audio(ev.ResponseID, ev.ItemID, ev.ContentIndex, ev.Delta)
	}
	return ok
}

// decodeAudioDelta decodes b if it is a response.output_audio.delta, with a smaller decode
// than that of every other event and no intermediate copy of the base64 text.
func decodeAudioDelta(b []byte) (audioDeltaEvent, bool) {
	var ev audioDeltaEvent
	if !bytes.Contains(b, audioDeltaType) || json.Unmarshal(b, &ev) != nil || ev.Type != evAudioDelta {
		return audioDeltaEvent{}, false
	}
	return ev, true
}
