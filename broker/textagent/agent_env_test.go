package textagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// This file holds the fake Env the agent tests drive the protocol with: a fake clock whose
// timers fire when the test advances time, a small job engine (jobs, cancels, the parent
// cascade of SPEC 11, changes posted back to the session loop like the broker's OnChange), and
// recorders of everything the agent did. Texts the tests expect are written out literally from
// SPEC 13, never taken from the package's constants.

// The fixed texts of SPEC 13, as the spec writes them.
const (
	specReminder      = "Reminder: when working on a task use `status` tool to acknowledge it."
	specAdvice        = "Consider status(waiting) and event-driven wakeups instead of repeated timed waits."
	specInterruptedEx = "internal: true\nwait_outcome: interrupted\nwait_reason: activating_input\nwait_mode: exact"
	specInterruptedAB = "internal: true\nwait_outcome: interrupted\nwait_reason: activating_input\nwait_mode: any_background"
	specCanceled      = "error: Tool call canceled"
	specConsumed      = "error: Tool call result already consumed"
	specBeingWaited   = "error: Tool call result is already being waited for"
	specNoBackground  = "error: No background tool call to wait for"
	specBarePending   = "error: A wait for the next background completion is already pending"
	specBadTimeout    = "error: timeout_minutes must be a positive integer"
	specCancelOK      = "Tool cancellation requested"
	specEmptyID       = "error: `tool_call_id` must not be empty"
	specAlreadyDone   = "error: Tool call is already done"
	specAlreadyCanc   = "error: Tool call already canceled"
	specCannotCancel  = "error: Tool call cannot be canceled"
	specInputAvail    = "input_available: true"
	specTimedOut      = "timed_out: true"
	specCancelNotice  = "tool call cancellation request"
)

func specPlaceholderText(id string) string {
	return "internal: true\n\nTool call `" + id + "` is running in the background."
}

func specCompletion(id string) string {
	return "[internal] Tool call `" + id + "` completed. Its result is queued; use `wait` to consume it."
}

func specUnknownID(escapedID string) string {
	return "error: Unknown tool call id\ntool_call_id: " + escapedID
}

// --- the fake clock ---

type agTimer struct {
	at      time.Time
	seq     int
	fn      func()
	stopped bool
}

// --- the fake engine ---

// agJob is a job of the fake engine.
type agJob struct {
	id      string
	req     CallRequest
	started time.Time
	state   jobs.State          // "" while open
	reason  frames.CancelReason // the reason it was cancelled with, if it was
	closes  int                 // terminal transitions: never more than one
}

type agCancel struct {
	id     string
	reason frames.CancelReason
}

type agLocal struct {
	id      string
	output  string
	errText string
	isError bool
}

type agAnswer struct{ id, interaction, option, text string }

type agNotice struct {
	text   string
	detail map[string]any
}

// agEnv is the fake Env.
type agEnv struct {
	t *testing.T
	a *Agent

	now    time.Time
	tseq   int
	timers []*agTimer

	sent      []frames.Frame
	promptIDs map[string]bool
	answered  map[string]string // call id → kind of its answer (placeholder, then final)

	starts   []CallRequest
	startErr map[string]string // by tool name: StartCall answers with this error
	jobs     map[string]*agJob
	jseq     int

	cancels        []agCancel
	cancelOverride map[string]frames.CancelResult // by broker id: CancelCall answers this and changes nothing
	cancelErr      error

	locals   []agLocal
	localErr error

	answers      []agAnswer
	answerResult frames.InteractionUpdateResult
	answerErr    error

	notices []agNotice

	posted []func() // engine changes posted to the session loop, not yet run
	manual bool     // the test runs posted changes itself (drain)
	reused bool     // call ids repeat across conversations: skip the once-per-id check
}

func (e *agEnv) Now() time.Time { return e.now }

func (e *agEnv) After(d time.Duration, fn func()) func() {
	e.tseq++
	tm := &agTimer{at: e.now.Add(d), seq: e.tseq, fn: fn}
	e.timers = append(e.timers, tm)
	return func() { tm.stopped = true }
}

func (e *agEnv) Send(f frames.Frame) {
	e.sent = append(e.sent, f)
	switch f := f.(type) {
	case *frames.AgentToolResult:
		e.checkResult(f)
	case *frames.AgentPrompt:
		if f.PromptID == "" {
			e.t.Errorf("agent.prompt without prompt_id: %q", f.Text)
		}
		if e.promptIDs[f.PromptID] {
			e.t.Errorf("prompt_id %q used twice", f.PromptID)
		}
		e.promptIDs[f.PromptID] = true
	}
}

// checkResult checks the invariants of every agent.tool_result: kind error exactly when the
// content has an error header; at most one placeholder, before the one final answer.
func (e *agEnv) checkResult(f *frames.AgentToolResult) {
	hs, _, _ := agParse(f.Content)
	_, hasErr := hs["error"]
	switch f.Kind {
	case frames.ResultKindError:
		if !hasErr {
			e.t.Errorf("result of %s has kind error without an error header: %q", f.CallID, f.Content)
		}
	case frames.ResultKindResult:
		if hasErr {
			e.t.Errorf("result of %s has kind result with an error header: %q", f.CallID, f.Content)
		}
	case frames.ResultKindBackgroundPlaceholder:
		if hasErr {
			e.t.Errorf("placeholder of %s has an error header: %q", f.CallID, f.Content)
		}
	default:
		e.t.Errorf("result of %s has kind %q", f.CallID, f.Kind)
	}
	if e.reused {
		return
	}
	prev := e.answered[f.CallID]
	switch {
	case prev == "final":
		e.t.Errorf("call %s answered again after its result: %s %q", f.CallID, f.Kind, f.Content)
	case prev == "placeholder" && f.Kind == frames.ResultKindBackgroundPlaceholder:
		e.t.Errorf("call %s got a second placeholder", f.CallID)
	}
	if f.Kind == frames.ResultKindBackgroundPlaceholder {
		e.answered[f.CallID] = "placeholder"
	} else {
		e.answered[f.CallID] = "final"
	}
}

func (e *agEnv) StartCall(r CallRequest) (string, string) {
	e.starts = append(e.starts, r)
	if msg := e.startErr[r.Name]; msg != "" {
		return "", msg
	}
	e.jseq++
	id := fmt.Sprintf("call_%03d", e.jseq)
	e.jobs[id] = &agJob{id: id, req: r, started: e.now}
	return id, ""
}

func (e *agEnv) LocalResult(brokerID string, output json.RawMessage, errText string, isError bool) error {
	e.locals = append(e.locals, agLocal{id: brokerID, output: string(output), errText: errText, isError: isError})
	if e.localErr != nil {
		return e.localErr
	}
	if isError {
		e.terminate(brokerID, Outcome{State: jobs.Failed, Error: errText, Output: output}, "")
	} else {
		e.terminate(brokerID, Outcome{State: jobs.Completed, Output: output}, "")
	}
	e.autoDrain()
	return nil
}

func (e *agEnv) CancelCall(brokerID string, reason frames.CancelReason) (frames.CancelResult, error) {
	e.cancels = append(e.cancels, agCancel{id: brokerID, reason: reason})
	if r, ok := e.cancelOverride[brokerID]; ok {
		return r, nil
	}
	if e.cancelErr != nil {
		return "", e.cancelErr
	}
	j := e.jobs[brokerID]
	switch {
	case j == nil:
		return frames.CancelResultUnknownCall, errors.New("unknown call")
	case j.state == jobs.Cancelled:
		return frames.CancelResultAlreadyCanceled, nil
	case j.state != "":
		return frames.CancelResultAlreadyDone, nil
	}
	e.terminate(brokerID, Outcome{State: jobs.Cancelled}, reason)
	return frames.CancelResultCancelled, nil
}

func (e *agEnv) AnswerInteraction(brokerID, interactionID, option, text string) (frames.InteractionUpdateResult, error) {
	e.answers = append(e.answers, agAnswer{brokerID, interactionID, option, text})
	return e.answerResult, e.answerErr
}

func (e *agEnv) Notice(text string, detail map[string]any) {
	e.notices = append(e.notices, agNotice{text, detail})
}

// terminate moves an open job of the fake engine to its terminal state and posts the change to
// the session loop; a job that is cancelled or times out then closes its open descendants with
// parent_cancelled (SPEC 11), after its own transition, as the engine's cascade does — going
// through children that already ended to their open children.
func (e *agEnv) terminate(id string, o Outcome, reason frames.CancelReason) bool {
	j := e.jobs[id]
	if j == nil || j.state != "" {
		return false
	}
	j.state, j.reason = o.State, reason
	j.closes++
	if o.Duration == 0 {
		o.Duration = e.now.Sub(j.started)
	}
	if j.req.Local && o.State == jobs.Cancelled {
		e.posted = append(e.posted, func() { e.a.LocalCancelled(id) })
	}
	e.posted = append(e.posted, func() { e.a.Finished(id, o) })
	if o.State == jobs.Cancelled || o.State == jobs.TimedOut {
		e.cascade(id, map[string]bool{id: true})
	}
	return true
}

// cascade closes the open descendants of id, walking through ended children.
func (e *agEnv) cascade(id string, seen map[string]bool) {
	var kids []string
	for cid, c := range e.jobs {
		if c.req.ParentCallID == id && !seen[cid] {
			kids = append(kids, cid)
		}
	}
	sort.Strings(kids)
	for _, cid := range kids {
		seen[cid] = true
		if e.jobs[cid].state == "" {
			e.terminate(cid, Outcome{State: jobs.Cancelled}, frames.CancelParentCancelled)
		} else {
			e.cascade(cid, seen)
		}
	}
}

// drain runs the posted changes, in order, as the session loop does after the current event.
func (e *agEnv) drain() {
	for len(e.posted) > 0 {
		fn := e.posted[0]
		e.posted = e.posted[1:]
		fn()
	}
}

func (e *agEnv) autoDrain() {
	if !e.manual {
		e.drain()
	}
}

// --- the harness ---

type agHarness struct {
	*agEnv
	t    *testing.T
	mark int // frames before mark were looked at already
	fseq int
}

// newAg returns a harness whose root conversation has accepted the status `working` (call id
// s0), so that its calls queue no status reminder; newAgRaw one whose root never set a status.
func newAg(t *testing.T, opts Options) *agHarness {
	t.Helper()
	h := newAgRaw(t, opts)
	h.call(RootConversation, "s0", "status", `{"state":"working","title":"testing"}`)
	h.expect(agOK("s0", "Status set to `working`: testing"))
	return h
}

func newAgRaw(t *testing.T, opts Options) *agHarness {
	t.Helper()
	e := &agEnv{t: t, now: time.Unix(1_700_000_000, 0), promptIDs: map[string]bool{}, answered: map[string]string{},
		startErr: map[string]string{}, jobs: map[string]*agJob{}, cancelOverride: map[string]frames.CancelResult{},
		answerResult: frames.UpdateApplied}
	e.a = New(e, opts)
	return &agHarness{agEnv: e, t: t}
}

func (h *agHarness) nextFrameID() string {
	h.fseq++
	return "f" + strconv.Itoa(h.fseq)
}

func (h *agHarness) handle(f frames.Frame) {
	h.a.Handle(f)
	h.autoDrain()
}

// call is an agent.tool_call of conversation conv; args is JSON.
func (h *agHarness) call(conv, id, name, args string) {
	h.handle(&frames.AgentToolCall{Request: frames.Request{ID: h.nextFrameID()}, CallID: id, ConversationID: conv,
		Name: name, Arguments: json.RawMessage(args)})
}

func (h *agHarness) local(conv, id, name, args string) {
	h.handle(&frames.AgentToolCall{Request: frames.Request{ID: h.nextFrameID()}, CallID: id, ConversationID: conv,
		Name: name, Arguments: json.RawMessage(args), Local: true})
}

func (h *agHarness) turnStart(conv string) {
	h.handle(&frames.AgentTurnStart{Request: frames.Request{ID: h.nextFrameID()}, ConversationID: conv})
}

func (h *agHarness) turnEnd(conv string) {
	h.handle(&frames.AgentTurnEnd{Request: frames.Request{ID: h.nextFrameID()}, ConversationID: conv})
}

// message sends agent.message with frame id ref.
func (h *agHarness) message(ref, from, to, text string) {
	h.handle(&frames.AgentMessage{Request: frames.Request{ID: ref}, ConversationID: from, ToConversationID: to, Text: text})
}

func (h *agHarness) final(conv, text string) {
	h.handle(&frames.AgentFinal{Request: frames.Request{ID: h.nextFrameID()}, ConversationID: conv, Text: text})
}

// create creates a child conversation and returns its id (the conversation.created frame is
// checked and marked seen).
func (h *agHarness) create(parent, parentCall string) string {
	h.t.Helper()
	h.skip()
	ref := h.nextFrameID()
	h.handle(&frames.ConversationCreate{Request: frames.Request{ID: ref}, ParentConversationID: parent, ParentCallID: parentCall})
	fs := h.take()
	if len(fs) != 1 {
		h.t.Fatalf("conversation.create: got %s", agDescribeAll(fs))
	}
	c, ok := fs[0].(*frames.ConversationCreated)
	if !ok || c.Ref != ref || c.ConversationID == "" || c.ConversationID == RootConversation {
		h.t.Fatalf("conversation.create: got %s", agDescribeAll(fs))
	}
	return c.ConversationID
}

func (h *agHarness) cancelConv(conv string) {
	h.handle(&frames.ConversationCancel{Request: frames.Request{ID: h.nextFrameID()}, ConversationID: conv})
}

// job returns the fake engine's job of the agent's call id in conv.
func (h *agHarness) job(conv, id string) *agJob {
	h.t.Helper()
	for _, j := range h.jobs {
		if j.req.ConversationID == conv && j.req.CallID == id {
			return j
		}
	}
	h.t.Fatalf("no job for call %s of conversation %s", id, conv)
	return nil
}

func (h *agHarness) bid(conv, id string) string { return h.job(conv, id).id }

// complete ends the call id of conv with output (JSON) at the current time.
func (h *agHarness) complete(conv, id, output string) {
	h.t.Helper()
	if !h.terminate(h.bid(conv, id), Outcome{State: jobs.Completed, Output: json.RawMessage(output)}, "") {
		h.t.Fatalf("complete %s: job is not open", id)
	}
	h.autoDrain()
}

// end ends the call id of conv with outcome o (a cancelled or timed-out end cascades).
func (h *agHarness) end(conv, id string, o Outcome) {
	h.t.Helper()
	if !h.terminate(h.bid(conv, id), o, frames.CancelHostRequest) {
		h.t.Fatalf("end %s: job is not open", id)
	}
	h.autoDrain()
}

// advance moves the clock by d, firing the timers that come due in order.
func (h *agHarness) advance(d time.Duration) {
	until := h.now.Add(d)
	for {
		var next *agTimer
		for _, tm := range h.timers {
			if !tm.stopped && !tm.at.After(until) && (next == nil || tm.at.Before(next.at) || tm.at.Equal(next.at) && tm.seq < next.seq) {
				next = tm
			}
		}
		if next == nil {
			break
		}
		next.stopped = true
		h.now = next.at
		next.fn()
		h.autoDrain()
	}
	h.now = until
}

// liveTimers counts the timers still armed.
func (h *agHarness) liveTimers() int {
	n := 0
	for _, tm := range h.timers {
		if !tm.stopped {
			n++
		}
	}
	return n
}

// take returns the frames sent since the last look.
func (h *agHarness) take() []frames.Frame {
	fs := h.sent[h.mark:]
	h.mark = len(h.sent)
	return fs
}

// skip marks every frame sent so far as seen.
func (h *agHarness) skip() { h.mark = len(h.sent) }

// expect checks that the frames sent since the last look are exactly want (see the agR, agP
// … descriptors), in order.
func (h *agHarness) expect(want ...string) {
	h.t.Helper()
	got := agDescribe(h.take())
	if !agMatch(got, want) {
		h.t.Errorf("frames:\n got  %s\n want %s", agList(got), agList(want))
	}
}

// expectNone checks that nothing was sent since the last look.
func (h *agHarness) expectNone() {
	h.t.Helper()
	h.expect()
}

// result returns the one agent.tool_result for call id among the frames not yet looked at,
// and marks them all seen.
func (h *agHarness) result(id string) *frames.AgentToolResult {
	h.t.Helper()
	fs := h.take()
	var out *frames.AgentToolResult
	for _, f := range fs {
		if r, ok := f.(*frames.AgentToolResult); ok && r.CallID == id {
			if out != nil {
				h.t.Fatalf("two results for %s: %s", id, agDescribeAll(fs))
			}
			out = r
		}
	}
	if out == nil {
		h.t.Fatalf("no result for %s: %s", id, agDescribeAll(fs))
	}
	return out
}

// promptsOf returns the texts of every agent.prompt sent (ever) to conversation conv.
func (h *agHarness) promptsOf(conv string) []string {
	var out []string
	for _, f := range h.sent {
		if p, ok := f.(*frames.AgentPrompt); ok && p.ConversationID == conv {
			out = append(out, p.Text)
		}
	}
	return out
}

// --- descriptors ---

// agR describes an agent.tool_result.
func agR(id string, kind frames.ToolResultKind, content string) string {
	return fmt.Sprintf("result %s %s %q", id, kind, content)
}

// agOK, agErr and agPH describe a result, an error result and the background placeholder.
func agOK(id, content string) string  { return agR(id, frames.ResultKindResult, content) }
func agErr(id, content string) string { return agR(id, frames.ResultKindError, content) }
func agPH(id string) string {
	return agR(id, frames.ResultKindBackgroundPlaceholder, specPlaceholderText(id))
}

// agP describes an agent.prompt whose internal flag SPEC 13 does not fix; agPI an internal
// prompt, agPU one that is not internal.
func agP(conv, text string) string  { return fmt.Sprintf("prompt %s internal=? %q", conv, text) }
func agPI(conv, text string) string { return fmt.Sprintf("prompt %s internal=true %q", conv, text) }
func agPU(conv, text string) string { return fmt.Sprintf("prompt %s internal=false %q", conv, text) }

// agE describes an error frame by its ref and code.
func agE(ref string, code frames.Code) string { return fmt.Sprintf("error ref=%s %s", ref, code) }

func agDescribe(fs []frames.Frame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = agDescribeOne(f)
	}
	return out
}

func agDescribeAll(fs []frames.Frame) string { return agList(agDescribe(fs)) }

func agDescribeOne(f frames.Frame) string {
	switch f := f.(type) {
	case *frames.AgentToolResult:
		return agR(f.CallID, f.Kind, f.Content)
	case *frames.AgentPrompt:
		return fmt.Sprintf("prompt %s internal=%t %q", f.ConversationID, f.Internal, f.Text)
	case *frames.Error:
		return agE(f.Ref, f.Code)
	case *frames.AgentMessageCommitted:
		return "committed ref=" + f.Ref
	case *frames.ConversationCreated:
		return "created ref=" + f.Ref + " " + f.ConversationID
	case *frames.AgentLocalCancel:
		return "local_cancel " + f.ConversationID + " " + f.CallID
	}
	return fmt.Sprintf("%s %+v", f.FrameType(), f)
}

func agMatch(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g := got[i]
		if strings.Contains(want[i], " internal=? ") {
			g = strings.Replace(strings.Replace(g, " internal=true ", " internal=? ", 1), " internal=false ", " internal=? ", 1)
		}
		if g != want[i] {
			return false
		}
	}
	return true
}

func agList(s []string) string {
	if len(s) == 0 {
		return "(nothing)"
	}
	return "\n   " + strings.Join(s, "\n   ")
}

// --- content parsing ---

// agParse splits a result content into its headers (values unescaped) and body.
func agParse(s string) (headers map[string]string, order []string, body string) {
	headers = map[string]string{}
	head, b, found := strings.Cut(s, "\n\n")
	lines := strings.Split(head, "\n")
	if !found && (len(lines) == 0 || !strings.Contains(lines[0], ": ")) {
		return headers, nil, s
	}
	for _, l := range lines {
		name, v, ok := strings.Cut(l, ": ")
		if !ok || strings.ContainsAny(name, " `") {
			return map[string]string{}, nil, s // not a header block: a body-only content
		}
		headers[name] = agUnescape(v)
		order = append(order, name)
	}
	return headers, order, b
}

// agUnescape reverses the header escaping of SPEC 13.
func agUnescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'x':
			v, _ := strconv.ParseUint(s[i+1:i+3], 16, 8)
			b.WriteByte(byte(v))
			i += 2
		case 'u':
			v, _ := strconv.ParseUint(s[i+1:i+5], 16, 32)
			b.WriteRune(rune(v))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// agPending returns the prompt texts of a content's pending_prompts header (nil when absent).
func agPending(t *testing.T, content string) []string {
	t.Helper()
	hs, _, _ := agParse(content)
	v, ok := hs["pending_prompts"]
	if !ok {
		return nil
	}
	var texts []string
	if err := json.Unmarshal([]byte(v), &texts); err != nil {
		t.Fatalf("pending_prompts %q: %v", v, err)
	}
	if texts == nil {
		texts = []string{}
	}
	return texts
}

// agWithoutPending returns a content without its pending_prompts line.
func agWithoutPending(content string) string {
	lines := strings.Split(content, "\n")
	lines = slices.DeleteFunc(lines, func(l string) bool { return strings.HasPrefix(l, "pending_prompts: ") })
	if len(lines) > 1 && lines[0] == "" {
		lines = lines[1:] // it was the only header: no empty line before the body any more
	}
	return strings.Join(lines, "\n")
}
