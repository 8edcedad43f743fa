package openai

import "github.com/backchannel-io/backchannel/broker/model"

// SetContext implements model.Model: the item becomes a system message of the conversation,
// with no response. Items with the same ID replace each other: the previous message is
// deleted and the new one is added at the end, where the model sees the latest state.
func (m *Model) SetContext(item model.ContextItem) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.usable() {
		return
	}
	if old := m.contexts[item.ID]; old != "" {
		_ = m.sendLocked(itemDelete{Type: evItemDelete, EventID: m.quietLocked("conversation.item.delete"), ItemID: old})
	}
	id := m.nextID("bc_ctx_")
	msg := messageItem{ID: id, Type: itemTypeMessage, Role: roleSystem, Content: []contentPart{{Type: contentTypeInputText, Text: item.Text}}}
	if m.sendLocked(itemCreate{Type: evItemCreate, EventID: m.nextID("bc_evt_"), Item: msg}) == nil {
		m.contexts[item.ID] = id
	}
}
