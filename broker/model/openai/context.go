package openai

import "github.com/backchannel-io/backchannel/broker/model"

// contextEntry is a context item the broker set, and the conversation item that holds it on
// the current connection ("" when none does yet).
type contextEntry struct {
	id     string
	text   string
	itemID string
}

// SetContext implements model.Model: the item becomes a system message of the conversation,
// with no response. Items with the same ID replace each other: the previous message is
// deleted and the new one is added at the end, where the model sees the latest state. The
// adapter keeps every item, in the order they were set, to re-create them on a new
// connection; while it reconnects an item is only kept.
func (m *Model) SetContext(item model.ContextItem) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.usable() {
		return
	}
	old := ""
	for i, e := range m.contexts {
		if e.id == item.ID {
			old = e.itemID
			m.contexts = append(m.contexts[:i:i], m.contexts[i+1:]...)
			break
		}
	}
	e := &contextEntry{id: item.ID, text: item.Text}
	m.contexts = append(m.contexts, e)
	if m.c == nil {
		return // the restore creates it
	}
	if old != "" {
		_ = m.sendLocked(itemDelete{Type: evItemDelete, EventID: m.quietLocked("conversation.item.delete"), ItemID: old})
	}
	m.createContextLocked(e)
}

// createContextLocked adds a context item to the conversation as a system message. m.mu is
// held.
func (m *Model) createContextLocked(e *contextEntry) {
	id := m.nextID("bc_ctx_")
	msg := messageItem{ID: id, Type: itemTypeMessage, Role: roleSystem, Content: []contentPart{{Type: contentTypeInputText, Text: e.text}}}
	if m.sendLocked(itemCreate{Type: evItemCreate, EventID: m.nextID("bc_evt_"), Item: msg}) == nil {
		e.itemID = id
	}
}
