package sim

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Item is an item of the conversation.
type Item struct {
	ID     string
	Type   string // message, function_call, function_call_output
	Role   string // user, system, assistant (messages)
	Status string // completed, incomplete, in_progress
	// Text is a message's text: the input_text of a user or system message, the transcript
	// of a user audio message or of an assistant message.
	Text    string
	Audio   bool  // a user input_audio or an assistant output_audio message
	AudioMS int64 // an assistant message's audio (after truncation)
	CallID  string
	Name    string
	// Arguments of a function call; Output of a function call output.
	Arguments string
	Output    string
}

// Conversation returns the items of the default conversation, in order.
func (s *Session) Conversation() []Item {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Item, len(s.items))
	for i, it := range s.items {
		out[i] = *it
	}
	return out
}

// object is the item as events describe it (RealtimeConversationItem).
func (it *Item) object() map[string]any {
	o := map[string]any{"id": it.ID, "object": "realtime.item", "type": it.Type, "status": it.Status}
	switch it.Type {
	case "message":
		o["role"] = it.Role
		var part map[string]any
		switch {
		case it.Role == "assistant":
			part = map[string]any{"type": "output_audio", "transcript": it.Text}
		case it.Audio:
			part = map[string]any{"type": "input_audio", "transcript": it.Text}
		default:
			part = map[string]any{"type": "input_text", "text": it.Text}
		}
		o["content"] = []any{part}
	case "function_call":
		o["call_id"], o["name"], o["arguments"] = it.CallID, it.Name, it.Arguments
	case "function_call_output":
		o["call_id"], o["output"] = it.CallID, it.Output
	}
	return o
}

func (s *Session) findLocked(id string) (int, *Item) {
	for i, it := range s.items {
		if it.ID == id {
			return i, it
		}
	}
	return -1, nil
}

// previousIDLocked is the id of the last item, or nil.
func (s *Session) previousIDLocked() any {
	if len(s.items) == 0 {
		return nil
	}
	return s.items[len(s.items)-1].ID
}

// addLocked appends an item and announces it (conversation.item.added, and .done when it is
// complete). s.mu is held.
func (s *Session) addLocked(it *Item) {
	prev := s.previousIDLocked()
	s.items = append(s.items, it)
	s.sendLocked(map[string]any{"type": "conversation.item.added", "previous_item_id": prev, "item": it.object()})
	if it.Status == "completed" {
		s.sendLocked(map[string]any{"type": "conversation.item.done", "previous_item_id": prev, "item": it.object()})
	}
}

// itemCreateLocked applies conversation.item.create. s.mu is held.
func (s *Session) itemCreateLocked(eventID string, b []byte) {
	var ev struct {
		Item *struct {
			ID      string `json:"id"`
			Type    string `json:"type"`
			Role    string `json:"role"`
			Content []struct {
				Type       string `json:"type"`
				Text       string `json:"text"`
				Transcript string `json:"transcript"`
			} `json:"content"`
			CallID    string  `json:"call_id"`
			Name      string  `json:"name"`
			Arguments string  `json:"arguments"`
			Output    *string `json:"output"`
		} `json:"item"`
	}
	if err := json.Unmarshal(b, &ev); err != nil || ev.Item == nil {
		s.errorLocked(eventID, "invalid_request_error", "invalid_value", "Missing or malformed item.", "item")
		return
	}
	in := ev.Item
	if in.ID != "" {
		if _, old := s.findLocked(in.ID); old != nil {
			s.errorLocked(eventID, "invalid_request_error", "duplicate_item_id", fmt.Sprintf("Item with id '%s' already exists.", in.ID), "item.id")
			return
		}
		if len(in.ID) > 32 {
			s.errorLocked(eventID, "invalid_request_error", "invalid_value", "Item ids are at most 32 characters.", "item.id")
			return
		}
	}
	if s.srv.rejects(in.Type) {
		s.errorLocked(eventID, "invalid_request_error", "invalid_value", fmt.Sprintf("Items of type '%s' cannot be created by the client.", in.Type), "item.type")
		return
	}
	it := &Item{ID: in.ID, Type: in.Type, Role: in.Role, Status: "completed"}
	if it.ID == "" {
		it.ID = "item_" + randomID()
	}
	switch in.Type {
	case "message":
		if in.Role != "user" && in.Role != "system" && in.Role != "assistant" {
			s.errorLocked(eventID, "invalid_request_error", "invalid_value", "Invalid role.", "item.role")
			return
		}
		if len(in.Content) == 0 {
			s.errorLocked(eventID, "invalid_request_error", "invalid_value", "A message needs content.", "item.content")
			return
		}
		var texts []string
		for _, c := range in.Content {
			switch {
			case c.Type == "input_text" && in.Role != "assistant", c.Type == "output_text" && in.Role == "assistant":
				texts = append(texts, c.Text)
			case c.Type == "input_audio" && in.Role == "user":
				it.Audio = true
				texts = append(texts, c.Transcript)
			default:
				s.errorLocked(eventID, "invalid_request_error", "invalid_value", fmt.Sprintf("Content type '%s' is not valid for a %s message.", c.Type, in.Role), "item.content")
				return
			}
		}
		it.Text = strings.Join(texts, " ")
	case "function_call_output":
		if in.Output == nil || in.CallID == "" {
			s.errorLocked(eventID, "invalid_request_error", "invalid_value", "A function_call_output needs call_id and output.", "item")
			return
		}
		if s.callLocked(in.CallID) == nil {
			s.errorLocked(eventID, "invalid_request_error", "invalid_value", fmt.Sprintf("No function call with call_id '%s' in the conversation.", in.CallID), "item.call_id")
			return
		}
		it.CallID, it.Output = in.CallID, *in.Output
	case "function_call":
		it.CallID, it.Name, it.Arguments = in.CallID, in.Name, in.Arguments
	default:
		s.errorLocked(eventID, "invalid_request_error", "invalid_value", fmt.Sprintf("Invalid item type '%s'.", in.Type), "item.type")
		return
	}
	s.addLocked(it)
}

// callLocked finds the function call with callID.
func (s *Session) callLocked(callID string) *Item {
	for _, it := range s.items {
		if it.Type == "function_call" && it.CallID == callID {
			return it
		}
	}
	return nil
}

// itemDeleteLocked applies conversation.item.delete. s.mu is held.
func (s *Session) itemDeleteLocked(eventID string, b []byte) {
	var ev struct {
		ItemID string `json:"item_id"`
	}
	_ = json.Unmarshal(b, &ev)
	i, it := s.findLocked(ev.ItemID)
	if it == nil {
		s.errorLocked(eventID, "invalid_request_error", "item_not_found", fmt.Sprintf("Item with item_id '%s' not found.", ev.ItemID), "item_id")
		return
	}
	s.items = append(s.items[:i:i], s.items[i+1:]...)
	s.sendLocked(map[string]any{"type": "conversation.item.deleted", "item_id": it.ID})
}

// itemTruncateLocked applies conversation.item.truncate: the assistant audio is cut at
// audio_end_ms and its transcript dropped. s.mu is held.
func (s *Session) itemTruncateLocked(eventID string, b []byte) {
	var ev struct {
		ItemID       string `json:"item_id"`
		ContentIndex *int   `json:"content_index"`
		AudioEndMS   *int64 `json:"audio_end_ms"`
	}
	_ = json.Unmarshal(b, &ev)
	_, it := s.findLocked(ev.ItemID)
	switch {
	case it == nil:
		s.errorLocked(eventID, "invalid_request_error", "item_not_found", fmt.Sprintf("Item with item_id '%s' not found.", ev.ItemID), "item_id")
	case it.Role != "assistant" || !it.Audio:
		s.errorLocked(eventID, "invalid_request_error", "invalid_value", "Only assistant audio messages can be truncated.", "item_id")
	case ev.ContentIndex == nil || *ev.ContentIndex != 0 || ev.AudioEndMS == nil || *ev.AudioEndMS < 0:
		s.errorLocked(eventID, "invalid_request_error", "invalid_value", "content_index must be 0 and audio_end_ms a duration.", "audio_end_ms")
	case *ev.AudioEndMS > it.AudioMS:
		s.errorLocked(eventID, "invalid_request_error", "invalid_value", fmt.Sprintf("audio_end_ms %d is longer than the audio (%d ms).", *ev.AudioEndMS, it.AudioMS), "audio_end_ms")
	default:
		it.AudioMS = *ev.AudioEndMS
		it.Text = ""
		s.sendLocked(map[string]any{"type": "conversation.item.truncated", "item_id": it.ID, "content_index": 0, "audio_end_ms": it.AudioMS})
	}
}

// itemRetrieveLocked answers conversation.item.retrieve. s.mu is held.
func (s *Session) itemRetrieveLocked(eventID string, b []byte) {
	var ev struct {
		ItemID string `json:"item_id"`
	}
	_ = json.Unmarshal(b, &ev)
	_, it := s.findLocked(ev.ItemID)
	if it == nil {
		s.errorLocked(eventID, "invalid_request_error", "item_not_found", fmt.Sprintf("Item with item_id '%s' not found.", ev.ItemID), "item_id")
		return
	}
	s.sendLocked(map[string]any{"type": "conversation.item.retrieved", "item": it.object()})
}
