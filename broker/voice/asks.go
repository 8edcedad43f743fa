package voice

import (
	"fmt"
	"time"

	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/narration"
)

// ask is an open interaction of a voice job (SPEC 9).
type ask struct {
	id        string
	callID    string
	prompt    string
	options   []string
	attempts  int       // attempts queued so far
	askedSeq  int       // when its narration last started speaking (0: never)
	delivered time.Time // when an attempt was last delivered
	item      *narration.Item
	reask     func() // stops the re-ask
}

// latestAsk is the most recently asked open interaction.
func (v *Voice) latestAsk() *ask {
	var best *ask
	for _, a := range v.asks {
		if a.askedSeq > 0 && (best == nil || a.askedSeq > best.askedSeq) {
			best = a
		}
	}
	return best
}

// queueAsk queues the next attempt of an open ask (SPEC 9: at most narration.MaxAskAttempts).
func (v *Voice) queueAsk(a *ask) {
	if a.attempts >= narration.MaxAskAttempts || a.item != nil {
		return
	}
	a.attempts++
	d := &itemData{req: model.Request{Kind: model.InteractionAsk, Prompt: a.prompt, Options: a.options}}
	if vc := v.calls[a.callID]; vc != nil {
		d.handle, d.slot = vc.handle, vc.slot
	}
	a.item = &narration.Item{Kind: narration.InteractionAsk, CallID: a.callID, Key: a.id, Attempt: a.attempts, Payload: d}
	v.queueItem(a.item)
}

// armReask asks a delivered, unanswered ask again ReaskAfter later (SPEC 9).
func (v *Voice) armReask(a *ask) {
	if a.reask != nil {
		a.reask()
	}
	a.reask = v.env.After(v.opts.ReaskAfter, func() {
		if v.asks[a.id] == a && a.item == nil && !v.done {
			v.queueAsk(a)
		}
	})
}

// askOf returns the open ask an item voices.
func (v *Voice) askOf(it *narration.Item) *ask {
	if it.Kind != narration.InteractionAsk {
		return nil
	}
	if a := v.asks[it.Key]; a != nil && a.item == it {
		return a
	}
	return nil
}

// closeAsk closes an ask: its pending narration is stopped (SPEC 9); moot tells the model not
// to act on it.
func (v *Voice) closeAsk(id string, moot bool) {
	a := v.asks[id]
	if a == nil {
		return
	}
	delete(v.asks, id)
	defer v.updateAutoRespond()
	if a.reask != nil {
		a.reask()
	}
	if it := a.item; it != nil {
		if removed := v.queue.Remove(func(x *narration.Item) bool { return x == it }); len(removed) > 0 {
			v.lifecycle(it, "stopped", "")
		} else {
			for _, r := range v.playing {
				if r.item == it && !r.interrupted {
					r.item = nil // it ends here; the response is cut
					r.interrupted = true
					r.frames = nil
					v.m.Cancel(r.id)
					v.lifecycle(it, "stopped", r.id)
				}
			}
		}
	}
	if moot {
		v.m.SetContext(model.ContextItem{ID: "interaction:" + id, Text: fmt.Sprintf("The question %s (%q) is moot: do not act on it.", id, a.prompt)})
	}
	v.play()
}

// answer gives a matched caller reply to the host (SPEC 9): it closes the interaction and is no
// turn of the model.
func (v *Voice) answer(a *ask, option, text string) {
	res, err := v.env.AnswerInteraction(a.callID, a.id, option, text)
	if err != nil || res != frames.UpdateApplied {
		v.closeAsk(a.id, false)
		v.m.CallerTurn(text, nil)
		return
	}
	v.closeAsk(a.id, false)
	v.m.SetContext(model.ContextItem{ID: "interaction:" + a.id, Text: fmt.Sprintf("Caller answered %s: %s", a.id, text)})
}
