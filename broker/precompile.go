package broker

import (
	"crypto/subtle"
	"sync"

	"github.com/backchannel-io/backchannel/frames"
)

// A declaration's checks, tool count and schema compilations run before it reaches the session
// loop, on the goroutine of the connection that sent it: Client.Receive prepares a
// tools.declare (precompile), Node.Hello the tools of a hello (precompileHello). The prepared
// declaration travels with the frame's event and is bound to the session while that event runs
// (during), where declare finds it. The session's tool count (SPEC 4) is taken first, from the
// loop, in order with the connection's earlier frames, so a declaration over the limit compiles
// nothing; declare counts again when it applies the declaration, in case another connection
// declared meanwhile.

// bound holds, while an event runs, the declaration prepared for it, by session.
var bound sync.Map // *Session → *preparedTools

// during runs fn, an event of s, with p bound to it (just fn when p is nil).
func (p *preparedTools) during(s *Session, fn func()) {
	if p == nil {
		fn()
		return
	}
	bound.Store(s, p)
	defer bound.Delete(s)
	fn()
}

// preparedFor is the declaration prepared for decls and bound to the running event, or nil.
func (s *Session) preparedFor(decls []frames.ToolDecl) *preparedTools {
	v, ok := bound.Load(s)
	if !ok {
		return nil
	}
	p := v.(*preparedTools)
	if len(p.decls) != len(decls) || len(decls) > 0 && &p.decls[0] != &decls[0] {
		return nil
	}
	return p
}

// precompile prepares a tools.declare on the connection's goroutine; nil for any other frame,
// and for a frame the session will not apply.
func (c *Client) precompile(f frames.Frame) *preparedTools {
	d, ok := f.(*frames.ToolsDeclare)
	if !ok || !allowed(c.role, d.FrameType()) {
		return nil
	}
	return c.session.prepareOff(c.slot.id, "", d.Tools)
}

// precompileHello prepares the tools of a hello: those of a resume replace the resumed slot's
// tools (and are compiled only if the resume token is the slot's), those of a new connection
// come with a new slot.
func (s *Session) precompileHello(h *frames.Hello) *preparedTools {
	if len(h.Tools) == 0 {
		return nil
	}
	slotID, secret := "", ""
	if h.ResumeToken != "" {
		var ok bool
		if slotID, secret, ok = parseResumeToken(h.ResumeToken); !ok {
			return nil
		}
	}
	return s.prepareOff(slotID, secret, h.Tools)
}

// prepareOff prepares decls, the declaration of slot slotID ("": a new slot), off the loop.
func (s *Session) prepareOff(slotID, secret string, decls []frames.ToolDecl) *preparedTools {
	if len(decls) == 0 {
		return prepareTools(decls, nil, 0)
	}
	type answer struct {
		names map[string]bool
		ok    bool
	}
	ch := make(chan answer, 1)
	if !s.post(func() {
		if secret != "" {
			sl := s.slots[slotID]
			if hash := hashToken(secret); sl == nil || subtle.ConstantTimeCompare(hash[:], sl.tokenHash[:]) != 1 {
				ch <- answer{} // the resume fails: nothing to compile
				return
			}
		}
		ch <- answer{s.toolNamesExcept(slotID), true}
	}) {
		return nil
	}
	a := <-ch
	if !a.ok {
		return nil
	}
	return prepareTools(decls, a.names, s.node.cfg.Limits.MaxTools)
}
