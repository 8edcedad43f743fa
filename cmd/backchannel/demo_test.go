package main

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDemo plays `backchannel demo` and checks that its printout tells the whole story in order:
// the call and its defer, the hand-off, two milestones narrated, the decision asked, answered
// and closed, the result and its narration delivered, and the end of the session.
func TestDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelError}))
	if err := runDemo(ctx, &out, "127.0.0.1:0", log); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	text := out.String()
	// The timeline is polled, so its lines and the conversation's interleave freely: each is
	// checked in its own order.
	timeline := []string{
		`call call_\S+ name="book_table" state="pending"`,
		`deferred call_\S+ .*status_label="booking your table"`,
		`progress call_\S+ note="calling the restaurant"`,
		`interaction call_\S+ .*state="opened"`,
		`interaction call_\S+ .*option="7:30" state="answered"`,
		`result call_\S+ output=\{"confirmation":"T-4711","party":4,"time":"7:30"\} state="completed"`,
		`narration call_\S+ attempt=1 kind="completion" response_id="\S+" state="delivered"`,
		`session_end reason="ended"`,
	}
	conversation := []string{
		`agent\s+says: Started booking your table in the background\.`,
		`agent\s+says: Update on booking your table: the restaurant picked up`,
		`agent\s+says: Update on booking your table: they have two tables left`,
		`agent\s+says: Would you like 7:30 or 8:15\?`,
		`caller\s+says: 7:30 please`,
		`agent\s+says: booking your table is done: `,
	}
	inOrder(t, text, regexp.MustCompile(`(?m)^\s*\S+s  timeline  .*$`), timeline)
	inOrder(t, text, regexp.MustCompile(`(?m)^\s*\S+s  (agent|caller) .*$`), conversation)
	if n := len(regexp.MustCompile(`narration call_\S+ attempt=1 kind="milestone" \S+ state="delivered"`).FindAllString(text, -1)); n != 2 {
		t.Errorf("%d milestone narrations delivered, want 2:\n%s", n, text)
	}
	if strings.Contains(text, "level=ERROR") {
		t.Errorf("the broker logged errors:\n%s", text)
	}
}

// inOrder checks that the lines of text that lines matches contain steps in this order.
func inOrder(t *testing.T, text string, lines *regexp.Regexp, steps []string) {
	t.Helper()
	rest := strings.Join(lines.FindAllString(text, -1), "\n")
	for _, s := range steps {
		loc := regexp.MustCompile(s).FindStringIndex(rest)
		if loc == nil {
			t.Fatalf("the demo's printout lacks (in order) %s:\n%s", s, text)
		}
		rest = rest[loc[1]:]
	}
}
