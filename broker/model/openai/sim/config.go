package sim

import (
	"bytes"
	"encoding/json"
	"time"
)

// Formats of audio.
const (
	FormatPCM  = "audio/pcm"
	FormatPCMU = "audio/pcmu"
	FormatPCMA = "audio/pcma"
)

// Tool is a function tool of the session.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// Config is a session's configuration as session.update left it.
type Config struct {
	Instructions       string
	InputFormat        string
	OutputFormat       string
	Voice              string
	TranscriptionModel string // empty: transcription off
	TurnDetection      string // "server_vad", "semantic_vad", or empty: off
	CreateResponse     bool
	InterruptResponse  bool
	SilenceMS          int
	Tools              []Tool
	ToolChoice         json.RawMessage
	Updates            int // session.update events applied
}

func defaultConfig() Config {
	return Config{
		Instructions: "You are a helpful, witty, and friendly AI.",
		InputFormat:  FormatPCM, OutputFormat: FormatPCM, Voice: "alloy",
		TurnDetection: "server_vad", CreateResponse: true, InterruptResponse: true, SilenceMS: 500,
		ToolChoice: json.RawMessage(`"auto"`),
	}
}

// Config returns the session's configuration.
func (s *Session) Config() Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cfg
	c.Tools = append([]Tool(nil), s.cfg.Tools...)
	return c
}

// ToolNames are the names of the session's tools.
func (c Config) ToolNames() []string {
	var names []string
	for _, t := range c.Tools {
		names = append(names, t.Name)
	}
	return names
}

type formatIn struct {
	Type string `json:"type"`
	Rate int    `json:"rate"`
}

type sessionIn struct {
	Type             string           `json:"type"`
	Instructions     *string          `json:"instructions"`
	OutputModalities []string         `json:"output_modalities"`
	Tools            *json.RawMessage `json:"tools"`
	ToolChoice       json.RawMessage  `json:"tool_choice"`
	Audio            *struct {
		Input *struct {
			Format        *formatIn       `json:"format"`
			Transcription json.RawMessage `json:"transcription"`
			TurnDetection json.RawMessage `json:"turn_detection"`
		} `json:"input"`
		Output *struct {
			Format *formatIn `json:"format"`
			Voice  *string   `json:"voice"`
		} `json:"output"`
	} `json:"audio"`
}

// sessionUpdateLocked applies session.update and answers session.updated. Nothing of an
// invalid update is applied. s.mu is held.
func (s *Session) sessionUpdateLocked(eventID string, b []byte) {
	var ev struct {
		Session *sessionIn `json:"session"`
	}
	if err := json.Unmarshal(b, &ev); err != nil || ev.Session == nil {
		s.errorLocked(eventID, "invalid_request_error", "invalid_value", "Invalid session.update: missing or malformed session.", "session")
		return
	}
	in := ev.Session
	if in.Type != "realtime" {
		s.errorLocked(eventID, "invalid_request_error", "invalid_value", "session.type must be 'realtime' on this endpoint.", "session.type")
		return
	}
	c := s.cfg
	c.Tools = append([]Tool(nil), s.cfg.Tools...)
	if in.Instructions != nil {
		c.Instructions = *in.Instructions
	}
	for _, m := range in.OutputModalities {
		if m != "audio" {
			s.errorLocked(eventID, "invalid_request_error", "invalid_value", "The simulator answers with audio only.", "session.output_modalities")
			return
		}
	}
	if a := in.Audio; a != nil {
		if i := a.Input; i != nil {
			if i.Format != nil {
				if !validFormat(i.Format) {
					s.errorLocked(eventID, "invalid_request_error", "invalid_value", "Invalid audio format.", "session.audio.input.format")
					return
				}
				c.InputFormat = i.Format.Type
			}
			switch {
			case i.Transcription == nil:
			case isNull(i.Transcription):
				c.TranscriptionModel = ""
			default:
				var t struct {
					Model string `json:"model"`
				}
				if json.Unmarshal(i.Transcription, &t) != nil {
					s.errorLocked(eventID, "invalid_request_error", "invalid_value", "Invalid transcription.", "session.audio.input.transcription")
					return
				}
				c.TranscriptionModel = t.Model
				if c.TranscriptionModel == "" {
					c.TranscriptionModel = "whisper-1"
				}
			}
			switch {
			case i.TurnDetection == nil:
			case isNull(i.TurnDetection):
				c.TurnDetection = ""
			default:
				td := struct {
					Type              string `json:"type"`
					CreateResponse    *bool  `json:"create_response"`
					InterruptResponse *bool  `json:"interrupt_response"`
					SilenceMS         *int   `json:"silence_duration_ms"`
				}{}
				if json.Unmarshal(i.TurnDetection, &td) != nil || (td.Type != "server_vad" && td.Type != "semantic_vad") {
					s.errorLocked(eventID, "invalid_request_error", "invalid_value", "Invalid turn_detection.", "session.audio.input.turn_detection")
					return
				}
				c.TurnDetection = td.Type
				c.CreateResponse = td.CreateResponse == nil || *td.CreateResponse
				c.InterruptResponse = td.InterruptResponse == nil || *td.InterruptResponse
				c.SilenceMS = 500
				if td.SilenceMS != nil {
					c.SilenceMS = *td.SilenceMS
				}
			}
		}
		if o := a.Output; o != nil {
			if o.Format != nil {
				if !validFormat(o.Format) {
					s.errorLocked(eventID, "invalid_request_error", "invalid_value", "Invalid audio format.", "session.audio.output.format")
					return
				}
				c.OutputFormat = o.Format.Type
			}
			if o.Voice != nil {
				c.Voice = *o.Voice
			}
		}
	}
	if in.Tools != nil {
		var tools []struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		}
		if json.Unmarshal(*in.Tools, &tools) != nil {
			s.errorLocked(eventID, "invalid_request_error", "invalid_value", "Invalid tools.", "session.tools")
			return
		}
		c.Tools = nil
		for _, t := range tools {
			if t.Type != "function" || t.Name == "" {
				s.errorLocked(eventID, "invalid_request_error", "invalid_value", "Every tool must be a function with a name.", "session.tools")
				return
			}
			c.Tools = append(c.Tools, Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
		}
	}
	if in.ToolChoice != nil {
		c.ToolChoice = in.ToolChoice
	}
	c.Updates++
	s.cfg = c
	s.sendLocked(map[string]any{"type": "session.updated", "session": s.sessionObjectLocked()})
}

func validFormat(f *formatIn) bool {
	switch f.Type {
	case FormatPCMU, FormatPCMA:
		return true
	case FormatPCM:
		return f.Rate == 0 || f.Rate == 24000
	}
	return false
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// formatObject is an audio format as the server describes it.
func formatObject(f string) map[string]any {
	if f == FormatPCM {
		return map[string]any{"type": f, "rate": 24000}
	}
	return map[string]any{"type": f}
}

// sessionObjectLocked is the session as session.created / session.updated describe it
// (RealtimeSessionCreateResponseGA). s.mu is held.
func (s *Session) sessionObjectLocked() map[string]any {
	c := s.cfg
	in := map[string]any{"format": formatObject(c.InputFormat), "turn_detection": nil}
	if c.TranscriptionModel != "" {
		in["transcription"] = map[string]any{"model": c.TranscriptionModel}
	}
	if c.TurnDetection != "" {
		td := map[string]any{"type": c.TurnDetection, "create_response": c.CreateResponse, "interrupt_response": c.InterruptResponse}
		if c.TurnDetection == "server_vad" {
			td["threshold"] = 0.5
			td["prefix_padding_ms"] = 300
			td["silence_duration_ms"] = c.SilenceMS
		}
		in["turn_detection"] = td
	}
	tools := []map[string]any{}
	for _, t := range c.Tools {
		tool := map[string]any{"type": "function", "name": t.Name, "description": t.Description}
		if len(t.Parameters) > 0 {
			tool["parameters"] = t.Parameters
		}
		tools = append(tools, tool)
	}
	return map[string]any{
		"type": "realtime", "object": "realtime.session", "id": s.ID, "model": s.Model,
		"expires_at":        time.Now().Add(30 * time.Minute).Unix(),
		"output_modalities": []string{"audio"},
		"instructions":      c.Instructions,
		"audio": map[string]any{
			"input":  in,
			"output": map[string]any{"format": formatObject(c.OutputFormat), "voice": c.Voice, "speed": 1.0},
		},
		"tools":             tools,
		"tool_choice":       c.ToolChoice,
		"max_output_tokens": "inf",
	}
}
