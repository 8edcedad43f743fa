// Command example is a small Backchannel host: it serves one deferred tool, render_report,
// that defers every call, reports progress twice and completes a few seconds later.
//
//	go run ./sdk/go/example -url ws://127.0.0.1:8080/v1/ws -key dev
package main

import (
	"context"
	"encoding/json"
	"flag"
	"log"
	"os/signal"
	"syscall"
	"time"

	"github.com/backchannel-io/backchannel/frames"
	backchannel "github.com/backchannel-io/backchannel/sdk/go"
)

func main() {
	url := flag.String("url", "ws://127.0.0.1:8080/v1/ws", "broker WebSocket URL")
	key := flag.String("key", "", "API key: creates a session, or attaches to -session")
	session := flag.String("session", "", "session to attach to (with -key or -token)")
	token := flag.String("token", "", "join token of -session")
	state := flag.String("state", "", "file keeping {session_id, resume_token, last_seq}: a restarted host resumes its slot")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	renderReport := backchannel.Tool{
		Decl: frames.ToolDecl{Name: "render_report", Description: "Renders the monthly report as a PDF",
			Parameters: json.RawMessage(`{"type":"object","properties":{"month":{"type":"string"}}}`),
			Deferred:   true, ExpectedDuration: frames.ExpectMinutes},
		Handler: func(ctx context.Context, call *backchannel.Call) (any, error) {
			// A handle derived from the call id is fresh for every call, and the same again
			// if the call is replayed to a restarted host (a repeated defer is accepted again).
			job, err := call.Defer(ctx, "report-"+call.CallID[len("call_"):], "rendering your report")
			if err != nil {
				return nil, err
			}
			go func() {
				ctx := job.Context() // done if the job is cancelled
				for _, note := range []string{"fetching the numbers", "laying out the pages"} {
					if err := job.Progress(ctx, note); err != nil {
						return
					}
					time.Sleep(2 * time.Second)
				}
				_ = job.Result(ctx, map[string]string{"url": "https://reports.example.com/" + job.Handle + ".pdf"})
			}()
			return nil, nil
		},
	}
	h, err := backchannel.Connect(ctx, backchannel.Options{URL: *url, APIKey: *key, SessionID: *session, JoinToken: *token,
		StateFile: *state, Tools: []backchannel.Tool{renderReport},
		// After a restart (-state), jobs deferred by the previous process come back here.
		OnResume: func(ctx context.Context, job *backchannel.Job, _ frames.ResumedJob) {
			log.Printf("resumed job %s; finishing it", job.Handle)
			_ = job.Result(ctx, map[string]string{"url": "https://reports.example.com/" + job.Handle + ".pdf"})
		}})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("serving render_report in session %s (join token %s)", h.SessionID(), h.JoinToken())
	select {
	case <-ctx.Done():
		_ = h.Close()
	case <-h.Done():
		log.Print(h.Err())
	}
}
