package backchannel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/backchannel-io/backchannel/frames"
)

// This file holds the requests a Host sends and how their outcome is known.
//
// A request is one client frame with an id. Most frames are answered by a frame whose ref is
// that id (tools.declared, tool_deferred_ack, job.cancel_result, tool_interaction_update_ack)
// or by an error frame with that ref. Some are answered with nothing when they succeed
// (tool_progress, tool_partial_result, tool_result, inject): those are "silent", and the
// writer follows every batch that holds one with a barrier, a request that is always
// answered and changes nothing. The broker applies the frames of one connection in order, so
// when the barrier's answer arrives every silent frame before it that got no error succeeded.
//
// After a drop the host resumes and sends a sync barrier before anything else. The broker
// replays every frame after last_seq before it reads the barrier, and a frame the broker read
// from the old connection is applied (and its answer kept for replay) before the resume, or
// never. So when the sync barrier's answer arrives, a request from the old connection that is
// still unanswered was never applied and is sent again; a silent one is ambiguous (it may have
// been applied without its barrier) and is handled by its resend rule.

// probeCallID is the call id of barriers: job.cancel of a call that cannot exist (the
// character 0 is not in the alphabet of broker call ids), answered by job.cancel_result
// unknown_call with no other effect.
const probeCallID = "call_00000000000000000000"

// reqKind tells how a request's success is known.
type reqKind int

const (
	answered reqKind = iota // the broker answers it with a frame carrying its ref
	silent                  // the broker answers only failures: a barrier confirms success
)

// resendRule says what to do with a silent request whose outcome a drop left unknown.
type resendRule int

const (
	resendNever  resendRule = iota // repeating could double-apply: fail with ErrUnconfirmed
	resendAlways                   // repeating is harmless (tool_progress, context-only partials)
	resendResult                   // tool_result: repeat; call_finished means the first one won
)

// reply is a request's outcome.
type reply struct {
	f   frames.Frame
	err error
}

// request is one client frame in flight. Its fields are guarded by Host.mu, except the ones
// set before it is queued.
type request struct {
	id   string
	typ  string
	data []byte
	kind reqKind
	rule resendRule
	// onReply runs on the reader goroutine (without Host.mu) when the answer, error or
	// confirmation arrives, and may change the outcome.
	onReply func(f frames.Frame, err error) (frames.Frame, error)

	barrier bool       // a barrier (internal)
	covers  []*request // the silent requests a barrier confirms
	written bool       // handed to a connection
	gen     uint64     // the connection generation it was written on
	order   uint64     // write order, to resend in order
	resent  bool       // sent again after a drop
	done    bool       // its outcome is known
	result  chan reply // receives the outcome once (buffered)
}

// newRequest encodes f (whose Request.ID the caller left empty) with a fresh id.
func (h *Host) newRequest(f frames.Frame, kind reqKind, rule resendRule) (*request, error) {
	id := h.newID()
	setRequestID(f, id)
	data, err := frames.Encode(f)
	if err != nil {
		return nil, fmt.Errorf("backchannel: %w", err)
	}
	if len(data) > maxFrameBytes {
		return nil, fmt.Errorf("backchannel: a %s frame of %d bytes is over the broker's frame limit of %d bytes", f.FrameType(), len(data), maxFrameBytes)
	}
	return &request{id: id, typ: f.FrameType(), data: data, kind: kind, rule: rule, result: make(chan reply, 1)}, nil
}

// maxFrameBytes is the broker's default frame limit (SPEC 2).
const maxFrameBytes = 1 << 20

// requestType is the type every client frame embeds for its id.
var requestType = reflect.TypeFor[frames.Request]()

// requestIndex caches embedded's lookups of requestType.
var requestIndex sync.Map

// setRequestID sets the id of a client frame f, a pointer to a struct of package frames that
// embeds frames.Request.
func setRequestID(f frames.Frame, id string) {
	if r, ok := embedded(f, requestType, &requestIndex); ok && r.CanSet() {
		r.Set(reflect.ValueOf(frames.Request{ID: id}))
		return
	}
	panic("backchannel: no request id for " + f.FrameType())
}

// newBarrier returns a barrier request; the caller registers it.
func (h *Host) newBarrier(covers []*request) *request {
	r, err := h.newRequest(&frames.JobCancel{CallID: probeCallID}, answered, resendNever)
	if err != nil {
		panic(err) // a fixed, valid frame
	}
	r.barrier, r.covers = true, covers
	return r
}

// do queues r and waits for its outcome, ctx, or the end of the host. A request whose ctx
// ends before it was written is never sent; one that was written may still be applied (its
// onReply still runs when its answer arrives).
func (h *Host) do(ctx context.Context, r *request) (frames.Frame, error) {
	h.mu.Lock()
	if h.stopped {
		err := h.err
		h.mu.Unlock()
		return nil, err
	}
	h.queue = append(h.queue, r)
	h.mu.Unlock()
	h.wakeWriter()
	select {
	case rep := <-r.result:
		return rep.f, rep.err
	case <-ctx.Done():
	}
	h.mu.Lock()
	if !r.written && !r.done {
		r.done = true
		h.queue = slices.DeleteFunc(h.queue, func(q *request) bool { return q == r })
	}
	h.mu.Unlock()
	select {
	case rep := <-r.result:
		return rep.f, rep.err
	default:
		return nil, ctx.Err()
	}
}

// complete settles r with an answer (or an error): onReply first, then the waiter.
func (h *Host) complete(r *request, f frames.Frame, err error) {
	if r.onReply != nil {
		f, err = r.onReply(f, err)
	}
	h.mu.Lock()
	h.settleLocked(r, f, err)
	h.mu.Unlock()
}

// settleLocked delivers r's outcome once. h.mu is held.
func (h *Host) settleLocked(r *request, f frames.Frame, err error) {
	if r.done {
		return
	}
	r.done = true
	delete(h.pending, r.id)
	r.result <- reply{f, err}
}

// answer routes a frame with a ref to the request it answers; it reports false when no
// pending request has that id (the frame is then an event).
func (h *Host) answer(ref string, f frames.Frame) bool {
	h.mu.Lock()
	r := h.pending[ref]
	if r == nil {
		h.mu.Unlock()
		return false
	}
	if r.barrier {
		r.done = true
		delete(h.pending, r.id)
		var covered []*request
		for _, s := range r.covers {
			if !s.done {
				covered = append(covered, s)
			}
		}
		isSync := r == h.syncReq
		h.mu.Unlock()
		for _, s := range covered {
			h.complete(s, nil, nil)
		}
		if isSync {
			h.resync()
		}
		return true
	}
	h.mu.Unlock()
	if e, ok := f.(*frames.Error); ok {
		h.complete(r, nil, e)
	} else if r.kind == silent {
		h.complete(r, nil, nil)
	} else {
		h.complete(r, f, nil)
	}
	return true
}

// failUnconfirmed fails the silent requests still waiting for their barrier with e: an error
// frame without ref (a frame over a limit) cannot be matched to its request, and a false
// success is worse than a false failure.
func (h *Host) failUnconfirmed(e *frames.Error) {
	h.mu.Lock()
	var rs []*request
	for _, r := range h.pending {
		if r.kind == silent && !r.done {
			rs = append(rs, r)
		}
	}
	h.mu.Unlock()
	for _, r := range rs {
		h.complete(r, nil, e)
	}
}

// resync runs when the sync barrier of a resumed connection is answered: every frame the
// broker applied from older connections has been answered by now (section comment above).
func (h *Host) resync() {
	h.mu.Lock()
	h.syncing, h.syncReq = false, nil
	var old []*request
	for id, r := range h.pending {
		if r.gen >= h.gen {
			continue
		}
		if r.barrier {
			delete(h.pending, id)
			continue
		}
		old = append(old, r)
	}
	slices.SortFunc(old, func(a, b *request) int { return cmp.Compare(a.order, b.order) })
	var front, failed []*request
	for _, r := range old {
		switch {
		case r.kind == answered, r.rule == resendAlways:
		case r.rule == resendResult:
			r.resent = true
		default:
			failed = append(failed, r)
			continue
		}
		delete(h.pending, r.id)
		r.written = false
		front = append(front, r)
	}
	if h.declared && !h.sawDeferredResume {
		// The broker sends tool_deferred_resume to every slot that has declared tools: without
		// one, it lost the tool set (SPEC 10), so declare it again.
		if r, err := h.declareRequest(h.decls); err == nil {
			front = append([]*request{r}, front...)
		}
	}
	h.queue = append(front, h.queue...)
	h.mu.Unlock()
	for _, r := range failed {
		h.complete(r, nil, fmt.Errorf("%w (%s)", ErrUnconfirmed, r.typ))
	}
	if len(front) > 0 {
		h.log.Debug("backchannel: resending after resume", "frames", len(front))
	}
	h.wakeWriter()
}

// isCode reports whether err carries an error frame with code.
func isCode(err error, code frames.Code) bool {
	var fe *frames.Error
	return errors.As(err, &fe) && fe.Code == code
}
