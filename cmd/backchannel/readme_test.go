package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker/wiretest"
)

// TestProcessReadmeStory walks the README's story with real processes: `backchannel serve`
// (memory store, loopback key dev), the Go host example with a state file, and `backchannel
// call` as the text agent. The job is on the timeline; the host process is killed (SIGKILL, no
// goodbye) while the job runs and started again with the same state file; it resumes its slot,
// gets the job back from tool_deferred_resume and finishes it, and the waiting agent gets the
// result (SPEC 10).
func TestProcessReadmeStory(t *testing.T) {
	t.Parallel()
	example := buildExample(t)
	_, base := startServeProc(t, "serve")
	state := filepath.Join(t.TempDir(), "host.state")
	hostArgs := []string{"-url", wsURL(base), "-key", "dev", "-state", state}

	host := startBinary(t, "host", example, nil, hostArgs...)
	m := host.waitStderr(regexp.MustCompile(`serving render_report in session (\S+) \(join token (\S+)\)`))
	session, token := m[1], m[2]

	agent := startProc(t, "call", "call", "-url", base, "-session", session, "-token", token, "render_report", `{"month":"june"}`)
	agent.waitLine(regexp.MustCompile(`^\[cli-1 background_placeholder\]$`))
	waitKinds(t, base, session, "deferred")

	if err := host.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-host.exited
	if kinds := timelineKinds(t, base, session); contains(kinds, "result") {
		t.Fatalf("the job ended before the host was killed (timeline %v): the test proves nothing", kinds)
	}
	waitKinds(t, base, session, "disconnect")

	// The new process resumes the slot. The job comes back either in tool_deferred_resume (its
	// OnResume finishes it) or, when the killed process had not saved the tool_call's seq yet
	// (the state file is written lazily), as the replayed tool_call, whose handler defers it
	// again under the same handle and finishes it: either way the job goes on.
	again := startBinary(t, "host-again", example, nil, hostArgs...)
	if m := again.waitStderr(regexp.MustCompile(`serving render_report in session (\S+)`)); m[1] != session {
		t.Fatalf("the restarted host serves session %s, want it to resume %s", m[1], session)
	}
	agent.waitLine(regexp.MustCompile(`^\[cli-wait [a-z_]+\]$`))
	agent.expectExit0()
	out := strings.Join(agent.lines(), "\n")
	if !strings.Contains(out, "https://reports.example.com/report-") {
		t.Errorf("the agent's wait did not return the job's result:\n%s", out)
	}
	kinds := waitKinds(t, base, session, "result")
	if i, j := index(kinds, "resume"), index(kinds, "result"); i < 0 || i > j {
		t.Errorf("timeline %v: want the host's resume before the result", kinds)
	}
}

// buildExample builds sdk/go/example (with -race when the tests run with it).
func buildExample(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "example")
	args := []string{"build", "-o", path}
	if raceEnabled() {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "../../sdk/go/example")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return path
}

// waitStderr waits (at most startTimeout) for a line of stderr re matches and returns its
// submatches.
func (p *proc) waitStderr(re *regexp.Regexp) []string {
	p.t.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		if m := re.FindStringSubmatch(p.stderrText()); m != nil {
			return m
		}
		select {
		case <-p.exited:
			if m := re.FindStringSubmatch(p.stderrText()); m != nil {
				return m
			}
			p.t.Fatalf("%s exited (%v) without writing a line matching %s", p.name, p.waitErr, re)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s wrote no line matching %s within %v", p.name, re, startTimeout)
		}
	}
}

// timelineKinds returns the kinds of the session's timeline entries, in order.
func timelineKinds(t *testing.T, base, session string) []string {
	t.Helper()
	status, _, body := wiretest.HTTPDo(t, http.MethodGet, base+"/v1/sessions/"+session+"/timeline", "dev", "", "")
	if status != http.StatusOK {
		t.Fatalf("GET timeline: %d %s", status, body)
	}
	var tl struct {
		Entries []struct {
			Kind string `json:"kind"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(body, &tl); err != nil {
		t.Fatalf("timeline %s: %v", body, err)
	}
	kinds := make([]string, len(tl.Entries))
	for i, e := range tl.Entries {
		kinds[i] = e.Kind
	}
	return kinds
}

// waitKinds waits (at most startTimeout) until the timeline has an entry of kind, and returns
// the kinds then.
func waitKinds(t *testing.T, base, session, kind string) []string {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		kinds := timelineKinds(t, base, session)
		if contains(kinds, kind) {
			return kinds
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s on the timeline within %v: %v", kind, startTimeout, kinds)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func contains(s []string, v string) bool { return index(s, v) >= 0 }

func index(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// readme is the repository's README.md.
func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The README's "what is where" table names every command of the binary (usageText).
func TestReadmeListsEveryCommand(t *testing.T) {
	var row string
	for _, line := range strings.Split(readme(t), "\n") {
		if strings.HasPrefix(line, "| `cmd/backchannel` |") {
			row = line
		}
	}
	if row == "" {
		t.Fatal("README.md has no table row for `cmd/backchannel`")
	}
	_, list, ok := strings.Cut(usageText, "commands:\n")
	if !ok {
		t.Fatal("usageText has no commands: section")
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		cmd := strings.Fields(line)[0]
		n++
		if !strings.Contains(row, "`"+cmd+"`") {
			t.Errorf("README.md's row for cmd/backchannel does not list the command %s: %s", cmd, row)
		}
	}
	if n < 6 {
		t.Errorf("usageText lists %d commands, want serve, demo, verify-permission, call, simulate-realtime, bench", n)
	}
}

// Every link of the README is a file or folder of the repository (a newcomer's clone has
// nothing beside it), or a loopback address of the broker it runs.
func TestReadmeLinksStayInTheRepository(t *testing.T) {
	text := readme(t)
	links := regexp.MustCompile(`\]\(([^)]+)\)`).FindAllStringSubmatch(text, -1)
	links = append(links, regexp.MustCompile(`<(https?://[^>]+)>`).FindAllStringSubmatch(text, -1)...)
	if len(links) == 0 {
		t.Fatal("no links found in README.md")
	}
	for _, m := range links {
		target := m[1]
		if strings.HasPrefix(target, "http://127.0.0.1:") {
			continue
		}
		if strings.Contains(target, "://") || strings.HasPrefix(target, "/") || strings.Contains(target, "..") {
			t.Errorf("README.md links to %s, which is not in the repository", target)
			continue
		}
		if _, err := os.Stat(filepath.Join("../..", target)); err != nil {
			t.Errorf("README.md links to %s, which the repository does not have", target)
		}
	}
	if strings.Contains(text, "../") {
		t.Error("README.md names a path above the repository, which a clone of it does not have")
	}
}
