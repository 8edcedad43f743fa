package sim

import (
	"encoding/base64"
	"encoding/json"

	"github.com/backchannel-io/backchannel/internal/g711"
)

// VAD by energy over 20 ms µ-law frames.
const (
	// VADThreshold is the RMS (linear 16-bit units) of a loud frame.
	VADThreshold = 500
	// VADStartFrames loud frames in a row start speech (60 ms).
	VADStartFrames = 3
	frameBytes     = 160 // 20 ms at 8 kHz
	frameMS        = 20
)

// vad is the input audio buffer with its voice activity detection.
type vad struct {
	pending  []byte // the start of a frame not complete yet
	ms       int64  // audio received in all, in ms
	bufMS    int64  // audio in the buffer since the last commit or clear
	speaking bool
	loud     int
	quietMS  int
	itemID   string // the item speech in progress becomes
	lastLoud int64  // end of the last loud frame, in ms
}

func (v *vad) clear() {
	v.pending, v.bufMS, v.speaking, v.loud, v.quietMS, v.itemID = nil, 0, false, 0, 0, ""
}

// appendLocked applies input_audio_buffer.append. s.mu is held.
func (s *Session) appendLocked(eventID string, b []byte) {
	var ev struct {
		Audio string `json:"audio"`
	}
	_ = json.Unmarshal(b, &ev)
	audio, err := base64.StdEncoding.DecodeString(ev.Audio)
	if err != nil {
		s.errorLocked(eventID, "invalid_request_error", "invalid_value", "audio must be base64.", "audio")
		return
	}
	if s.cfg.InputFormat != FormatPCMU {
		s.errorLocked(eventID, "invalid_request_error", "unsupported_format", "The simulator hears audio/pcmu only; set session.audio.input.format.", "audio")
		return
	}
	v := &s.vad
	v.pending = append(v.pending, audio...)
	for len(v.pending) >= frameBytes {
		frame := v.pending[:frameBytes]
		v.pending = v.pending[frameBytes:]
		v.ms += frameMS
		v.bufMS += frameMS
		if s.cfg.TurnDetection == "" {
			continue
		}
		s.frameLocked(g711.RMS(frame) >= VADThreshold)
	}
}

// frameLocked runs the VAD over one frame. s.mu is held.
func (s *Session) frameLocked(loud bool) {
	v := &s.vad
	if loud {
		v.loud++
		v.quietMS = 0
		v.lastLoud = v.ms
	} else {
		v.loud = 0
		v.quietMS += frameMS
	}
	switch {
	case !v.speaking && v.loud >= VADStartFrames:
		v.speaking = true
		v.itemID = "item_" + randomID()
		s.sendLocked(map[string]any{"type": "input_audio_buffer.speech_started",
			"audio_start_ms": v.ms - VADStartFrames*frameMS, "item_id": v.itemID})
		if r := s.active; r != nil && s.cfg.InterruptResponse {
			s.cancelLocked(r, "turn_detected")
		}
	case v.speaking && v.quietMS >= s.cfg.SilenceMS:
		v.speaking = false
		s.sendLocked(map[string]any{"type": "input_audio_buffer.speech_stopped", "audio_end_ms": v.lastLoud, "item_id": v.itemID})
		s.commitTurnLocked(v.itemID, true)
	}
}

// commitLocked applies input_audio_buffer.commit. s.mu is held.
func (s *Session) commitLocked(eventID string) {
	if s.vad.bufMS < 100 {
		s.errorLocked(eventID, "invalid_request_error", "input_audio_buffer_commit_empty",
			"Error committing input audio buffer: buffer too small. Expected at least 100ms of audio.", "")
		return
	}
	id := s.vad.itemID
	if id == "" {
		id = "item_" + randomID()
	}
	s.commitTurnLocked(id, false)
}

// commitTurnLocked commits the buffer as a user audio item, transcribes it (when
// transcription is on), and — after server VAD with create_response — answers it, unless
// it was noise (no text registered for it). s.mu is held.
func (s *Session) commitTurnLocked(itemID string, byVAD bool) {
	v := &s.vad
	s.sendLocked(map[string]any{"type": "input_audio_buffer.committed", "previous_item_id": s.previousIDLocked(), "item_id": itemID})
	v.bufMS, v.itemID = 0, ""
	it := &Item{ID: itemID, Type: "message", Role: "user", Status: "completed", Audio: true}
	s.addLocked(it)
	text := s.srv.nextTranscript()
	if s.cfg.TranscriptionModel != "" {
		it.Text = text
		if text != "" {
			s.sendLocked(map[string]any{"type": "conversation.item.input_audio_transcription.delta", "item_id": itemID, "content_index": 0, "delta": text})
		}
		s.sendLocked(map[string]any{"type": "conversation.item.input_audio_transcription.completed", "item_id": itemID, "content_index": 0,
			"transcript": text, "usage": map[string]any{"type": "duration", "seconds": 1.0}})
	}
	// A burst nobody registered words for is noise: it is not answered.
	if byVAD && s.cfg.CreateResponse && s.active == nil && text != "" {
		s.startResponseLocked(responseParams{}, true)
	}
}
