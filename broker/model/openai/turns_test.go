package openai

import (
	"testing"
	"time"
)

func TestHeardTurns(t *testing.T) {
	now := time.Now()
	var h heardTurns
	h.committed("item_a", true)
	h.committed("item_b", false)
	h.committed("item_c", true)
	h.transcribed("item_a", "yes", now)
	h.transcribed("item_b", "say  hi ", now)
	// item_c has no transcript yet: it never matches.
	if _, ok := h.take("", now); ok {
		t.Error("an untranscribed turn matched")
	}
	got, ok := h.take("say hi", now)
	if !ok || got.itemID != "item_b" || got.answered {
		t.Fatalf("take = %+v, %v", got, ok)
	}
	// item_a was older: the broker consumed it (a permission reply, say); it is gone.
	if _, ok := h.take("yes", now); ok {
		t.Error("a consumed older turn matched")
	}
	h.transcribed("item_c", "later", now.Add(-2*heardWindow))
	if _, ok := h.take("later", now); ok {
		t.Error("a turn older than the window matched: a typed turn must not be taken for it")
	}
	h.committed("item_d", true)
	h.forget("item_d")
	for i := range maxHeard + 5 {
		h.committed("x", i%2 == 0)
	}
	if len(h.turns) > maxHeard {
		t.Errorf("%d turns remembered", len(h.turns))
	}
}
