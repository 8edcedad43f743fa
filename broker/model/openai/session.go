package openai

import (
	"encoding/json"

	"github.com/backchannel-io/backchannel/broker/model"
)

// sessionUpdate is the session.update that configures the session: G.711 µ-law both ways,
// server VAD (with the current auto-respond), input transcription, the instructions, the
// voice and the tools declared so far; later updates of a session (initial false) repeat only
// the audio input settings, since the voice cannot change once the model has spoken. m.mu is
// held.
func (m *Model) sessionUpdate(initial bool) sessionUpdate {
	cfg := sessionConfig{
		Type: sessionTypeRealtime,
		Audio: &audioConfig{Input: &audioInput{
			Format:        &audioFormat{Type: formatPCMU},
			Transcription: &transcription{Model: m.opts.TranscriptionModel},
			TurnDetection: &turnDetection{Type: turnDetectionServerVAD, CreateResponse: m.autoRespond, InterruptResponse: true},
		}},
	}
	if initial {
		cfg.OutputModalities = []string{outputModalityAudio}
		cfg.Instructions = m.instructions
		cfg.Audio.Output = &audioOutput{Format: &audioFormat{Type: formatPCMU}, Voice: m.voice}
		if m.tools != nil {
			cfg.Tools, cfg.ToolChoice = m.tools, toolChoiceAuto
		}
	}
	return sessionUpdate{Type: evSessionUpdate, EventID: m.nextID("bc_evt_"), Session: cfg}
}

// SetTools implements model.Model: session.update with the tools as functions. The adapter
// keeps them for a new connection; while it reconnects they are only kept.
func (m *Model) SetTools(tools []model.Tool) {
	fns := make([]functionTool, 0, len(tools))
	for _, t := range tools {
		params := t.Parameters
		if len(params) == 0 || !json.Valid(params) {
			params = json.RawMessage(defaultToolParametersJSON)
		}
		fns = append(fns, functionTool{Type: toolTypeFunction, Name: t.Name, Description: t.Description, Parameters: params})
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.usable() {
		return
	}
	m.tools = &fns
	if m.c == nil {
		return
	}
	_ = m.sendLocked(sessionUpdate{Type: evSessionUpdate, EventID: m.nextID("bc_evt_"),
		Session: sessionConfig{Type: sessionTypeRealtime, Tools: &fns, ToolChoice: toolChoiceAuto}})
}

// SetAutoRespond implements model.Model: session.update with turn_detection.create_response
// (kept for a new connection, like the tools).
func (m *Model) SetAutoRespond(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.usable() || m.autoRespond == on {
		return
	}
	m.autoRespond = on
	if m.c != nil {
		_ = m.sendLocked(m.sessionUpdate(false))
	}
}
