package mcp

// MCP Tasks as the 2025-11-25 specification defines them (SPEC 14). go-sdk v1.8.0 has no
// tasks: the facade declares the capability in initialize's answer, lists every host tool with
// execution.taskSupport "optional" (the built-ins "forbidden"), serves a tools/call whose task
// parameter the front layer moved into its _meta, and serves tasks/get, tasks/list,
// tasks/result and tasks/cancel as custom methods of the SDK's server. A task is its job: its
// id is the broker call id, and its state is read from the job record in the store, on any
// node; the list of a conversation's tasks is the conversation's state, journaled with it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/textagent"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// The task statuses of MCP (2025-11-25).
const (
	taskWorking       = "working"
	taskInputRequired = "input_required"
	taskCompleted     = "completed"
	taskFailed        = "failed"
	taskCancelled     = "cancelled"
)

// pollInterval is the pollInterval of every task (SPEC 14), in ms.
const pollInterval = 1000

// taskPageSize is how many tasks one tasks/list answer holds.
const taskPageSize = 50

// relatedTaskKey relates a message to its task in _meta.
const relatedTaskKey = "io.modelcontextprotocol/related-task"

// taskStatusMethod is the notification of a task's new status.
const taskStatusMethod = "notifications/tasks/status"

// rawResult is a result the facade renders itself (the SDK has no type for it).
type rawResult struct {
	sdk.ResultBase
	v any
}

// MarshalJSON implements json.Marshaler: the value, with the SDK's _meta (if any) merged in.
// The SDK sets serverInfo in _meta only on a request of the protocol of 2026-07-28, whose
// results also need resultType (which the SDK sets only on its own types).
func (r *rawResult) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(r.v)
	if err != nil || len(r.Meta) == 0 {
		return b, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return b, nil
	}
	if _, ok := r.Meta[sdk.MetaKeyServerInfo]; ok {
		if _, has := m["resultType"]; !has {
			m["resultType"] = "complete"
		}
	}
	meta, _ := m["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	for k, v := range r.Meta {
		if _, ok := meta[k]; !ok {
			meta[k] = v
		}
	}
	m["_meta"] = meta
	return json.Marshal(m)
}

// resultObject is a result as a JSON object, to add members to (false: it is not one).
func resultObject(res sdk.Result) (map[string]any, bool) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, false
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, false
	}
	return m, true
}

// withTasksCapability adds capabilities.tasks to initialize's answer (SPEC 14).
func withTasksCapability(res sdk.Result) (sdk.Result, error) {
	m, ok := resultObject(res)
	if !ok {
		return res, nil
	}
	caps, _ := m["capabilities"].(map[string]any)
	if caps == nil {
		caps = map[string]any{}
	}
	caps["tasks"] = map[string]any{
		"list":     map[string]any{},
		"cancel":   map[string]any{},
		"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}},
	}
	m["capabilities"] = caps
	return &rawResult{v: m}, nil
}

// withExecution adds execution.taskSupport to every tool of tools/list's answer (SPEC 14): the
// built-ins "forbidden" (they never run as tasks), the host tools "optional".
func withExecution(res sdk.Result) (sdk.Result, error) {
	m, ok := resultObject(res)
	if !ok {
		return res, nil
	}
	tools, _ := m["tools"].([]any)
	for _, t := range tools {
		if tool, ok := t.(map[string]any); ok {
			support := "optional"
			if name, _ := tool["name"].(string); isBuiltin(name) {
				support = "forbidden"
			}
			tool["execution"] = map[string]any{"taskSupport": support}
		}
	}
	return &rawResult{v: m}, nil
}

// isBuiltin reports whether name is wait, cancel or status.
func isBuiltin(name string) bool {
	for _, t := range builtins {
		if t.Name == name {
			return true
		}
	}
	return false
}

// taskJSON is a task as MCP shows it.
type taskJSON struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           int64  `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
}

// taskStatus maps a job's state to its task's status (SPEC 14).
func taskStatus(j *jobs.Job) string {
	switch j.State {
	case jobs.Completed:
		return taskCompleted
	case jobs.Failed, jobs.TimedOut, jobs.Declined:
		return taskFailed
	case jobs.Cancelled:
		return taskCancelled
	case jobs.AwaitingPermission:
		return taskInputRequired
	}
	if j.Interaction != nil {
		return taskInputRequired
	}
	return taskWorking
}

// expired reports whether a task's ttl ran out at now.
func expired(j *jobs.Job, now time.Time) bool {
	return now.UnixMilli() > j.CreatedMS+j.TaskTTLMS
}

// taskNews is what the timeline tells of a task: its latest progress note or milestone, and
// when anything last happened to it.
type taskNews struct {
	note      string
	updatedMS int64
}

// newsOf reads the news of every task from the session's timeline.
func newsOf(entries []jobs.Entry) map[string]taskNews {
	out := map[string]taskNews{}
	for _, e := range entries {
		if e.CallID == "" {
			continue
		}
		n := out[e.CallID]
		n.updatedMS = max(n.updatedMS, e.AtMS)
		switch e.Kind {
		case jobs.KindProgress:
			if note, ok := e.Detail["note"].(string); ok {
				n.note = note
			}
		case jobs.KindPartial:
			if reply, _ := e.Detail["reply"].(bool); reply {
				if seg, err := json.Marshal(e.Detail["segment"]); err == nil {
					n.note = textagent.OutputBody(seg)
				}
			}
		}
		out[e.CallID] = n
	}
	return out
}

// renderTask is a job's task.
func renderTask(j *jobs.Job, news taskNews) taskJSON {
	t := taskJSON{TaskID: j.CallID, Status: taskStatus(j), StatusMessage: news.note, TTL: j.TaskTTLMS, PollInterval: pollInterval}
	if j.Interaction != nil {
		t.StatusMessage = j.Interaction.Prompt
	}
	updated := max(news.updatedMS, j.CreatedMS, j.FinishedMS, j.DeferredMS)
	t.CreatedAt = timestamp(j.CreatedMS)
	t.LastUpdatedAt = timestamp(updated)
	return t
}

// timestamp is an ISO 8601 time of epoch ms.
func timestamp(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// taskParams are the params of tasks/get, tasks/result and tasks/cancel.
type taskParams struct {
	sdk.ParamsBase
	TaskID string `json:"taskId"`
}

// listParams are the params of tasks/list.
type listParams struct {
	sdk.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// errUnknownTask answers a task id the session has no (live) task of.
func errUnknownTask(id string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("invalid params: no task %q", id)}
}

// portError is the JSON-RPC answer of a port that cannot serve a request any more.
func portError(err error) error {
	switch {
	case errors.Is(err, broker.ErrTakenOver):
		return errTakenOver
	case errors.Is(err, broker.ErrPortClosed), errors.Is(err, broker.ErrUnknownSession):
		return &jsonrpc.Error{Code: -32000, Message: "the MCP session has ended"}
	}
	return err
}

// task reads a live task of the binding's conversation.
func (h *Handler) task(ctx context.Context, b *binding, id string) (*jobs.Job, error) {
	if id == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `invalid params: "taskId" must not be empty`}
	}
	j, err := b.port.Task(ctx, id)
	if errors.Is(err, jobs.ErrUnknownCall) || err == nil && expired(j, time.Now()) {
		return nil, errUnknownTask(id)
	}
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "reading the task failed; try again"}
	}
	return j, nil
}

// news reads the timeline's news of the session's tasks; a failed read has none.
func (h *Handler) news(ctx context.Context, b *binding) map[string]taskNews {
	entries, err := b.port.Timeline(ctx)
	if err != nil {
		h.log.Debug("mcp: reading the timeline for task news", "err", err)
		return nil
	}
	return newsOf(entries)
}

// addTaskMethods adds tasks/get, tasks/list, tasks/result and tasks/cancel to srv.
func (h *Handler) addTaskMethods(srv *sdk.Server, b *binding) {
	must := func(err error) {
		if err != nil {
			panic(err) // the methods are not the SDK's: never
		}
	}
	must(sdk.AddReceivingCustomMethod(srv, methodTasksGet, func(ctx context.Context, _ *sdk.ServerSession, p *taskParams) (*rawResult, error) {
		j, err := h.task(ctx, b, p.TaskID)
		if err != nil {
			return nil, err
		}
		return &rawResult{v: renderTask(j, h.news(ctx, b)[j.CallID])}, nil
	}))
	must(sdk.AddReceivingCustomMethod(srv, methodTasksList, func(ctx context.Context, _ *sdk.ServerSession, p *listParams) (*rawResult, error) {
		if p == nil { // params may be absent
			p = &listParams{}
		}
		return h.listTasks(ctx, b, p.Cursor)
	}))
	must(sdk.AddReceivingCustomMethod(srv, methodTasksResult, func(ctx context.Context, ss *sdk.ServerSession, p *taskParams) (*rawResult, error) {
		return h.taskResult(ctx, ss, b, p.TaskID)
	}))
	must(sdk.AddReceivingCustomMethod(srv, methodTasksCancel, func(ctx context.Context, _ *sdk.ServerSession, p *taskParams) (*rawResult, error) {
		return h.cancelTask(ctx, b, p.TaskID)
	}))
}

// createTask serves a task-augmented tools/call (SPEC 14): a background call from the start,
// answered at once with CreateTaskResult. A call that cannot become a task — a built-in, or
// one the broker refuses at once (a tool no host serves, arguments that fail the schema) — is
// answered with a JSON-RPC error naming why.
func (h *Handler) createTask(ctx context.Context, b *binding, req *sdk.CallToolRequest, raw any) (sdk.Result, error) {
	if err := checkArguments(req.Params.Arguments); err != nil {
		return nil, err
	}
	name := req.Params.Name
	if isBuiltin(name) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("%s does not run as a task (execution.taskSupport is forbidden)", name)}
	}
	var ttl int64
	if m, ok := raw.(map[string]any); ok {
		if v, ok := m["ttl"].(float64); ok {
			ttl = int64(v)
		}
	}
	id := b.port.NewCallID()
	errText, err := b.port.StartTask(ctx, id, name, req.Params.Arguments, ttl)
	if err != nil {
		return nil, portError(err)
	}
	if errText != "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: errText}
	}
	j, err := h.task(ctx, b, id)
	if err != nil {
		return nil, err
	}
	return &rawResult{v: map[string]any{"task": renderTask(j, taskNews{})}}, nil
}

// listTasks answers tasks/list: the conversation's live tasks, oldest first, a page at a time
// (the cursor is the index of the page's first task).
func (h *Handler) listTasks(ctx context.Context, b *binding, cursor string) (*rawResult, error) {
	start := 0
	if cursor != "" {
		n, err := strconv.Atoi(cursor)
		if err != nil || n < 0 {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: unknown cursor"}
		}
		start = n
	}
	ids, err := b.port.Tasks(ctx)
	if err != nil {
		return nil, portError(err)
	}
	news := h.news(ctx, b)
	now := time.Now()
	var live []taskJSON
	for _, id := range ids {
		j, err := b.port.Task(ctx, id)
		if err != nil || expired(j, now) {
			continue
		}
		live = append(live, renderTask(j, news[id]))
	}
	res := map[string]any{"tasks": []taskJSON{}}
	if start < len(live) {
		end := min(start+taskPageSize, len(live))
		res["tasks"] = live[start:end]
		if end < len(live) {
			res["nextCursor"] = strconv.Itoa(end)
		}
	}
	return &rawResult{v: res}, nil
}

// taskResult answers tasks/result (SPEC 14): it blocks until the task is terminal and answers
// the CallToolResult the call would have answered in the foreground, any number of times
// within the ttl; the first answer consumes the result as a wait would. While the task's job
// has an open interaction and the client declared elicitation, the interaction is asked with
// elicitation/create on this request's stream.
func (h *Handler) taskResult(ctx context.Context, ss *sdk.ServerSession, b *binding, id string) (*rawResult, error) {
	var asking *elicitation
	defer func() { asking.stop() }()
	for {
		changed := b.port.Changes()
		j, err := h.task(ctx, b, id)
		if err != nil {
			return nil, err
		}
		if j.State.Terminal() {
			prompts, err := b.port.ConsumeTask(ctx, id)
			if err != nil {
				return nil, portError(err)
			}
			c := textagent.OutcomeContent(textagent.Outcome{State: j.State, Output: j.Output, Error: j.Error,
				Duration: time.Duration(j.FinishedMS-j.CreatedMS) * time.Millisecond, CancelReason: frames.CancelReason(j.CancelReason)})
			if len(prompts) > 0 {
				c.Set(textagent.HeaderPendingPrompts, textagent.PendingPrompts(prompts))
			}
			return &rawResult{v: map[string]any{
				"content": []map[string]any{{"type": "text", "text": c.String()}},
				"isError": c.IsError(),
				"_meta":   map[string]any{relatedTaskKey: map[string]any{"taskId": id}},
			}}, nil
		}
		ia := j.Interaction
		if asking != nil && (ia == nil || ia.ID != asking.id) {
			asking.stop() // the host closed it, or replaced it: the elicitation is cancelled
			asking = nil
		}
		if ia != nil && asking == nil && canElicit(ss) {
			asking = h.elicit(ctx, ss, b, id, ia)
		}
		select {
		case <-changed:
		case <-time.After(pollInterval * time.Millisecond): // a change another node made
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-b.port.Done():
			return nil, portError(broker.ErrPortClosed)
		}
	}
}

// canElicit reports whether the client declared elicitation (form mode).
func canElicit(ss *sdk.ServerSession) bool {
	p := ss.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil
}

// elicitation is an interaction asked with elicitation/create.
type elicitation struct {
	id     string
	cancel context.CancelFunc
	done   chan struct{}
}

// stop cancels the elicitation (the SDK sends notifications/cancelled) and waits for it.
func (e *elicitation) stop() {
	if e == nil {
		return
	}
	e.cancel()
	<-e.done
}

// elicit asks the open interaction ia of task id with elicitation/create, related to the task
// by _meta, on the stream of ctx's request; an accepted answer goes to the host as
// tool_interaction_answer (SPEC 9, 14).
func (h *Handler) elicit(ctx context.Context, ss *sdk.ServerSession, b *binding, id string, ia *jobs.Interaction) *elicitation {
	ctx, cancel := context.WithCancel(ctx)
	e := &elicitation{id: ia.ID, cancel: cancel, done: make(chan struct{})}
	answer := map[string]any{"type": "string", "title": "Answer"}
	if len(ia.Options) > 0 {
		answer["enum"] = ia.Options
	}
	params := &sdk.ElicitParams{
		Meta:    sdk.Meta{relatedTaskKey: map[string]any{"taskId": id}},
		Mode:    "form",
		Message: ia.Prompt,
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"answer": answer},
			"required": []string{"answer"}},
	}
	go func() {
		defer close(e.done)
		res, err := ss.Elicit(ctx, params)
		if err != nil {
			if ctx.Err() == nil {
				h.log.Debug("mcp: an elicitation failed", "task", id, "interaction", ia.ID, "err", err)
			}
			return
		}
		if res.Action != "accept" {
			return
		}
		text, _ := res.Content["answer"].(string)
		option := ""
		if slices.Contains(ia.Options, text) {
			option = text
		}
		if _, err := b.port.AnswerInteraction(context.WithoutCancel(ctx), id, ia.ID, option, text); err != nil {
			h.log.Warn("mcp: passing an elicitation's answer on", "task", id, "interaction", ia.ID, "err", err)
		}
	}()
	return e
}

// cancelTask answers tasks/cancel (SPEC 14): the call is cancelled (tool_cancel reason
// agent_request, once) and the task answered with status cancelled; a terminal task answers
// -32602.
func (h *Handler) cancelTask(ctx context.Context, b *binding, id string) (*rawResult, error) {
	if _, err := h.task(ctx, b, id); err != nil {
		return nil, err
	}
	res, err := b.port.CancelTask(ctx, id)
	if err != nil {
		return nil, portError(err)
	}
	switch res {
	case frames.CancelResultCancelled:
	case frames.CancelResultUnknownCall:
		return nil, errUnknownTask(id)
	default:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("invalid params: task %q is already in a terminal status", id)}
	}
	j, err := h.task(ctx, b, id)
	if err != nil {
		return nil, err
	}
	return &rawResult{v: renderTask(j, h.news(ctx, b)[id])}, nil
}

// watchTasks sends notifications/tasks/status on the MCP session's standalone stream whenever
// one of its conversation's tasks changes status, until the MCP session ends.
func (h *Handler) watchTasks(b *binding) {
	last := map[string]string{}
	for {
		changed := b.port.Changes()
		ids, err := b.port.Tasks(b.ctx)
		if err != nil {
			return
		}
		var news map[string]taskNews
		for _, id := range ids {
			j, err := b.port.Task(b.ctx, id)
			if err != nil {
				continue
			}
			st := taskStatus(j)
			if prev, ok := last[id]; !ok {
				last[id] = st // known from now on; created as working, answered so
				if st == taskWorking {
					continue
				}
			} else if prev == st {
				continue
			}
			last[id] = st
			if news == nil {
				news = h.news(b.ctx, b)
			}
			b.notify(taskStatusMethod, renderTask(j, news[id]))
		}
		select {
		case <-changed:
		case <-b.ctx.Done():
			return
		case <-b.port.Done():
			return
		}
	}
}
