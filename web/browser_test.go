package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker"
	bcwebrtc "github.com/backchannel-io/backchannel/broker/webrtc"
	"github.com/backchannel-io/backchannel/broker/ws"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// These tests run the try-it page in Debian's Chromium (headless, Chromium's fake microphone)
// driven by playwright-core (testdata/browser/story.mjs) against a real broker: the memory
// store, the scripted model, the WebSocket and WebRTC transports, and Handler at "/".

// devKey is the API key the page has prefilled.
const devKey = "dev"

// site is a broker with the page mounted, as `backchannel serve` mounts it.
type site struct {
	b   *brokertest.Broker
	url string // http://127.0.0.1:PORT
}

// startSite starts a broker (tenant dev with key dev) and serves its API, /v1/ws, the WebRTC
// signaling and the page on a loopback port of its own; extra, if not nil, adds test routes.
func startSite(t *testing.T, extra func(mux *http.ServeMux)) *site {
	t.Helper()
	b := brokertest.Start(t, brokertest.Options{Config: broker.Config{
		APIKeys:      map[string]string{devKey: "dev"},
		ResumeWindow: 30 * time.Second,
	}})
	rtc, err := bcwebrtc.NewHandler(b.Node, bcwebrtc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	wsh := ws.NewHandler(b.Node, ws.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: b.Node.Handler(wsh, func(mux *http.ServeMux) {
			mux.Handle("/", Handler())
			rtc.Register(mux)
			if extra != nil {
				extra(mux)
			}
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.Serve(ln) }()
	// Cleanups run last-in first-out: this one before the broker's own shutdown.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rtc.Close()
		_ = rtc.Wait(ctx)
		wsh.CloseAll(broker.StatusServiceRestart, "service restart")
		_ = srv.Close() // a timeline stream may still be open
		_ = wsh.Wait(ctx)
	})
	return &site{b: b, url: "http://" + ln.Addr().String()}
}

// createSession is POST /v1/sessions with the dev key; it returns the session and its
// caller_url (the page, ready to join it).
func (s *site) createSession(t *testing.T) (id, callerURL string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.url+"/v1/sessions", nil)
	req.Header.Set("Authorization", "Bearer "+devKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		SessionID string `json:"session_id"`
		CallerURL string `json:"caller_url"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/sessions: %d %v", resp.StatusCode, err)
	}
	return body.SessionID, body.CallerURL
}

// timeline is the broker's timeline of a session (GET, not followed), with the dev key.
func (s *site) timeline(t *testing.T, id string) []timelineEntry {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.url+"/v1/sessions/"+url.PathEscape(id)+"/timeline", nil)
	req.Header.Set("Authorization", "Bearer "+devKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Entries []timelineEntry `json:"entries"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("timeline: %v", err)
	}
	return body.Entries
}

type timelineEntry struct {
	AtMS   int64          `json:"at_ms"`
	Kind   string         `json:"kind"`
	CallID string         `json:"call_id"`
	Handle string         `json:"handle"`
	Detail map[string]any `json:"detail"`
}

// storyResult is what story.mjs writes to result.json.
type storyResult struct {
	OK            bool   `json:"ok"`
	Error         string `json:"error"`
	Status        string `json:"status"`
	SessionID     string `json:"sessionId"`
	ConsoleErrors []string
	Prefilled     struct {
		SessionID string `json:"sessionId"`
		APIKey    string `json:"apiKey"`
		Mode      string `json:"mode"`
	} `json:"prefilled"`
	Job struct {
		CallID string `json:"callId"`
		Handle string `json:"handle"`
	} `json:"job"`
	AudioBytesAtConnect  int64 `json:"audioBytesAtConnect"`
	AudioBytesAfterStory int64 `json:"audioBytesAfterStory"`
	Frames               []struct {
		Dir   string         `json:"dir"`
		Frame map[string]any `json:"frame"`
	} `json:"frames"`
	Events []struct {
		Name  string         `json:"name"`
		Value map[string]any `json:"value"`
	} `json:"events"`
	Timeline    []timelineEntry `json:"timeline"`
	ReadmeLines []string        `json:"readmeLines"`
	State       string          `json:"state"`
	Steps       []struct {
		Name string `json:"name"`
		MS   int64  `json:"ms"`
	} `json:"steps"`
}

// frames returns the frames of a direction ("in", "out") and type, in order.
func (r *storyResult) frames(dir, typ string) []map[string]any {
	var out []map[string]any
	for _, f := range r.Frames {
		if f.Dir == dir && f.Frame["type"] == typ {
			out = append(out, f.Frame)
		}
	}
	return out
}

// find returns the first frame of dir and typ whose fields have the values of match.
func (r *storyResult) find(dir, typ string, match map[string]any) map[string]any {
	for _, f := range r.frames(dir, typ) {
		ok := true
		for k, v := range match {
			if fmt.Sprint(f[k]) != fmt.Sprint(v) {
				ok = false
				break
			}
		}
		if ok {
			return f
		}
	}
	return nil
}

// runStory runs story.mjs in Chromium against s and pageURL and returns its result and
// output dir. A failed story fails the test with the page's frames and the broker's timeline.
func (s *site) runStory(t *testing.T, story, pageURL string) (*storyResult, string) {
	t.Helper()
	chromium := ensureChromium(t)
	ensureNodeModules(t, browserDir)
	if _, err := os.ReadFile(filepath.Join(browserDir, "story.mjs")); err != nil {
		t.Fatal(err)
	}
	// BACKCHANNEL_WEB_KEEP=DIR keeps the result.json and the screenshots of the stories there.
	out := t.TempDir()
	if keep := os.Getenv("BACKCHANNEL_WEB_KEEP"); keep != "" {
		out = filepath.Join(keep, story)
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	logs := runNodeAllowFail(t, browserDir, 3*time.Minute,
		[]string{"CHROMIUM=" + chromium, "PAGE_URL=" + pageURL, "STORY=" + story, "OUT=" + out}, "story.mjs")
	data, err := os.ReadFile(filepath.Join(out, "result.json"))
	if err != nil {
		t.Fatalf("story.mjs wrote no result: %v\n%s", err, logs)
	}
	var r storyResult
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("result.json: %v", err)
	}
	t.Logf("story %s in Chromium took %s", story, time.Since(start).Round(100*time.Millisecond))
	if !r.OK {
		var frames strings.Builder
		for _, f := range r.Frames {
			b, _ := json.Marshal(f.Frame)
			fmt.Fprintf(&frames, "\t%s %s\n", map[string]string{"in": "←", "out": "→"}[f.Dir], b)
		}
		var timeline strings.Builder
		if r.SessionID != "" {
			for _, e := range s.timeline(t, r.SessionID) {
				b, _ := json.Marshal(e)
				fmt.Fprintf(&timeline, "\t%s\n", b)
			}
		}
		t.Fatalf("the %s story failed in the browser: %s\npage status: %s\nconsole: %q\nframes:\n%s\nbroker timeline:\n%s\nlog:\n%s",
			story, r.Error, r.Status, r.ConsoleErrors, frames.String(), timeline.String(), logs)
	}
	return &r, out
}

// runNodeAllowFail is runNode that returns the output when node fails (story.mjs reports
// its failure in result.json).
func runNodeAllowFail(t *testing.T, dir string, timeout time.Duration, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := execNode(ctx, t, dir, env, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("node %s did not finish within %s:\n%s", strings.Join(args, " "), timeout, out.String())
	}
	return out.String()
}

// checkSeqs checks that the page handled the broker's frames once each, in seq order.
func checkSeqs(t *testing.T, r *storyResult) {
	t.Helper()
	var last float64
	for _, f := range r.Frames {
		if f.Dir != "in" {
			continue
		}
		seq, ok := f.Frame["seq"].(float64)
		if !ok {
			if f.Frame["type"] != "welcome" {
				t.Errorf("a %s frame without seq", f.Frame["type"])
			}
			continue
		}
		if seq != last+1 {
			t.Errorf("%s has seq %v after %v: the page must see every frame once, in order", f.Frame["type"], seq, last)
		}
		last = seq
	}
}

// checkScreenshot checks that the page's screenshot is a real PNG of a rendered page.
func checkScreenshot(t *testing.T, file string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	b := img.Bounds()
	if b.Dx() < 1000 || b.Dy() < 800 || len(data) < 30<<10 {
		t.Fatalf("screenshot: %dx%d, %d bytes: not a rendered page", b.Dx(), b.Dy(), len(data))
	}
	colors := map[uint32]bool{}
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colors[(r>>8)<<16|(g>>8)<<8|bl>>8] = true
		}
	}
	if len(colors) < 20 {
		t.Fatalf("screenshot: only %d colours: the page did not render", len(colors))
	}
}

// TestBrowserDeferredStory: the page joins a session from its caller_url over WebRTC with
// the fake microphone; its caller text makes the scripted model call the page's book_table;
// the page defers it, reports progress and a milestone, asks a decision, the test answers
// with the page's button, the page completes the job, and the completion is voiced. Both
// sides are checked: the page's frames and the broker's timeline. Agent audio arrives as RTP.
func TestBrowserDeferredStory(t *testing.T) {
	s := startSite(t, nil)
	id, callerURL := s.createSession(t)
	if !strings.HasPrefix(callerURL, s.url+"/?") {
		t.Fatalf("caller_url %q is not this page", callerURL)
	}
	r, out := s.runStory(t, "deferred", callerURL)

	if r.Prefilled.SessionID != id || r.Prefilled.Mode != "join" || r.SessionID != id {
		t.Errorf("the page did not take the session from caller_url: %+v, joined %q", r.Prefilled, r.SessionID)
	}
	callID, handle := r.Job.CallID, r.Job.Handle
	if !strings.HasPrefix(handle, "table-") || !strings.HasPrefix(callID, "call_") {
		t.Fatalf("job %+v", r.Job)
	}

	// The page's side, as its SDK logged the frames.
	hello := r.frames("out", "hello")
	// caller_url carries the caller token (SPEC 3.1), never the join token: the page attaches with it.
	if len(hello) != 1 || hello[0]["role"] != "caller" || hello[0]["caller_token"] == nil || hello[0]["join_token"] != nil || hello[0]["session_id"] != id {
		t.Errorf("hello: %v, want the caller with the caller token and no join token", hello)
	} else if tools, _ := hello[0]["tools"].([]any); len(tools) != 1 || tools[0].(map[string]any)["deferred_timeout"] != "1h" {
		t.Errorf("hello tools: %v", hello[0]["tools"])
	}
	for _, want := range []struct {
		dir, typ string
		match    map[string]any
	}{
		{"in", "welcome", map[string]any{"session_id": id}},
		{"in", "tools.declared", map[string]any{"names": []any{"book_table"}}},
		{"out", "caller.text", map[string]any{"text": `call book_table {"party":4}`}},
		{"in", "transcript", map[string]any{"role": "caller", "text": `call book_table {"party":4}`, "final": true}},
		{"in", "tool_call", map[string]any{"call_id": callID, "name": "book_table", "arguments": map[string]any{"party": 4}, "session_id": id}},
		{"out", "tool_deferred", map[string]any{"call_id": callID, "handle": handle, "status_label": "booking a table for 4"}},
		{"in", "tool_deferred_ack", map[string]any{"call_id": callID, "handle": handle, "accepted": true}},
		{"out", "tool_progress", map[string]any{"handle": handle, "note": "calling the restaurant"}},
		{"out", "tool_partial_result", map[string]any{"handle": handle, "reply": true, "segment": "the restaurant has a table for 4"}},
		{"in", "tool_job_narration", map[string]any{"call_id": callID, "kind": "milestone", "state": "delivered"}},
		{"in", "tool_job_narration", map[string]any{"call_id": callID, "kind": "interaction", "state": "delivered"}},
		{"out", "caller.text", map[string]any{"text": "7:30"}},
		{"in", "tool_interaction_answer", map[string]any{"call_id": callID, "handle": handle, "option": "7:30"}},
		{"out", "tool_result", map[string]any{"handle": handle}},
		{"in", "tool_job_narration", map[string]any{"call_id": callID, "kind": "completion", "state": "delivered"}},
		{"in", "transcript", map[string]any{"role": "agent", "text": "Started booking a table for 4 in the background."}},
		{"in", "transcript", map[string]any{"role": "agent", "text": "Update on booking a table for 4: the restaurant has a table for 4"}},
		{"in", "transcript", map[string]any{"role": "agent", "text": "Would you like 7:30 or 8:15? Options: 7:30, 8:15."}},
		{"in", "session.ended", map[string]any{"reason": "hung_up"}},
	} {
		if r.find(want.dir, want.typ, want.match) == nil {
			t.Errorf("the page %s no %s frame with %v", map[string]string{"in": "received", "out": "sent"}[want.dir], want.typ, want.match)
		}
	}
	ask := r.find("out", "tool_partial_result", map[string]any{"handle": handle, "segment": "Would you like 7:30 or 8:15?"})
	if ia, _ := ask["interaction"].(map[string]any); ia == nil || fmt.Sprint(ia["options"]) != "[7:30 8:15]" {
		t.Errorf("the decision: %v", ask)
	}
	done := false
	for _, f := range r.frames("in", "transcript") {
		if f["role"] == "agent" && strings.HasPrefix(fmt.Sprint(f["text"]), "booking a table for 4 is done: ") &&
			strings.Contains(fmt.Sprint(f["text"]), `"time":"7:30"`) {
			done = true
		}
	}
	if !done {
		t.Errorf("no completion transcript `booking a table for 4 is done: …7:30…`")
	}
	checkSeqs(t, r)

	// Agent audio reached the browser over RTP.
	if r.AudioBytesAfterStory <= r.AudioBytesAtConnect || r.AudioBytesAfterStory < 8000 {
		t.Errorf("inbound-rtp audio bytesReceived: %d at connect, %d after the story: want it to grow by the agent's speech",
			r.AudioBytesAtConnect, r.AudioBytesAfterStory)
	}

	// The broker's side: its timeline has the whole job, under the page's handle.
	entries := s.timeline(t, id)
	var kinds []string
	for _, e := range entries {
		if e.CallID == callID || e.Kind == "session_end" {
			kinds = append(kinds, e.Kind)
		}
	}
	for _, k := range []string{"call", "deferred", "progress", "partial", "narration", "interaction", "result", "session_end"} {
		if !slices.Contains(kinds, k) {
			t.Errorf("the broker's timeline has no %s entry for the job: %v", k, kinds)
		}
	}
	for _, e := range entries {
		if e.Kind == "deferred" && e.CallID == callID && e.Handle != handle {
			t.Errorf("timeline deferred entry: handle %q, want %q", e.Handle, handle)
		}
	}
	// The caller token reaches no HTTP resource but the signaling: the page joined with it
	// reads no timeline (TestBrowserResume's page, which has the join token, does).
	if len(r.Timeline) != 0 {
		t.Errorf("the page read %d timeline entries with the caller token", len(r.Timeline))
	}
	checkScreenshot(t, filepath.Join(out, "page.png"))
	if len(r.ConsoleErrors) > 0 {
		t.Logf("console: %q", r.ConsoleErrors)
	}
}

// TestBrowserResume: the page creates a session with the prefilled API key, starts a job,
// and then its peer connection is closed mid-job (pc.close() through the page's test hook).
// The SDK reconnects with a new peer connection, resumes the slot with its resume token and
// last_seq, receives tool_deferred_resume listing the job, and the story finishes after it.
func TestBrowserResume(t *testing.T) {
	s := startSite(t, nil)
	r, _ := s.runStory(t, "resume", s.url+"/")

	if r.Prefilled.APIKey != devKey || r.Prefilled.Mode != "new" {
		t.Errorf("prefilled: %+v", r.Prefilled)
	}
	handle := r.Job.Handle
	hellos := r.frames("out", "hello")
	if len(hellos) != 2 {
		t.Fatalf("%d hellos, want the first and the resume", len(hellos))
	}
	welcomes := r.frames("in", "welcome")
	if len(welcomes) != 2 {
		t.Fatalf("%d welcomes, want 2", len(welcomes))
	}
	resume := hellos[1]
	if resume["resume_token"] != welcomes[0]["resume_token"] || resume["session_id"] != r.SessionID || resume["last_seq"] == nil {
		t.Errorf("the resuming hello %v does not carry the first welcome's resume token and a last_seq", resume)
	}
	if welcomes[1]["resume_token"] == welcomes[0]["resume_token"] {
		t.Errorf("the resume token did not rotate")
	}
	res := r.frames("in", "tool_deferred_resume")
	if len(res) != 1 {
		t.Fatalf("%d tool_deferred_resume frames, want 1", len(res))
	}
	jobs, _ := res[0]["jobs"].([]any)
	if len(jobs) != 1 || jobs[0].(map[string]any)["handle"] != handle || jobs[0].(map[string]any)["state"] != "deferred" {
		t.Errorf("tool_deferred_resume: %v, want the job %s", res[0], handle)
	}
	var dropped, resumed bool
	for _, e := range r.Events {
		switch e.Name {
		case "dropped":
			dropped = true
		case "resumed":
			resumed = true
			if js, _ := e.Value["jobs"].([]any); len(js) != 1 || js[0].(map[string]any)["handle"] != handle {
				t.Errorf("resumed event: %v", e.Value)
			}
		}
	}
	if !dropped || !resumed {
		t.Errorf("events: dropped %v, resumed %v", dropped, resumed)
	}
	// This page created the session with the API key: it has the join token, and its own
	// timeline view streamed the session's entries (?follow=1).
	if len(r.Timeline) < 3 || r.Timeline[0].Kind != "call" && r.Timeline[0].Kind != "notice" {
		t.Errorf("the page's timeline stream: %d entries, want the session's", len(r.Timeline))
	}
	if r.find("in", "tool_interaction_answer", map[string]any{"handle": handle, "option": "7:30"}) == nil ||
		r.find("out", "tool_result", map[string]any{"handle": handle}) == nil {
		t.Errorf("the job did not finish after the resume")
	}
	// The hang-up after the resume is the DELETE of the new peer connection's resource.
	if r.find("in", "session.ended", map[string]any{"reason": "hung_up"}) == nil {
		t.Errorf("no session.ended hung_up after the hang-up")
	}
	checkSeqs(t, r)
	var kinds []string
	for _, e := range s.timeline(t, r.SessionID) {
		kinds = append(kinds, e.Kind)
	}
	for _, k := range []string{"disconnect", "resume", "result"} {
		if !slices.Contains(kinds, k) {
			t.Errorf("the broker's timeline has no %s entry: %v", k, kinds)
		}
	}
}

// TestBrowserWebSocket: the page joins over WebSocket (typing as the caller; the agent's audio
// arrives as binary messages), the host side resolves the decision itself
// (tool_interaction_update) and completes the job with "Complete now"; hanging up over
// WebSocket ends the session.
func TestBrowserWebSocket(t *testing.T) {
	s := startSite(t, nil)
	id, callerURL := s.createSession(t)
	r, _ := s.runStory(t, "websocket", callerURL+"&transport=websocket")
	if r.SessionID != id {
		t.Fatalf("joined %q, want %q", r.SessionID, id)
	}
	callID, handle := r.Job.CallID, r.Job.Handle
	for _, want := range []struct {
		dir, typ string
		match    map[string]any
	}{
		{"in", "tool_call", map[string]any{"call_id": callID, "arguments": map[string]any{"party": 3}}},
		{"in", "tool_deferred_ack", map[string]any{"handle": handle, "accepted": true}},
		{"in", "tool_job_narration", map[string]any{"call_id": callID, "kind": "interaction", "state": "delivered"}},
		{"out", "tool_interaction_update", map[string]any{"handle": handle, "state": "resolved"}},
		{"in", "tool_interaction_update_ack", map[string]any{"state": "resolved", "result": "applied"}},
		{"out", "tool_result", map[string]any{"handle": handle}},
		{"in", "tool_job_narration", map[string]any{"call_id": callID, "kind": "completion", "state": "delivered"}},
		{"out", "session.end", nil},
		{"in", "session.ended", map[string]any{"reason": "ended"}},
	} {
		if r.find(want.dir, want.typ, want.match) == nil {
			t.Errorf("the page %s no %s frame with %v", map[string]string{"in": "received", "out": "sent"}[want.dir], want.typ, want.match)
		}
	}
	if res := r.find("out", "tool_result", map[string]any{"handle": handle}); fmt.Sprint(res["output"].(map[string]any)["time"]) != "the first free table" {
		t.Errorf("tool_result: %v", res)
	}
	if r.find("in", "tool_interaction_answer", nil) != nil {
		t.Errorf("a resolved decision was answered")
	}
	checkSeqs(t, r)
	if r.AudioBytesAfterStory < 8000 {
		t.Errorf("%d bytes of agent audio arrived as WebSocket messages: want the agent's speech", r.AudioBytesAfterStory)
	}
}

// readmeExample returns the example of sdk/js/README.md (the first js block under "## A host
// in the browser") made runnable on the test's page: the SDK from /sdk.js, the broker at the
// page's origin, console lines collected in window.readmeLines, the client in window.client.
func readmeExample(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(sdkDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## A host in the browser")
	_, code, ok2 := strings.Cut(section, "```js\n")
	code, _, ok3 := strings.Cut(code, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("sdk/js/README.md has no js example under \"## A host in the browser\"")
	}
	if n := strings.Count(strings.TrimSpace(code), "\n") + 1; n > 15 {
		t.Errorf("the README's example has %d lines, want at most 15", n)
	}
	for _, r := range [][2]string{
		{`from "@backchannel/sdk"`, `from "/sdk.js"`},
		{`"http://127.0.0.1:8080"`, `location.origin`},
		{"const client = new Client();", "const client = new Client(); window.client = client;"},
	} {
		if !strings.Contains(code, r[0]) {
			t.Fatalf("the README's example no longer has %s: update readmeExample", r[0])
		}
		code = strings.Replace(code, r[0], r[1], 1)
	}
	return "window.readmeLines = [];\n" +
		"const log = console.log; console.log = (...a) => { window.readmeLines.push(a.join(\" \")); log(...a); };\n" + code
}

// TestBrowserReadmeExample runs the example of sdk/js/README.md in Chromium as it is written
// (but for where the SDK and the broker are): the scripted model calls its tool, it defers,
// reports progress and a milestone, asks; the test answers as the caller; the job completes
// and the completion is spoken.
func TestBrowserReadmeExample(t *testing.T) {
	script := readmeExample(t)
	s := startSite(t, func(mux *http.ServeMux) {
		mux.HandleFunc("GET /test/readme.html", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, "<!doctype html>\n<title>README example</title>\n<script type=\"module\">\n%s</script>\n", script)
		})
	})
	r, _ := s.runStory(t, "readme", s.url+"/test/readme.html")
	for _, want := range []string{
		`caller: call book_table {"party":4}`,
		"agent: 7:30 or 8:15? Options: 7:30, 8:15.",
		"caller: 8:15",
		`agent: booking your table is done: {"time":"8:15"}`,
	} {
		if !slices.Contains(r.ReadmeLines, want) {
			t.Errorf("the example did not log %q: %q", want, r.ReadmeLines)
		}
	}
	if r.State != "ended" {
		t.Errorf("after hangUp the client is %q, want ended", r.State)
	}
	kinds := map[string]bool{}
	for _, e := range s.timeline(t, r.SessionID) {
		kinds[e.Kind] = true
	}
	for _, k := range []string{"deferred", "progress", "partial", "interaction", "result"} {
		if !kinds[k] {
			t.Errorf("the broker's timeline has no %s entry", k)
		}
	}
}
