// Package backchannel is the Go host SDK of the Backchannel broker: connect with an API key or
// a join token, declare tools, and handle their calls — answering at once, or deferring slow
// ones as background jobs that report progress, milestones and questions to the caller and
// finish whenever they are done.
//
// A host connects with Connect and declares its tools in Options.Tools. Each tool_call runs the
// tool's Handler on a goroutine of its own. A handler answers by returning an output or an
// error, or defers the call under a handle of its choice and returns; the *Job it gets back
// carries the job from then on, by handle:
//
//	h, err := backchannel.Connect(ctx, backchannel.Options{
//		URL:    "ws://127.0.0.1:8080/v1/ws",
//		APIKey: "dev",
//		Tools: []backchannel.Tool{{
//			Decl: frames.ToolDecl{Name: "render_report", Description: "Renders a report",
//				Parameters: json.RawMessage(`{"type":"object"}`), Deferred: true},
//			Handler: func(ctx context.Context, call *backchannel.Call) (any, error) {
//				job, err := call.Defer(ctx, "report-"+call.CallID[len("call_"):], "rendering the report")
//				if err != nil {
//					return nil, err
//				}
//				go func() {
//					ctx := job.Context() // done when the job is cancelled
//					_ = job.Progress(ctx, "fetching data")
//					_ = job.Result(ctx, map[string]string{"url": "https://example.com/r.pdf"})
//				}()
//				return nil, nil
//			},
//		}},
//	})
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer h.Close()
//	fmt.Println("session", h.SessionID(), "join token", h.JoinToken())
//	<-h.Done()
//
// # Which token goes where
//
// A host is backend code: it connects with the tenant's API key or with the session's join
// token, which attach any role and read the timeline — keep both on the backend. The end user
// (the caller, in a browser or on a phone bridge) gets the session's caller token instead, the
// one POST /v1/sessions answers as caller_token and carries in caller_url: it attaches a caller
// only, and reaches no HTTP resource but the session's WebRTC signaling. Job frames are
// accepted only from the connection a call was dispatched to, so no other connection — the
// caller least of all — can report a host's results.
//
// # Connections
//
// A Host survives dropped transports: it reconnects with exponential backoff and jitter
// (Options.Backoff), resumes its slot with the latest resume token and the highest seq it has
// processed, handles the frames the broker replays in order, dropping any it has seen, and
// re-attaches its deferred jobs from tool_deferred_resume. Requests made meanwhile wait for the
// resume. With Options.StateFile the session id, resume token and last seq are kept on disk,
// so that a restarted process resumes the same slot and receives its open jobs through
// Options.OnResume.
//
// # Errors
//
// Requests return once the broker applied them. A broker's error frame is returned as an
// error wrapping the *frames.Error, whose Code says what went wrong:
//
//	var fe *frames.Error
//	if errors.As(err, &fe) && fe.Code == frames.CodeCallFinished { … }
//
// A rejected defer is a *DeferRejectedError; the end of the session is a *SessionEndedError
// from Host.Err; a call cancelled by the broker has a *CancelledError as the cause of its
// context.
package backchannel
